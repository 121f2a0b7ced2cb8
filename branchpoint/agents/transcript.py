"""The transcript: what chat prompts are rebuilt from, kept in the checkpointed state.

A chat prompt at any step is the system prompt, the earlier turns (`history`), the question, and
for every search run so far the model turn that asked for it and the results it got back. Those
turns live in the state's `transcript` channel (append-only), never in `steps` (the trace of a
thread's own calls, empty at the start of a fork branch), so a branch seeded from a checkpoint
rebuilds exactly the prompt its parent would have sent there (prompts are a pure function of the
checkpointed state; `tests/experiments/test_fork_invariant.py` checks it).

Entries (JSON-serialisable dicts):
- `{"kind": "search", "query", "source", "evidence_start", "evidence_count", "turn"}`: one
  executed search; its passages are `evidence[evidence_start : evidence_start + evidence_count]`
  (stored once, in `evidence`); `turn` is the model turn that decided it:
  `{"call_id", "content", "reasoning"}` (tool-call id as the server gave it, the visible text, and
  the reasoning text, kept for protocols that resend it).
- `{"kind": "self_eval", "text"}`: the `self_eval` prompt variant's verdict (its call is made once
  per execution, before the first decision).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from branchpoint.models.call import ModelCall


class ModelTurn(TypedDict):
    """The parts of a model reply a later prompt resends (see `model_turn`)."""

    call_id: str
    content: str | None
    reasoning: str | None


class SearchEntry(TypedDict):
    """The transcript entry of one executed search (see the module docstring)."""

    kind: Literal["search"]
    query: str | None
    source: str | None
    evidence_start: int
    evidence_count: int
    turn: ModelTurn


def model_turn(call: ModelCall, fallback_id: str) -> ModelTurn:
    """The parts of a model reply a later prompt resends: the first tool call's id (or
    `fallback_id` when the server gave none), the visible content and the reasoning text."""
    call_id = next((tc.get("id") for tc in call.tool_calls if tc.get("id")), None) or fallback_id
    return ModelTurn(call_id=call_id, content=call.text, reasoning=call.reasoning)


def unknown_turn(index: int) -> ModelTurn:
    """The turn of the `index`-th search when no model turn was kept for it: a made-up call id
    (`call_INDEX`), no content, no reasoning."""
    return ModelTurn(call_id=f"call_{index}", content=None, reasoning=None)


def search_entry(state: Mapping[str, Any], query: str, source: str, n_docs: int) -> SearchEntry:
    """The transcript entry of a search the `search` node has just run on `state`'s pending query."""
    pending = state.get("pending") or {}
    index = sum(1 for e in state.get("transcript") or [] if e.get("kind") == "search")
    turn = pending.get("turn") or unknown_turn(index)
    return SearchEntry(
        kind="search",
        query=query,
        source=source,
        evidence_start=len(state.get("evidence") or []),
        evidence_count=n_docs,
        turn=ModelTurn(**turn),
    )


def searches(state: Mapping[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each executed search of the state's transcript with the passages it returned, in order."""
    evidence = state.get("evidence") or []
    out = []
    for entry in state.get("transcript") or []:
        if entry.get("kind") == "search":
            start = int(entry["evidence_start"])
            out.append((entry, evidence[start : start + int(entry["evidence_count"])]))
    return out
