"""The estimates of a study's sweep run (epochs, the effort × cap frontier, budget use) and of its
decision quality, each against the simulator's truth.

Rows are `compare`'s: {estimate, truth, ci, covered, kind}, one quantity per condition of the
sweep (`[effort, cap c]`), joined by condition label. Truths (`sim.run_truth`, per
question p_q, E[cost_q] and the search count's distribution of the condition's own agent):

- pass@k, pass^k, flip rate (metrics.json `epochs.by_condition.<c>`): means over the questions
  with enough epochs of 1 − (1 − p)^k, p^k, 1 − p^n − (1 − p)^n; their intervals are built here,
  ±z·SE with the estimators' exact variance given the p's (conditional on the run's questions,
  like the truth: metrics.json's question bootstrap also carries the spread of the p's);
- frontier points (`effort_cap_frontier.series[0].points`): overall accuracy = mean p_q, TPC =
  Σ E[cost] / Σ p, mean cost = mean E[cost]; steps along the cap axis (`cap_roi`): the change of
  accuracy and of mean cost, and their ratio per 1,000 tokens; along the effort axis
  (`effort_roi`): the change of accuracy;
- budgets (`budgets.by_condition.<c>.search_cap`): the share reaching the cap, P(k = cap); the
  use share, E[k] / cap;
- decision quality at `initial` (value.json `decision_quality.by_step.0`): need is Δ̄ > 0 on the
  state's m_T, m_S repeats, P(need) = P(Ȳ_S > Ȳ_T) from the exact p_T, p_S; the parent's first
  decision searches with P(search), answers with P(answer) (`StudyTruth.decisions`), independent
  of the branches (their seeds differ): E[TP] = Σ P(search)·P(need) and so on, and F1, the
  over-search rate FP / (FP + TN) and the under-search rate FN / (FN + TP) are the ratios of
  these expectations that the pooled ratio estimators target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from scipy import stats as sps

from branchpoint.evaluation.metrics import MetricsConfig
from branchpoint.sim import run_truth as RT
from branchpoint.sim.study_truth import StudyTruth
from branchpoint.validation.sweep import ConditionTruth, SweepTruth
from branchpoint.validation.truths import NotApplicable, p_choose_search

Rows = dict[str, dict[str, Any]]
NO_COSTS = "token costs of chat transcripts are not modelled (sim/costs.py): no cost truth"


def _row(estimate: Any, truth: float, ci: Any) -> dict[str, Any]:
    est = None if estimate is None or isinstance(estimate, str) else float(estimate)
    ok = isinstance(ci, list) and len(ci) == 2 and None not in ci
    lo, hi = (float(ci[0]), float(ci[1])) if ok else (math.nan, math.nan)
    covered = bool(lo - 1e-9 <= truth <= hi + 1e-9) if ok and math.isfinite(lo) and math.isfinite(hi) else None
    return {"estimate": est, "truth": truth, "ci": [lo, hi] if ok else None, "covered": covered, "kind": "two_sided"}


class _Out:
    """Rows, what did not apply (with why) and what was missing (with where)."""

    def __init__(self) -> None:
        self.rows: Rows = {}
        self.not_applicable: dict[str, str] = {}
        self.missing: dict[str, str] = {}

    def add(self, name: str, truth: Callable[[], float], read: Callable[[], tuple[Any, Any]], where: str) -> None:
        try:
            t = float(truth())
        except NotApplicable as exc:
            self.not_applicable[name] = str(exc)
            return
        try:
            est, ci = read()
        except (KeyError, IndexError, TypeError, StopIteration):
            self.missing[name] = where
            return
        self.rows[name] = _row(est, t, ci)


def _const(x: float) -> float:
    return x


def _cost(values: dict[str, Any], cfg: MetricsConfig) -> float:
    return float(np.mean([v.output_tokens + cfg.lam * v.input_tokens + cfg.mu * v.searches for v in values.values()]))


def _pass_truth(kind: str, p: float, n: int, k: int) -> float:
    return RT.pass_at_k(p, k) if kind == "pass_at_k" else RT.pass_hat_k(p, k)


def _flip_truth(p: float, n: int, k: int) -> float:
    return RT.flip(p, n)


def _read_pass(entries: list[dict[str, Any]], key: str, k: int, half: float) -> tuple[Any, Any]:
    value = next(e for e in entries if e["k"] == k)[key]
    return value, [value - half, value + half]


def _read_value(entry: dict[str, Any], key: str, half: float) -> tuple[Any, Any]:
    value = entry[key]
    return value, [value - half, value + half]


def _stat(entry: dict[str, Any], key: str) -> tuple[Any, Any]:
    return entry[key], entry.get(f"{key}_ci")


def _stat_at(table: dict[str, Any], path: tuple[str, ...], key: str) -> tuple[Any, Any]:
    """`_stat` of the entry at `path` in `table` (KeyError, read as missing, where there is none)."""
    entry = table
    for part in path:
        entry = entry[part]
    return _stat(entry, key)


def _read_at(table: dict[str, Any], label: str, key: str, half: float) -> tuple[Any, Any]:
    return _read_value(table[label], key, half)


def _epoch_rows(out: _Out, sweep: SweepTruth, metrics: dict[str, Any], z: float) -> None:
    by = (metrics.get("epochs") or {}).get("by_condition") or {}
    stats = (("pass@{k}", "pass_at_k", RT.est_pass_at_k), ("pass^{k}", "pass_hat_k", RT.est_pass_hat_k))
    for label, c in sweep.conditions.items():
        tag = f"[{c.effort}, cap {c.cap}]"
        p = {q: v.p for q, v in c.values.items()}
        entries = by.get(label, {}).get("pass") or []
        for k in range(2, max(c.epochs.values(), default=0) + 1):
            for name, key, est in stats:
                res = RT.mean_and_se(partial(_pass_truth, key), est, p, c.epochs, k, k)
                if res is not None:
                    out.add(
                        f"{name.format(k=k)} {tag}",
                        partial(_const, res[0]),
                        partial(_read_pass, entries, key, k, z * res[1]),
                        f"metrics.json epochs.by_condition.{label}.pass[k={k}].{key}",
                    )
        res = RT.mean_and_se(_flip_truth, RT.est_flip, p, c.epochs, 2, 2)
        if res is not None:
            out.add(
                f"flip rate {tag}",
                partial(_const, res[0]),
                partial(_read_at, by, label, "flip_rate", z * res[1]),
                f"metrics.json epochs.by_condition.{label}.flip_rate",
            )


class _Frontier:
    """The frontier truths of a sweep: accuracy, mean cost and TPC per condition label."""

    def __init__(self, sweep: SweepTruth, cfg: MetricsConfig) -> None:
        self.sweep, self.cfg = sweep, cfg

    def accuracy(self, label: str) -> float:
        return float(np.mean([v.p for v in self.sweep.conditions[label].values.values()]))

    def cost(self, label: str) -> float:
        if not self.sweep.costs_modelled:
            raise NotApplicable(NO_COSTS)
        return _cost(self.sweep.conditions[label].values, self.cfg)

    def tpc(self, label: str) -> float:
        vals = self.sweep.conditions[label].values
        return self.cost(label) * len(vals) / sum(v.p for v in vals.values())

    def accuracy_change(self, a: str, b: str) -> float:
        return self.accuracy(b) - self.accuracy(a)

    def added_cost(self, a: str, b: str) -> float:
        return self.cost(b) - self.cost(a)

    def roi(self, a: str, b: str) -> float:
        return self.accuracy_change(a, b) / (self.added_cost(a, b) / 1000.0)


def _frontier_rows(out: _Out, sweep: SweepTruth, metrics: dict[str, Any], cfg: MetricsConfig) -> None:
    series = ((metrics.get("effort_cap_frontier") or {}).get("series") or [{}])[0]
    points = {p["condition"]: p for p in series.get("points") or []}
    where = "metrics.json effort_cap_frontier.series[0]"
    f = _Frontier(sweep, cfg)
    for label, c in sweep.conditions.items():
        tag = f"[{c.effort}, cap {c.cap}]"
        for name, key, truth in (
            ("accuracy", "overall_accuracy", f.accuracy),
            ("TPC", "tpc", f.tpc),
            ("mean cost", "mean_cost", f.cost),
        ):
            out.add(
                f"frontier {name} {tag}",
                partial(truth, label),
                partial(_stat_at, points, (label,), key),
                f"{where}.points[{label}].{key}",
            )
    for step in series.get("cap_roi") or []:
        a, b = step["from_condition"], step["to_condition"]
        if a not in sweep.conditions or b not in sweep.conditions:
            continue
        tag = f"[{step['effort']}, cap {step['from_cap']}→{step['to_cap']}]"
        for name, key, diff in (
            ("accuracy change", "overall_accuracy_change", f.accuracy_change),
            ("added cost", "added_cost_per_query", f.added_cost),
            ("accuracy per 1k tokens", "overall_accuracy_per_1k_tokens", f.roi),
        ):
            out.add(f"cap step {name} {tag}", partial(diff, a, b), partial(_stat, step, key), f"{where}.cap_roi.{key}")
    for step in series.get("effort_roi") or []:
        a, b = step["from_condition"], step["to_condition"]
        if a not in sweep.conditions or b not in sweep.conditions:
            continue
        tag = f"[cap {step['cap']}, {step['from_effort']}→{step['to_effort']}]"
        out.add(
            f"effort step accuracy change {tag}",
            partial(f.accuracy_change, a, b),
            partial(_stat, step, "overall_accuracy_change"),
            f"{where}.effort_roi.overall_accuracy_change",
        )


def _reach(c: ConditionTruth) -> float:
    if c.counts is None:
        raise NotApplicable("the truth of a module:function policy gives no search-count distribution")
    return RT.reach_share(list(c.counts.values()), c.cap)


def _use(c: ConditionTruth) -> float:
    return float(np.mean([v.searches for v in c.values.values()])) / c.cap


def _budget_rows(out: _Out, sweep: SweepTruth, metrics: dict[str, Any]) -> None:
    by = (metrics.get("budgets") or {}).get("by_condition") or {}
    for label, c in sweep.conditions.items():
        tag = f"[{c.effort}, cap {c.cap}]"
        for name, key, truth in (("reached share", "hit_share", _reach), ("use share", "use_share", _use)):
            out.add(
                f"budget {name} {tag}",
                partial(truth, c),
                partial(_stat_at, by, (label, "search_cap"), key),
                f"metrics.json budgets.by_condition.{label}.search_cap.{key}",
            )


def decision_counts(truth: StudyTruth) -> np.ndarray:
    """E[TP, FP, FN, TN] of the parents' first decisions against need at `initial` (module doc)."""
    if not truth.scored():
        raise NotApplicable("no state has both actions (the design offers no search: forks plan THINK only)")
    if not truth.decisions:
        raise NotApplicable("the truth of a module:function policy does not give its first decision")
    total = np.zeros(4)
    for st in truth.scored():
        if st.boundary != "initial":
            continue
        t, s = st.roles
        need = p_choose_search(st.p[t], st.p[s], st.repeats[t], st.repeats[s], 0.0)
        search, answer = truth.decisions[st.question_id]
        total += [search * need, search * (1 - need), answer * need, answer * (1 - need)]
    return total


def _ratio(num: float, den: float) -> float:
    if den <= 1e-12:
        raise NotApplicable("no state can fall in the rate's denominator (its expected count is 0)")
    return num / den


def _read_decision(value: dict[str, Any], key: str) -> tuple[Any, Any]:
    entry = value["decision_quality"]["by_step"]["0"][key]
    return entry["value"], entry["interval"]


def _decision_rate(truth: StudyTruth, rate: Callable[[np.ndarray], float]) -> float:
    return rate(decision_counts(truth))


def _decision_rows(out: _Out, truth: StudyTruth, value: dict[str, Any]) -> None:
    rates: dict[str, tuple[str, Callable[[np.ndarray], float]]] = {
        "F1": ("f1", lambda c: _ratio(2 * c[0], 2 * c[0] + c[1] + c[2])),
        "over-search rate": ("over_search_rate", lambda c: _ratio(c[1], c[1] + c[3])),
        "under-search rate": ("under_search_rate", lambda c: _ratio(c[2], c[2] + c[0])),
    }
    for name, (key, rate) in rates.items():
        out.add(
            f"decision at initial: {name}",
            partial(_decision_rate, truth, rate),
            partial(_read_decision, value, key),
            f"value.json decision_quality.by_step.0.{key}",
        )


def sweep_rows(
    sweep: SweepTruth | None,
    metrics: dict[str, Any] | None,
    truth: StudyTruth,
    value: dict[str, Any],
    level: float = 0.95,
) -> tuple[Rows, dict[str, str], dict[str, str]]:
    """(rows, not applicable, missing) of the sweep run's estimates and the decision quality."""
    out = _Out()
    _decision_rows(out, truth, value)
    if sweep is not None and metrics is not None:
        z = float(sps.norm.ppf(0.5 + level / 2))
        _epoch_rows(out, sweep, metrics, z)
        _frontier_rows(out, sweep, metrics, MetricsConfig())
        _budget_rows(out, sweep, metrics)
    return out.rows, out.not_applicable, out.missing
