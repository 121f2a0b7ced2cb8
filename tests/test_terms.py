"""The shared terms in `branchpoint.traces`: boundary kinds, actions and their legality."""

from __future__ import annotations

import pytest

from branchpoint import traces
from branchpoint.traces import (
    BOUNDARY_KINDS,
    FORK_ACTIONS,
    LEGAL_ACTIONS,
    after_search_boundary,
    collapse_search_count,
    legal_boundary_kind,
    search_count,
)


@pytest.mark.parametrize(
    ("boundary", "kind"),
    [
        ("initial", "initial"),
        ("pending_query", "pending_query"),
        ("after_search_1", "after_search_k"),
        ("after_search_12", "after_search_k"),
        (None, None),
        ("reflect", None),
        ("", None),
    ],
)
def test_legal_boundary_kind_names_only_our_boundaries(boundary, kind):
    assert legal_boundary_kind(boundary) == kind


def test_collapse_search_count_keeps_foreign_names():
    assert collapse_search_count("after_search_3") == "after_search_k"
    assert collapse_search_count("initial") == "initial"
    assert collapse_search_count("reflect") == "reflect"  # another framework's boundary, as written


def test_after_search_boundaries_round_trip():
    for k in (1, 2, 17):
        assert search_count(after_search_boundary(k)) == k
        assert legal_boundary_kind(after_search_boundary(k)) == "after_search_k"
    assert search_count("initial") is None and search_count("after_search_x") is None


def test_every_boundary_kind_has_legal_actions_and_every_action_is_legal_somewhere():
    assert set(LEGAL_ACTIONS) == set(BOUNDARY_KINDS)
    assert {a for actions in LEGAL_ACTIONS.values() for a in actions} == set(FORK_ACTIONS)
    assert set(traces.ForkAction.__args__) == set(FORK_ACTIONS)  # type: ignore[attr-defined]
    assert set(traces.BoundaryKind.__args__) == set(BOUNDARY_KINDS)  # type: ignore[attr-defined]
