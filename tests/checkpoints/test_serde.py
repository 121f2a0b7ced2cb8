"""The checkpoint serializer lives on its own, so the checkpoint modules import each other without
a cycle (the PostgreSQL store used to import the SQLite store back for it; the acyclic_siblings
contract in pyproject.toml checks it, run by tests/test_layers.py)."""

from __future__ import annotations

from branchpoint.checkpoints.serde import safe_serde


def test_safe_serde_round_trips_plain_state():
    serde = safe_serde()
    value = {"steps": [{"kind": "search", "retrieved": [{"doc_id": "d", "score": 1.0}]}], "pending": None}
    assert serde.loads_typed(serde.dumps_typed(value)) == value
