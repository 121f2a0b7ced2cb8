"""The supervision-subset study: a forecaster fitted on a historical study against the same
forecaster fitted on k labelled target questions (search-value study, Appendix D, "Supervision
subsets": "Historical reuse is evaluated with four outer supporting-component folds, three
inner folds, twenty training subsets, and target budgets 20, 40, 80, 120 and 240. Losses
average separate fitted models, retaining each fit's label budget. At forty questions, the
historical120 minus target40 Brier difference is −0.0110 … SEARCH alone gives −0.0103 …
Decomposing squared loss across training subsets attributes 0.0083 of the 0.0110 gap to
training-subset variability").

Design (`supervision_study`): the target's scored states are dealt into `outer_folds` folds by
support component. For each fold, its states are evaluated and the other folds' questions are
the training pool:

- *historical*: the forecaster fitted on every state of the history (another fork study: the
  source configuration; "historicalN" with N its questions), predicting the fold's states;
- *target-k*: for each of `samples` seeded draws of k pool questions, the forecaster fitted on
  their states alone (k ∈ `budgets`; a budget above the pool is left out).

Every fit is a registered forecaster run on a development view (`dev_view.DevView`) whose dev
rows are its training states, so it sees no outcome of the states it predicts (for the
historical fit, the history's states and the evaluated target states are joined into one
table, the history's rows as dev rows). Per budget, over the evaluated states (each predicted
by the fits of its own fold):

    brier_target_k   = mean over samples of the stratum-balanced Brier of fit s,
    difference       = Brier_historical − brier_target_k   (negative: history is better),
    search_only      = the same difference on the SEARCH term alone, mean_j (q_S − Y_S,j)²,
    subset_variability = ½ Σ_a mean_states Var_s(q_a,s): the part of brier_target_k that the
                       spread of the fits across training subsets adds (Brier is quadratic in
                       q, so mean_s Brier(q_s) = Brier(mean_s q_s) + ½ Σ_a Var_s(q_a,s)).

Intervals are component-bootstrap intervals of the per-state columns over the evaluated states,
conditional on the fits (the seed: "its intervals condition on those fits").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval, single_component_strata
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import ForecasterUnavailable, registered_forecasters, run_forecaster
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.scores import balanced_mean

BUDGETS: tuple[int, ...] = (20, 40, 80, 120, 240)
SAMPLES = 20
OUTER_FOLDS = 4
FAMILIES: tuple[str, ...] = ("historical_mean", "stratum_prior", "public_prefix_ridge")


def concat_states(a: StateTable, b: StateTable) -> StateTable:
    """The rows of `a` then those of `b` in one table (the features both carry; `a`'s counts)."""

    def role(x: RoleOutcomes, y: RoleOutcomes) -> RoleOutcomes:
        status = None
        if x.status is not None or y.status is not None:
            status = [list(s) for s in (x.status or [["ok"] * len(v) for v in x.y])] + [
                list(s) for s in (y.status or [["ok"] * len(v) for v in y.y])
            ]
        return RoleOutcomes(x.y + y.y, x.tokens + y.tokens, x.answers + y.answers, status)

    return StateTable(
        keys=a.keys + b.keys,
        question_id=a.question_id + b.question_id,
        question=a.question + b.question,
        stratum=np.concatenate([a.stratum, b.stratum]),
        component=np.concatenate([a.component, b.component]),
        boundary=a.boundary + b.boundary,
        boundary_kind=np.concatenate([a.boundary_kind, b.boundary_kind]),
        t_action=a.t_action + b.t_action,
        s_action=a.s_action + b.s_action,
        prefix_steps=a.prefix_steps + b.prefix_steps,
        search_budget=a.search_budget + b.search_budget,
        think=role(a.think, b.think),
        search=role(a.search, b.search),
        counts=a.counts,
        features={k: np.concatenate([a.features[k], b.features[k]]) for k in a.features if k in b.features},
    )


def outer_folds(states: StateTable, k: int, seed: int) -> np.ndarray:
    """Fold number per row: support components in a seeded order, dealt round-robin."""
    comps = sorted(set(states.component.tolist()))
    order = np.random.default_rng(seed).permutation(len(comps))
    fold_of = {comps[i]: pos % k for pos, i in enumerate(order)}
    return np.array([fold_of[c] for c in states.component], dtype=int)


def state_brier(q_t: np.ndarray, q_s: np.ndarray, states: StateTable) -> tuple[np.ndarray, np.ndarray]:
    """Per state: ½ Σ_a mean_j (q_a − Y_a,j)², and the SEARCH term mean_j (q_S − Y_S,j)²."""
    t = np.array([np.mean((q - y) ** 2) for q, y in zip(q_t, states.think.y)])
    s = np.array([np.mean((q - y) ** 2) for q, y in zip(q_s, states.search.y)])
    return 0.5 * (t + s), s


def _fit(entry: Any, table: StateTable, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fc = run_forecaster(entry, DevView.of(table, train), train)
    return fc.q_think, fc.q_search


def supervision_study(
    target: StateTable,
    history: StateTable,
    *,
    families: Sequence[str] = FAMILIES,
    budgets: Sequence[int] = BUDGETS,
    samples: int = SAMPLES,
    folds: int = OUTER_FOLDS,
    seed: int = 0,
    resamples: int = 10_000,
    level: float = 0.95,
) -> dict[str, Any]:
    """value.json's `supervision_subsets` (module doc) for each forecaster family in `families`."""
    entries = {e.name: e for e in registered_forecasters()}
    n_comp = len(set(target.component.tolist()))
    k = min(folds, n_comp)
    if k < 2:
        return {"skipped": f"needs at least 2 support components in the target, got {n_comp}"}
    fold = outer_folds(target, k, seed)
    n_hist = len(set(history.question_id))
    out: dict[str, Any] = {
        "history": {"questions": n_hist, "states": len(history)},
        "outer_folds": k,
        "samples": samples,
        "budgets": [],
        "families": {},
        "skipped_families": {},
    }
    pool_sizes = [len(set(np.asarray(target.question_id, dtype=object)[fold != f].tolist())) for f in range(k)]
    usable = [b for b in budgets if b <= min(pool_sizes)]
    out["budgets"] = usable
    if not usable:
        out["skipped"] = f"every budget exceeds the smallest training pool ({min(pool_sizes)} questions)"
        return out
    for name in families:
        if name not in entries:
            out["skipped_families"][name] = "not a registered forecaster"
            continue
        try:
            out["families"][name] = _family(
                entries[name], target, history, fold, k, usable, samples, seed, resamples, level
            )
        except ForecasterUnavailable as exc:
            out["skipped_families"][name] = str(exc)
    return out


def _family(
    entry: Any,
    target: StateTable,
    history: StateTable,
    fold: np.ndarray,
    k: int,
    budgets: Sequence[int],
    samples: int,
    seed: int,
    resamples: int,
    level: float,
) -> dict[str, Any]:
    n = len(target)
    hist_q = np.zeros((n, 2))
    target_q = {b: np.zeros((samples, n, 2)) for b in budgets}
    qids = np.asarray(target.question_id, dtype=object)
    rng = np.random.default_rng(seed)
    for f in range(k):
        held = np.flatnonzero(fold == f)
        ev = target.rows(held)
        joined = concat_states(history, ev)
        train = np.arange(len(joined)) < len(history)
        q_t, q_s = _fit(entry, joined, train)
        hist_q[held] = np.stack([q_t[~train], q_s[~train]], axis=1)
        pool = sorted(set(qids[fold != f].tolist()))
        for b in budgets:
            for s in range(samples):
                chosen = set(rng.choice(pool, size=b, replace=False).tolist())
                rows = np.flatnonzero(np.array([q in chosen for q in qids]) & (fold != f))
                table = target.rows(np.concatenate([rows, held]))
                mask = np.arange(len(table)) < len(rows)
                q_t, q_s = _fit(entry, table, mask)
                target_q[b][s, held] = np.stack([q_t[~mask], q_s[~mask]], axis=1)
    hist_b, hist_s = state_brier(hist_q[:, 0], hist_q[:, 1], target)
    cols: dict[str, np.ndarray] = {"historical": hist_b}
    for b in budgets:
        per = [state_brier(target_q[b][s, :, 0], target_q[b][s, :, 1], target) for s in range(samples)]
        brier_b = np.mean([p[0] for p in per], axis=0)
        search_b = np.mean([p[1] for p in per], axis=0)
        cols[f"target/{b}"] = brier_b
        cols[f"difference/{b}"] = hist_b - brier_b
        cols[f"search_only/{b}"] = hist_s - search_b
        cols[f"variability/{b}"] = 0.5 * target_q[b].var(axis=0).sum(axis=1)
    names = list(cols)
    matrix = np.stack([cols[c] for c in names], axis=1)
    point = dict(zip(names, balanced_mean(matrix, target.stratum)))
    boot: dict[str, np.ndarray] = {}
    if resamples > 0 and not single_component_strata(target.component, target.stratum):
        draws = bootstrap_means(matrix, target.component, target.stratum, resamples=resamples, seed=seed)
        boot = {c: draws[:, j] for j, c in enumerate(names)}

    def est(c: str) -> dict[str, Any]:
        iv = None
        if boot:
            lo, hi = percentile_interval(boot[c], level)
            iv = [float(lo), float(hi)]
        return {"value": float(point[c]), "interval": iv}

    return {
        "brier_historical": est("historical"),
        "by_budget": {
            str(b): {
                "brier_target": est(f"target/{b}"),
                "historical_minus_target": est(f"difference/{b}"),
                "search_only": est(f"search_only/{b}"),
                "subset_variability": est(f"variability/{b}"),
            }
            for b in budgets
        },
    }
