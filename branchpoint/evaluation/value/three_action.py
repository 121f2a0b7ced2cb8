"""Three actions at a pending query: STOP, SAME (SEARCH) and SWITCH (search-value study, Appendix E).

"STOP cancels the pending query; SAME executes it … and SWITCH through [another source]. …
Gain loss averages SAME-minus-STOP and SWITCH-minus-STOP risks." "The outcome scorer uses
squared error on bounded F1 and the gain scorer uses Equation 5." "An additional
sample-informed analysis retains every constant action and all five fixed token prices."

The table (`three_action_table`) holds the pending_query states where all three actions have at
least 2 repeats: the (STOP, SEARCH) and (STOP, SWITCH) state tables on their common states.
A three-action forecast is (q_STOP, q_SAME, q_SWITCH) per state; its scores:

- outcome error = ⅓ Σ_a mean_i (q_a − Y_i^a)²  (the Brier form on bounded rewards);
- gain loss = ½ [L(q_SAME − q_STOP; SAME vs STOP) + L(q_SWITCH − q_STOP; SWITCH vs STOP)], each L
  the unbiased gain risk of Eq. 5 with that pair's θ̂.

Three-action forecasts files (`read_three_action_forecasts`): JSONL lines {"parent_execution_id",
"checkpoint_id", "q_stop", "q_same", "q_switch"}, one per pending state (the same state key as a
two-action forecasts file; `q_same` is the pending query executed as issued). `branchpoint value
--forecasts FILE` recognises such a file by its first line and scores it here, under the name
`file:<stem>`, beside the references.

References fitted on dev rows: `action_means` (each action's dev mean: the mean guard's
output) and `zero_gain` (every action at the STOP dev mean). Routers: each constant action,
the best constant on dev rows, and the sample-informed selector over three actions (⌊m/2⌋ free
selection draws per action, scored on the rest, averaged over every split).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.value.forecasters import read_state_probabilities
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.routers import selection_splits
from branchpoint.evaluation.value.scores import balanced_mean, gain_risk, theta_hat, utility
from branchpoint.traces import TraceError, iter_json_lines

ACTIONS: tuple[str, ...] = ("STOP", "SAME", "SWITCH")
#: The fields of a line of a three-action forecasts file.
THREE_ACTION_FIELDS: tuple[str, ...] = ("parent_execution_id", "checkpoint_id", "q_stop", "q_same", "q_switch")
NEUTRAL = 0.5  # the forecast of every action for a state the file lacks
ThreeForecast = tuple[np.ndarray, np.ndarray, np.ndarray]


class ThreeActions(NamedTuple):
    """The common pending states: the STOP/SAME table (row order) and SWITCH outcomes aligned to it."""

    states: StateTable  # T role = STOP, S role = SAME (SEARCH)
    switch: RoleOutcomes

    def roles(self) -> tuple[RoleOutcomes, RoleOutcomes, RoleOutcomes]:
        return self.states.think, self.states.search, self.switch


def three_action_table(stop_same: StateTable, stop_switch: StateTable) -> ThreeActions | None:
    """The pending_query states present in both tables (STOP as T in both), or None if none;
    rows in `stop_same` order."""
    index = stop_switch.index()
    rows = [i for i, k in enumerate(stop_same.keys) if k in index and stop_same.boundary_kind[i] == "pending_query"]
    if not rows:
        return None
    mask = np.zeros(len(stop_same), dtype=bool)
    mask[rows] = True
    base = stop_same.subset(mask)
    switch = stop_switch.search.subset(np.array([index[k] for k in base.keys], dtype=int))
    return ThreeActions(base, switch)


def outcome_error(q: tuple[np.ndarray, np.ndarray, np.ndarray], roles: tuple[RoleOutcomes, ...]) -> np.ndarray:
    """⅓ Σ_a mean_i (q_a − Y_i^a)² per state, mean_i (q − Y_i)² = q² − 2qȲ + ΣY²/m."""
    return cast(np.ndarray, sum(qa * qa - 2 * qa * r.mean_y + r.sum_y2 / r.m for qa, r in zip(q, roles)) / 3.0)


def two_action_gain_loss(q: tuple[np.ndarray, np.ndarray, np.ndarray], roles: tuple[RoleOutcomes, ...]) -> np.ndarray:
    """½ [L(q_SAME − q_STOP) + L(q_SWITCH − q_STOP)] per state, each with its own pair's θ̂ (Eq. 5)."""
    stop, same, switch = roles
    out = np.zeros(len(stop.m))
    for q_a, r in ((q[1], same), (q[2], switch)):
        out += 0.5 * gain_risk(q_a - q[0], r.mean_y - stop.mean_y, theta_hat(stop, r))
    return out


def reference_forecasts(table: ThreeActions, dev: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`action_means` and `zero_gain` from the dev rows (stratum-balanced), for every row."""
    n = len(table.states)
    strata = table.states.stratum
    means = [float(balanced_mean(r.mean_y[dev], strata[dev])) for r in table.roles()]
    full: Callable[[float], np.ndarray] = lambda v: np.full(n, v)
    return {
        "action_means": (full(means[0]), full(means[1]), full(means[2])),
        "zero_gain": (full(means[0]), full(means[0]), full(means[0])),
    }


def sample_informed_three(roles: tuple[RoleOutcomes, ...], price: float) -> np.ndarray:
    """Per state: choose the action with the highest utility on its ⌊m/2⌋ selection draws (free),
    score it on the remaining draws; averaged over every combination of the actions' splits
    (ties: the earlier action in STOP, SAME, SWITCH)."""
    n = len(roles[0].m)
    out = np.zeros(n)
    for i in range(n):
        sel, ev = [], []
        for r in roles:
            y, tok = r.y[i], r.tokens[i]
            splits = selection_splits(len(y))
            sel.append(np.array([utility(y[list(s)].mean(), tok[list(s)].mean(), price) for s, _ in splits]))
            ev.append(np.array([utility(y[list(e)].mean(), tok[list(e)].mean(), price) for _, e in splits]))
        s_grid = np.stack(np.meshgrid(*sel, indexing="ij"), axis=-1)
        e_grid = np.stack(np.meshgrid(*ev, indexing="ij"), axis=-1)
        pick = np.argmax(s_grid, axis=-1)  # the first maximum on ties
        out[i] = float(np.take_along_axis(e_grid, pick[..., None], axis=-1).mean())
    return out


def three_action_columns(
    table: ThreeActions,
    dev: np.ndarray,
    test: np.ndarray,
    prices: tuple[float, ...],
    forecasts: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """Per-state columns on the test rows (outcome error and gain loss per forecast, utility per
    router and price) whose balanced means `three_action_study` reports, and what was chosen."""
    fcs = dict(reference_forecasts(table, dev if dev.any() else test))
    fcs.update(forecasts or {})
    roles = tuple(r.subset(np.flatnonzero(test)) for r in table.roles())
    strata = table.states.stratum[test]
    names: list[str] = []
    cols: list[np.ndarray] = []
    for name, q in fcs.items():
        qt = tuple(np.asarray(x)[test] for x in q)
        names += [f"outcome/{name}", f"gain/{name}"]
        cols += [outcome_error(qt, roles), two_action_gain_loss(qt, roles)]
    chosen: dict[str, Any] = {}
    choose_on = dev if dev.any() else test
    all_roles = table.roles()
    for price in prices:
        pk = f"{price:g}"
        dev_u = [
            float(balanced_mean(utility(r.mean_y, r.mean_tokens, price)[choose_on], table.states.stratum[choose_on]))
            for r in all_roles
        ]
        best = int(np.argmax(dev_u))
        chosen[pk] = {"best_constant": ACTIONS[best]}
        for a, r in zip(ACTIONS, roles):
            names.append(f"U/{pk}/always_{a.lower()}")
            cols.append(utility(r.mean_y, r.mean_tokens, price))
        names.append(f"U/{pk}/best_constant")
        cols.append(utility(roles[best].mean_y, roles[best].mean_tokens, price))
        names.append(f"U/{pk}/sample_informed")
        cols.append(sample_informed_three(roles, price))
    chosen["chosen_on"] = "dev" if dev.any() else "scored (in-sample)"
    chosen["strata"] = strata
    return names, np.stack(cols, axis=1), chosen


def is_three_action_file(path: Path) -> bool:
    """True when the first line of a forecasts file carries `q_stop` (a three-action file)."""
    try:
        for _, obj in iter_json_lines(path):
            return "q_stop" in obj
    except TraceError as exc:
        raise InputError(str(exc)) from None
    return False


def read_three_action_forecasts(
    path: Path, table: ThreeActions, known: set[tuple[str, str]]
) -> tuple[ThreeForecast, dict[str, Any]]:
    """(q_STOP, q_SAME, q_SWITCH) for every row of `table` from a three-action forecasts file.

    A line missing a field, or with a value that is not a probability, is an InputError naming
    file, line and field. Lines for states of the study that are not three-action pending states
    (`known`: every state key the study read) are counted as `n_unscored_state`, other keys as
    `n_unknown` (with examples); repeated lines as `n_duplicate` (the last wins). States the file
    lacks get 0.5 for every action and are counted (`n_missing`), so every forecast is scored on
    the same states.
    """
    q, info = read_state_probabilities(path, table.states.index(), len(table.states), known, THREE_ACTION_FIELDS)
    return (q[:, 0], q[:, 1], q[:, 2]), info
