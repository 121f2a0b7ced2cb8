"""How checkpoints are (de)serialised: plain data only, whichever store holds them.

Both checkpoint stores (`store.sqlite_checkpointer`, `postgres.postgres_checkpointer`) and the
readers that open a database directly (`experiments.verify_stores`) use this one serializer.
"""

from __future__ import annotations

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer


def safe_serde() -> JsonPlusSerializer:
    """LangGraph's serializer restricted to plain data: no class named in a checkpoint is imported
    or called on load.

    The default one rebuilds any Python object a checkpoint names (a database someone else wrote
    could run code on load); our state is plain JSON-like data, so nothing else is needed.
    """
    return JsonPlusSerializer(allowed_msgpack_modules=None)
