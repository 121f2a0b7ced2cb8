"""Legal action boundaries of a recorded execution, read back from its checkpoint history."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot
from pydantic import BaseModel

from branchpoint.checkpoints.values import thread_states
from branchpoint.traces import legal_boundary_kind


class BoundaryInfo(BaseModel):
    """One checkpoint at a legal action boundary, with what the agent had spent by then."""

    checkpoint_id: str
    step: int
    boundary: str
    kind: str
    searches: int
    pending_query: str | None
    input_tokens: int
    output_tokens: int
    source: str | None = None


def boundary_info(checkpoint_id: str, step: int, values: dict[str, Any]) -> BoundaryInfo | None:
    """The boundary a checkpoint's state values mark, or None when it is not a legal boundary."""
    kind = legal_boundary_kind(values.get("boundary"))
    if kind is None:
        return None
    usages = [s.get("usage") or {} for s in values.get("steps", [])]
    pending = values.get("pending") or {}
    return BoundaryInfo(
        checkpoint_id=checkpoint_id,
        step=step,
        boundary=values["boundary"],
        kind=kind,
        searches=int(values.get("searches", 0)),
        pending_query=pending.get("text") if pending.get("action") == "search" else None,
        input_tokens=sum(int(u.get("input_tokens", 0)) for u in usages),
        output_tokens=sum(int(u.get("output_tokens", 0)) for u in usages),
        source=values.get("source"),
    )


def original_path(snapshots: list[StateSnapshot]) -> list[StateSnapshot]:
    """The snapshots on a thread's original path: the first-written leaf and its ancestors.

    A thread that was replayed in place (`graph.invoke(None, past_config)`) holds a second path
    branching off an earlier checkpoint, written later; its checkpoints are not the recorded
    execution's and are left out (checkpoint ids are time-ordered)."""
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in snapshots}
    parents = {(s.parent_config or {}).get("configurable", {}).get("checkpoint_id") for s in snapshots}
    leaves = sorted(i for i in by_id if i not in parents)
    if len(leaves) <= 1:
        return snapshots
    path, current = [], leaves[0]
    while current in by_id:
        path.append(by_id[current])
        current = (by_id[current].parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return path


def list_boundaries(saver: BaseCheckpointSaver[str], thread_id: str, reader: Any = None) -> list[BoundaryInfo]:
    """Checkpoints of `thread_id` at legal boundaries on its original path (see
    `original_path`), oldest first (the saver lists newest first).

    Input checkpoints (before the graph's first step) are skipped: the `initial` boundary is the
    first loop checkpoint, where `decide` is about to run. `reader`: see `values.checkpoint_values`.
    """
    out = []
    for snapshot in original_path(list(thread_states(saver, thread_id, reader))):
        metadata = snapshot.metadata or {}
        if metadata.get("source") == "input":
            continue
        info = boundary_info(
            snapshot.config["configurable"]["checkpoint_id"],
            int(metadata.get("step", -1)),
            snapshot.values,
        )
        if info is not None:
            out.append(info)
    return sorted(out, key=lambda b: b.step)
