"""The decision factorial of a fork study (search-value study §5.4, Appendix E): fixed vs
query-specific gain × fixed vs query-specific cost (`FACTORIAL_CELLS`), its fixed terms chosen on
the dev rows (`fixed_decision_terms`), and value.json's `decision_factorial` section
(`factorial_section`: each cell over the best constant, and the contrasts).

The cells' routers are `routers.split_rule`; `scoring.state_columns` adds their utilities to the
columns that `scoring.score` bootstraps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from branchpoint.evaluation.value.json_numbers import num
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.scores import balanced_mean

FACTORIAL_CELLS: tuple[tuple[str, bool, bool], ...] = (
    # (name, query-specific gain, query-specific cost)
    ("fixed_gain_fixed_cost", False, False),
    ("query_gain_fixed_cost", True, False),
    ("fixed_gain_query_cost", False, True),
    ("query_gain_query_cost", True, True),
)


def fixed_decision_terms(states: StateTable, rows: np.ndarray) -> dict[str, float]:
    """The fixed terms of the decision factorial, from `rows` (dev rows, or the scored set when
    there are none): the stratum-balanced mean reward of each action, their difference (the
    fixed gain) and the mean incremental tokens T̄_S − T̄_T (the fixed cost). Search-value study,
    Appendix E ("Fixed action rewards are 0.68125 and 0.725 …; the fixed incremental token cost
    is 7,007.49375")."""
    cols = np.stack(
        [
            states.think.mean_y[rows],
            states.search.mean_y[rows],
            states.think.mean_tokens[rows],
            states.search.mean_tokens[rows],
        ],
        axis=1,
    )
    r_t, r_s, t_t, t_s = balanced_mean(cols, states.stratum[rows])
    return {
        "reward_think": float(r_t),
        "reward_search": float(r_s),
        "gain": float(r_s - r_t),
        "incremental_tokens": float(t_s - t_t),
    }


def factorial_section(
    utility_meta: dict[str, dict[str, dict[str, Any]]],
    point: dict[str, float],
    boot: dict[str, np.ndarray],
    interval: Any,
    selection: dict[str, Any],
) -> dict[str, Any]:
    """The decision factorial per price: each cell's utility over the best constant, and the
    contrasts of adding one kind of information to the other (search-value study §5.4)."""
    out: dict[str, Any] = {
        "fixed_terms": selection["factorial_fixed_terms"],
        "fixed_terms_from": selection["rows"],
        "selection_draws": "free (not charged); ⌊m/2⌋ per action select, the rest evaluate; all splits averaged",
        "by_price": {},
    }
    contrasts = {
        "cost_added_to_gain": ("query_gain_query_cost", "query_gain_fixed_cost"),
        "gain_added_to_cost": ("query_gain_query_cost", "fixed_gain_query_cost"),
    }
    for pk in utility_meta:
        col: Callable[[str], str] = lambda cell: f"U/{pk}/factorial:{cell}"
        best = f"U/{pk}/best_constant"
        entry: dict[str, Any] = {"over_best_constant": {}, "contrasts": {}}
        for cell, _, _ in FACTORIAL_CELLS:
            diff = point[col(cell)] - point[best]
            entry["over_best_constant"][cell] = {
                "utility": num(point[col(cell)]),
                "difference": num(diff),
                "interval": interval(boot[col(cell)] - boot[best]) if boot else None,
            }
        for cname, (a, b) in contrasts.items():
            entry["contrasts"][cname] = {
                "difference": num(point[col(a)] - point[col(b)]),
                "interval": interval(boot[col(a)] - boot[col(b)]) if boot else None,
            }
        qq, qf, fq, ff = (
            col(c)
            for c in (
                "query_gain_query_cost",
                "query_gain_fixed_cost",
                "fixed_gain_query_cost",
                "fixed_gain_fixed_cost",
            )
        )
        inter: Callable[[Mapping[str, Any]], Any] = lambda src: src[qq] - src[qf] - src[fq] + src[ff]
        entry["contrasts"]["interaction"] = {
            "difference": num(inter(point)),
            "interval": interval(inter(boot)) if boot else None,
        }
        out["by_price"][pk] = entry
    return out
