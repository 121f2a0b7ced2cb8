"""Legal action boundaries and the actions a state can be forked into there: the names a
checkpoint's `boundary` channel and a branch record's `branch` are written with."""

from __future__ import annotations

from typing import Literal

#: Legal action boundaries: the kinds a checkpoint's state records in its `boundary` channel.
#: `after_search_k` is written `after_search_1`, `after_search_2`, ... (see
#: `after_search_boundary`); the other two are written as their kind.
BoundaryKind = Literal["initial", "after_search_k", "pending_query"]
BOUNDARY_INITIAL = "initial"
BOUNDARY_AFTER_SEARCH = "after_search_k"
BOUNDARY_PENDING = "pending_query"
BOUNDARY_KINDS: tuple[str, ...] = (BOUNDARY_INITIAL, BOUNDARY_AFTER_SEARCH, BOUNDARY_PENDING)
"""The legal boundaries a state is saved at: before the first decision (`initial`), after the k-th
search's results (`after_search_k`), and with a query chosen but not yet run (`pending_query`)."""
_AFTER_SEARCH_PREFIX = "after_search_"


def after_search_boundary(k: int) -> str:
    """The boundary written after the k-th search: `after_search_k` with k filled in."""
    return f"{_AFTER_SEARCH_PREFIX}{k}"


def legal_boundary_kind(boundary: str | None) -> str | None:
    """The legal boundary kind a state's `boundary` marks (`after_search_3` -> `after_search_k`),
    or None when it marks no legal boundary (None, or a name that is not one of ours)."""
    if boundary is None:
        return None
    if boundary.startswith(_AFTER_SEARCH_PREFIX):
        return BOUNDARY_AFTER_SEARCH
    return boundary if boundary in BOUNDARY_KINDS else None


def search_count(boundary: str) -> int | None:
    """The k of an `after_search_k` boundary as written (`after_search_3` -> 3); None for others."""
    rest = boundary.removeprefix(_AFTER_SEARCH_PREFIX)
    return int(rest) if rest != boundary and rest.isdigit() else None


def collapse_search_count(boundary: str) -> str:
    """A recorded boundary name with its search count collapsed (`after_search_3` ->
    `after_search_k`); any other name is kept as written, a foreign trace's own names too (the
    search-value study groups states by this)."""
    return BOUNDARY_AFTER_SEARCH if boundary.startswith(_AFTER_SEARCH_PREFIX) else boundary


ForkAction = Literal["THINK", "SEARCH", "STOP", "SWITCH"]
"""The four actions a saved state can be forked into (a branch record's `branch`): THINK (answer
now from the evidence in hand), SEARCH (search more, up to a budget; at a pending query: run it
on the same source), STOP (cancel the pending query and answer), SWITCH (run the pending query
on another source). Not a policy's own decision (search or answer,
`branchpoint.agents.protocols.DecisionKind`)."""
FORK_ACTIONS: tuple[str, ...] = ("THINK", "SEARCH", "STOP", "SWITCH")
"""The fork actions in their canonical order (`ForkAction`'s values)."""
#: Which fork actions are legal at which boundary kind.
LEGAL_ACTIONS: dict[str, tuple[str, ...]] = {
    BOUNDARY_INITIAL: ("THINK", "SEARCH"),
    BOUNDARY_AFTER_SEARCH: ("THINK", "SEARCH"),
    BOUNDARY_PENDING: ("STOP", "SEARCH", "SWITCH"),
}
