"""The minimal-search study (`--minimal-search`): for each correct execution with k searches, the
smallest t < k whose THINK continuation from `after_search_t` is still correct (over-search % from real
counterfactuals, see `ForkSummary.over_search_pct`)."""

from __future__ import annotations

from typing import Any

from branchpoint.checkpoints import list_boundaries
from branchpoint.checkpoints.values import state_reader
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import is_correct
from branchpoint.traces import BOUNDARY_AFTER_SEARCH, BOUNDARY_INITIAL, ExecutionRecord


def minimal_searches(
    parents: list[ExecutionRecord], branches: list[ExecutionRecord], saver: Any, judge: str
) -> list[dict[str, Any]]:
    """For each correct parent with k > 0 searches: the smallest t < k whose THINK continuation
    from `after_search_t` (t = 0: `initial`) is correct in at least half of its repeats; k if none."""
    judged_parents = {r.execution_id: r for r in judge_records(parents, judge)}
    think = [b for b in branches if b.branch == "THINK" and b.status != "incomplete"]
    judged = judge_records(think, judge)
    by_checkpoint: dict[tuple[str, str], list[bool]] = {}
    for b in judged:
        assert b.parent is not None  # a THINK branch has its parent
        by_checkpoint.setdefault((b.parent.execution_id, b.parent.checkpoint_id), []).append(is_correct(b, judge))
    out = []
    reader = state_reader(saver)
    for parent in judged_parents.values():
        k = parent.search_calls
        if k == 0 or not is_correct(parent, judge):
            continue
        minimal = k
        for boundary in list_boundaries(saver, parent.execution_id, reader):
            if boundary.kind in (BOUNDARY_INITIAL, BOUNDARY_AFTER_SEARCH) and boundary.searches < minimal:
                votes = by_checkpoint.get((parent.execution_id, boundary.checkpoint_id))
                if votes and sum(votes) * 2 >= len(votes):
                    minimal = boundary.searches
        out.append(
            {
                "execution_id": parent.execution_id,
                "question_id": parent.question_id,
                "condition": parent.condition,
                "searches": k,
                "minimal_searches": minimal,
                "judge": judge,
            }
        )
    return out
