"""Read an execution's state back from its checkpoints, delta channels rebuilt.

`steps` and `evidence` are `DeltaChannel`s (see `branchpoint.agents.state`): a checkpoint's
blob does not hold them; LangGraph rebuilds them from the writes of the checkpoint's ancestors.
Reading a checkpoint therefore goes through a graph over the agent's state (any graph over
`AgentState` has the same channels), never through the saver's raw `channel_values`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from branchpoint.agents.state import AgentState
from branchpoint.errors import InputError


def state_reader(saver: BaseCheckpointSaver[str]) -> CompiledStateGraph[AgentState, None, AgentState, AgentState]:
    """A graph over `AgentState` on `saver`, used only to read states (it runs nothing)."""
    builder: StateGraph[AgentState, None, AgentState, AgentState]
    builder = StateGraph(AgentState)
    builder.add_node("read_only", lambda state: {})
    builder.add_edge(START, "read_only")
    return builder.compile(checkpointer=saver)


def _config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint_values(
    saver: BaseCheckpointSaver[str],
    thread_id: str,
    checkpoint_id: str,
    reader: CompiledStateGraph[Any, Any, Any, Any] | None = None,
) -> dict[str, Any]:
    """The full state values saved at one checkpoint of a thread; InputError when it does not exist.

    `reader`: a graph over `AgentState` on this saver (e.g. the agent graph) to read through,
    instead of compiling one per call.
    """
    tup = saver.get_tuple(_config(thread_id, checkpoint_id))
    if tup is None or tup.config["configurable"].get("checkpoint_id") != checkpoint_id:
        raise InputError(f"checkpoint {checkpoint_id} of execution {thread_id} does not exist")
    snapshot = (reader or state_reader(saver)).get_state(_config(thread_id, checkpoint_id))
    return {k: copy.deepcopy(v) for k, v in snapshot.values.items() if not k.startswith("branch:")}


async def acheckpoint_values(
    saver: BaseCheckpointSaver[str],
    thread_id: str,
    checkpoint_id: str,
    reader: CompiledStateGraph[Any, Any, Any, Any] | None = None,
) -> dict[str, Any]:
    """`checkpoint_values` through the saver's async interface (a saver used on an event loop)."""
    tup = await saver.aget_tuple(_config(thread_id, checkpoint_id))
    if tup is None or tup.config["configurable"].get("checkpoint_id") != checkpoint_id:
        raise InputError(f"checkpoint {checkpoint_id} of execution {thread_id} does not exist")
    snapshot = await (reader or state_reader(saver)).aget_state(_config(thread_id, checkpoint_id))
    return {k: copy.deepcopy(v) for k, v in snapshot.values.items() if not k.startswith("branch:")}


def thread_states(
    saver: BaseCheckpointSaver[str], thread_id: str, reader: CompiledStateGraph[Any, Any, Any, Any] | None = None
) -> Iterator[StateSnapshot]:
    """Every checkpoint of a thread with its full state values, newest first (`reader`: as in
    `checkpoint_values`)."""
    return (reader or state_reader(saver)).get_state_history(_config(thread_id))
