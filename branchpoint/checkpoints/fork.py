"""Forking a saved state into THINK / SEARCH / STOP / SWITCH continuations.

A branch is a new LangGraph thread whose input is the checkpoint's state values with a
`directive` and an empty step list (so its costs are its own), never the original thread. The
state keeps everything prompts are built from (`transcript`, `evidence`, `history`), so the
branch's first request is the one its parent would have sent there had it taken the action. The
branches cannot see each other's steps and can run concurrently (forks within one thread would
be interleaved in that thread's LangGraph history). `route_start` in the graph sends the seeded
state to the node that continues it.

Legal actions (`traces.LEGAL_ACTIONS`): at `initial` and `after_search_k`, THINK (answer now from the evidence in hand)
and SEARCH (up to K more searches, then answer); at `pending_query`, STOP (cancel the query and
answer), SEARCH (= SAME: run the pending query, then continue) and SWITCH (run the pending query
on another named source, then continue as SEARCH).
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel

from branchpoint.agents.state import Directive
from branchpoint.agents.transcript import SearchEntry, unknown_turn
from branchpoint.errors import InputError
from branchpoint.traces import FORK_ACTIONS, LEGAL_ACTIONS, ForkAction, legal_boundary_kind


class IllegalActionError(InputError):
    """An action that is not legal at a boundary (e.g. STOP where no query is pending)."""


def check_action(action: str, boundary: str, where: str = "") -> None:
    """Refuse an unknown action, or one that is illegal at this boundary, with a clear message."""
    if action not in FORK_ACTIONS:
        raise InputError(f"unknown fork action {action!r} (expected one of {', '.join(FORK_ACTIONS)})")
    kind = legal_boundary_kind(boundary)
    if kind is None:
        raise IllegalActionError(f"{where}{boundary!r} is not a legal action boundary")
    if action not in LEGAL_ACTIONS[kind]:
        reason = " (no query is pending there)" if action in ("STOP", "SWITCH") else ""
        raise IllegalActionError(
            f"{where}{action} is not legal at {boundary}{reason}; legal there: {', '.join(LEGAL_ACTIONS[kind])}"
        )


class Prefix(BaseModel):
    """What the parent had spent before the checkpoint (not counted again in the branch record)."""

    steps: int
    search_calls: int
    input_tokens: int
    output_tokens: int


def prefix_of(values: dict[str, Any]) -> Prefix:
    """The prefix sizes of a checkpoint's state: steps, searches and tokens so far."""
    usages = [s.get("usage") or {} for s in values.get("steps", [])]
    return Prefix(
        steps=len(values.get("steps", [])),
        search_calls=int(values.get("searches", 0)),
        input_tokens=sum(int(u.get("input_tokens", 0)) for u in usages),
        output_tokens=sum(int(u.get("output_tokens", 0)) for u in usages),
    )


def branch_input(
    values: dict[str, Any],
    action: str,
    *,
    search_budget: int = 3,
    switch_source: str | None = None,
) -> tuple[dict[str, Any], int]:
    """The input state of a branch and its search cap (searches so far + the budget).

    The checkpoint's evidence, searches and source are kept; the step list starts empty so the
    branch records only its own calls; the action goes into the `directive` channel.
    """
    check_action(action, values.get("boundary") or "")
    if action == "SWITCH" and not switch_source:
        raise InputError("SWITCH needs a source to switch to (--switch-source NAME)")
    if action == "SWITCH" and switch_source == values.get("source"):
        raise IllegalActionError(
            f"SWITCH to {switch_source!r}: that is the state's current source (SWITCH runs the pending "
            "query on another source; SEARCH runs it on the same one)"
        )
    if search_budget < 1 and action in ("SEARCH", "SWITCH"):
        raise InputError(f"--search-budget must be at least 1 for {action}, got {search_budget}")
    searches = int(values.get("searches", 0))
    state = {**values, "steps": [], "status": "ok", "final_answer": None}
    if "transcript" not in values:  # saved before states kept a transcript: rebuild it from the trace
        state["transcript"] = transcript_from_steps(values)
    directive = Directive(action=cast(ForkAction, action))  # an action check_action accepted
    cap = searches
    if action == "STOP":
        state.update(pending=None, boundary=None)
    elif action in ("SEARCH", "SWITCH"):
        directive["search_budget"] = search_budget
        cap = searches + search_budget
        if action == "SWITCH":
            assert switch_source is not None  # checked above
            directive["source"] = switch_source
            state["source"] = switch_source
    state["directive"] = directive
    return state, cap


def transcript_from_steps(values: dict[str, Any]) -> list[SearchEntry]:
    """The transcript of a state saved before states kept one, rebuilt from its (full) trace:
    each search step with the decision that asked for it (its text, no tool-call id)."""
    entries: list[SearchEntry] = []
    start = 0
    for step in values.get("steps") or []:
        if step.get("kind") != "search":
            continue
        n = len(step.get("retrieved") or [])
        entries.append(
            SearchEntry(
                kind="search",
                query=step.get("query"),
                source=step.get("source"),
                evidence_start=start,
                evidence_count=n,
                turn=unknown_turn(len(entries)),
            )
        )
        start += n
    return entries
