"""Budget disclosure (`agent.budget_disclosure`): what the model is told of its search cap and
token budget, as text built from the checkpointed state alone.

The state's `budget` channel (`state.Budget`: mode, search cap, token budget; set in the initial
state and inherited by fork branches) says what to tell; the searches made and the generated
tokens at each search come from `searches` and the transcript. So a branch forked at a boundary
is told exactly what its parent would have been told at that step (its own SEARCH budget is
never disclosed: the branch is the parent's counterfactual, told the parent's budget).

Modes:
- `hidden`: nothing (the default; prompts are as they were without this module);
- `start`: the limits, once, where the prompt states the task (`start_text`): "You may search
  at most 3 times (and write at most 500 tokens) in all.";
- `every_step`: that, and the budget left after every search (`left_text`): "Searches left: 2 of
  3." (and " Tokens left: 380 of 500." under a token budget) — in chat transcripts after each
  search result (so earlier turns never change), in the few-shot completion prompt as a
  `Budget:` line of the current question's block (it shows only the current state).

Where no search is offered (`no_search`, `agent.search: false`, a prompt without the search
tool) nothing about searches is said: only a token budget is disclosed, if one is set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DISCLOSURES: tuple[str, ...] = ("hidden", "start", "every_step")

#: What the simulated model reads back (`sim.observe`): the countdown and the cap stated.
LEFT_PATTERN = re.compile(r"Searches left: (\d+) of (\d+)\.")
START_PATTERN = re.compile(r"You may search at most (\d+) times")


def budget_of(state: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The state's disclosed budget, or None when its mode is `hidden` (or none is stored)."""
    budget: Mapping[str, Any] | None = state.get("budget")
    if not budget or budget.get("disclosure", "hidden") == "hidden":
        return None
    return budget


def start_text(state: Mapping[str, Any], *, search: bool) -> str | None:
    """The limits as the prompt states them once (`start` and `every_step`), or None: "You may
    search at most N times in all." / with a token budget "... and write at most T tokens in
    all."; without search offered, only the token budget ("You may write at most T tokens in
    all."), or None."""
    budget = budget_of(state)
    if budget is None:
        return None
    tokens = budget.get("token_budget")
    if search:
        tail = f" and write at most {tokens} tokens" if tokens is not None else ""
        return f"You may search at most {int(budget['search_cap'])} times{tail} in all."
    return f"You may write at most {tokens} tokens in all." if tokens is not None else None


def left_text(state: Mapping[str, Any], searches: int, tokens: int | None, *, search: bool = True) -> str | None:
    """The countdown of `every_step` after `searches` searches with `tokens` generated (None:
    not counted), or None in the other modes: "Searches left: L of N." (+ " Tokens left: R of
    T." under a token budget)."""
    budget = budget_of(state)
    if budget is None or budget.get("disclosure") != "every_step":
        return None
    parts = []
    if search:
        cap = int(budget["search_cap"])
        parts.append(f"Searches left: {max(cap - searches, 0)} of {cap}.")
    total = budget.get("token_budget")
    if total is not None and tokens is not None:
        parts.append(f"Tokens left: {max(int(total) - tokens, 0)} of {total}.")
    return " ".join(parts) or None


def current_left_text(state: Mapping[str, Any], *, search: bool = True) -> str | None:
    """The countdown at the state itself (its searches and generated tokens so far)."""
    tokens = state.get("generated_tokens")
    return left_text(state, int(state.get("searches") or 0), None if tokens is None else int(tokens), search=search)


def entry_left_text(state: Mapping[str, Any], index: int, entry: Mapping[str, Any]) -> str | None:
    """The countdown shown after the `index`-th search (0-based) of the transcript: the searches
    made then, and the tokens generated before it (`generated_tokens` of its entry)."""
    tokens = entry.get("generated_tokens")
    return left_text(state, index + 1, None if tokens is None else int(tokens))
