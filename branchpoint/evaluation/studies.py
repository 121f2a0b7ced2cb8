"""Views across conditions: search vs no search, the search-cap sweep and its marginal ROI,
multi-turn curves and reasoning effort (`search_effect`, `search_cap_sweep`, `marginal_roi`,
`multi_turn`, `reasoning_effort`), and the ratio statistics of a condition they share
(`ratio_stat`, `ratio_stats`, `difference`, `ACCURACIES`).

Conditions are the records' `condition` dicts (the swept settings). Keys are found by name, with
or without a section prefix: `agent.search` or `search`, `agent.search_cap` or `search_cap`,
`multi_turn.preceding`, `multi_turn.context`; the model is `model.name`, else the run id; the
reasoning effort is any key containing `reasoning_effort`.

- *With vs without search* pairs two conditions of one model that differ only in the search key
  (true vs false); when the conditions have no search key, ones that differ only in the search
  cap, cap > 0 vs cap 0. Changes are with − without, with paired bootstrap intervals (conditions
  over the same questions share their resamples).
- *Search-cap sweep*: conditions that differ only in the search cap (search not switched off),
  ordered by cap. Marginal ROI between consecutive caps a < b =
  (accuracy_b − accuracy_a) / ((mean cost_b − mean cost_a) / 1000): accuracy change (a fraction)
  per 1,000 tokens of added cost per query, where cost = g + λ·x + μ·|S|. Undefined when the
  mean cost does not change.
  Undefined too when the cost barely moves: |Δ mean cost| < `ROI_MIN_ADDED_COST` (10 tokens per
  query, 1 % of the study's normalisation k = 1,000 tokens), where the ratio would explode
  (a 0.5-point gain over 1 token reads as +50,000 %).
- *Multi-turn*: curves of accuracy by `multi_turn.preceding`, one per `multi_turn.context`
  (answerable / mixed / unanswerable) and setting of the other keys; only when the keys exist.

Over-search % (from the fork engine's minimal searches) is in `over_search`; how condition keys
are found (`find_key`, `search_disabled`) in `conditions`.

Every view reads a condition's sums over all its executions, so with `run.epochs` > 1 each epoch
counts as one execution (pooled per question) and the bootstrap draws a question with all its
epochs (question-clustered intervals); epochs are never conditions (they share the label).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.bootstrap import ratio_samples
from branchpoint.evaluation.conditions import as_number, find_key, truthy
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.evaluation.tally import Sums, set_stat

#: Below this change in mean cost per query (tokens) a marginal ROI is undefined (see above).
ROI_MIN_ADDED_COST = 10.0
MODEL_KEY = "model.name"
EFFORT_ORDER = ("none", "minimal", "low", "medium", "high")
#: The three accuracies every view reports.
ACCURACIES = ("answer_accuracy", "abstention_accuracy", "overall_accuracy")
#: Each statistic a view reports: (numerator column, denominator column, +inf when the
#: denominator is 0) of `tally.COLUMNS`.
RATIOS: dict[str, tuple[str, str, bool]] = {
    "answer_accuracy": ("correct_answer", "answerable", False),
    "abstention_accuracy": ("correct_abstention", "unanswerable", False),
    "overall_accuracy": ("correct", "n", False),
    "tpc": ("cost", "correct", True),
    "mean_cost": ("cost", "n", False),
    "mean_search_calls": ("search_calls", "n", False),
    "mean_output_tokens": ("output_tokens", "n", False),
    "mean_reasoning_tokens": ("reasoning_tokens", "n", False),
    "mean_wall_s": ("wall_s", "n", False),
}


def _rest(condition: dict[str, Any], *drop: str | None) -> dict[str, Any]:
    return {k: v for k, v in condition.items() if k not in drop}


def _key(condition: dict[str, Any]) -> str:
    return json.dumps(condition, sort_keys=True, default=str)


def ratio_stat(s: Sums, name: str) -> tuple[float | None, np.ndarray | None]:
    """(point, resampled values) of the statistic `name` of `RATIOS` over the sums `s`; TPC of
    no execution is undefined (None), of executions none of them correct +inf."""
    num, den, inf = RATIOS[name]
    if inf and s.count("n") == 0:
        return None, None
    return s.ratio(num, den, zero_den_inf=inf)


def ratio_stats(s: Sums, names: tuple[str, ...], cfg: MetricsConfig) -> dict[str, Any]:
    """`n` and each statistic of `names` with its interval (`<name>_ci`), as a view's point lists them."""
    out: dict[str, Any] = {"n": s.count("n")}
    for name in names:
        set_stat(out, name, *ratio_stat(s, name), cfg)
    return out


def difference(
    a: tuple[float | None, np.ndarray | None], b: tuple[float | None, np.ndarray | None]
) -> tuple[float | None, np.ndarray | None]:
    """a − b with samples; None where either side is undefined or both are infinite."""
    (pa, sa), (pb, sb) = a, b
    if pa is None or pb is None:
        return None, None
    with np.errstate(invalid="ignore"):
        point = pa - pb
        samples = None if sa is None or sb is None else sa - sb
    return (None if math.isnan(point) else point), samples


class ConditionSet:
    """The conditions of a run: their dicts, sums and model names, by label."""

    def __init__(self, conditions: dict[str, dict[str, Any]], sums: dict[str, Sums], models: dict[str, str]) -> None:
        self.conditions = conditions
        self.sums = sums
        self.models = models

    def model(self, label: str) -> str:
        cond = self.conditions[label]
        return str(cond[MODEL_KEY]) if MODEL_KEY in cond else self.models[label]


# --------------------------------------------------------------------------------------------
# With vs without search
# --------------------------------------------------------------------------------------------


def _search_pair(with_c: dict[str, Any], without_c: dict[str, Any]) -> str | None:
    """The key on which two conditions form a (with search, without search) pair, or None."""
    if set(with_c) != set(without_c):
        return None
    key = find_key(with_c, "search")
    if key is not None:
        same_rest = _rest(with_c, key) == _rest(without_c, key)
        return key if same_rest and truthy(with_c[key]) and not truthy(without_c[key]) else None
    cap = find_key(with_c, "search_cap")
    if cap is None or _rest(with_c, cap) != _rest(without_c, cap):
        return None
    hi, lo = as_number(with_c[cap]), as_number(without_c[cap])
    return cap if hi is not None and lo is not None and hi > 0 and lo == 0 else None


def search_effect(cs: ConditionSet, cfg: MetricsConfig) -> list[dict[str, Any]]:
    """Every (with, without) search pair of one model, with the change of each metric."""
    out = []
    for w in sorted(cs.conditions):
        for wo in sorted(cs.conditions):
            key = _search_pair(cs.conditions[w], cs.conditions[wo])
            if key is None or cs.model(w) != cs.model(wo):
                continue
            entry: dict[str, Any] = {
                "model": cs.model(w),
                "with": w,
                "without": wo,
                "paired_on": key,
                "n_with": cs.sums[w].count("n"),
                "n_without": cs.sums[wo].count("n"),
            }
            for name in (*ACCURACIES, "tpc", "mean_cost", "mean_search_calls"):
                a, b = ratio_stat(cs.sums[w], name), ratio_stat(cs.sums[wo], name)
                metric: dict[str, Any] = {"with": a[0], "without": b[0]}
                set_stat(metric, "change", *difference(a, b), cfg)
                entry[name] = metric
            out.append(entry)
    out.sort(key=lambda e: (e["model"], e["with"], e["without"]))
    return out


# --------------------------------------------------------------------------------------------
# Search-cap sweep and marginal ROI
# --------------------------------------------------------------------------------------------


def effort_order(values: Sequence[str], spec_values: Sequence[Any] | None) -> tuple[list[str], str]:
    """`values` (the efforts present) in the spec's order, then the built-in order, then as
    given; and where the order came from ("spec" or "built-in")."""
    present = list(dict.fromkeys(values))
    from_spec = [str(v) for v in spec_values or [] if str(v) in present]
    builtin = {e: i for i, e in enumerate(EFFORT_ORDER)}
    rest = sorted(
        (v for v in present if v not in from_spec),
        key=lambda v: (builtin.get(v.lower(), len(builtin)), present.index(v)),
    )
    return list(dict.fromkeys(from_spec)) + rest, ("spec" if from_spec else "built-in")


def _effort_rank(conditions: Sequence[dict[str, Any]], sweep: Mapping[str, Sequence[Any]] | None) -> dict[str, int]:
    """Each reasoning effort present in `conditions` -> its place in the spec's sweep order
    (then the built-in order): figures and tables list efforts as the spec does."""
    efforts, spec_values = [], None
    for cond in conditions:
        for key in sorted(k for k in cond if "reasoning_effort" in k):
            efforts.append(str(cond[key]))
            spec_values = spec_values or (sweep or {}).get(key)
    order, _ = effort_order(efforts, spec_values)
    return {e: i for i, e in enumerate(order)}


def _effort_of(condition: dict[str, Any]) -> str | None:
    keys = sorted(k for k in condition if "reasoning_effort" in k)
    return str(condition[keys[0]]) if keys else None


def search_cap_sweep(
    cs: ConditionSet, cfg: MetricsConfig, sweep: Mapping[str, Sequence[Any]] | None = None
) -> list[dict[str, Any]]:
    """One series per setting of the other keys with ≥ 2 caps: points by cap and marginal ROI;
    series that differ in reasoning effort come in the spec's order of efforts (`sweep`)."""
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for label, cond in cs.conditions.items():
        cap_key = find_key(cond, "search_cap")
        if cap_key is None:
            continue
        search_key = find_key(cond, "search")
        if search_key is not None and not truthy(cond[search_key]):
            continue
        cap = as_number(cond[cap_key])
        if cap is not None:
            groups.setdefault((cap_key, _key(_rest(cond, cap_key))), []).append((cap, label))
    series = []
    rank = _effort_rank([json.loads(rest) for _, rest in groups], sweep)

    def in_spec_order(item: tuple[tuple[str, str], Any]) -> tuple[Any, ...]:
        (cap_key, rest_json), _ = item
        rest = json.loads(rest_json)
        effort = _effort_of(rest)
        others = _key({k: v for k, v in rest.items() if "reasoning_effort" not in k})
        return (cap_key, others, rank.get(effort, len(rank)) if effort is not None else -1, rest_json)

    for (cap_key, rest_json), members in sorted(groups.items(), key=in_spec_order):
        if len({c for c, _ in members}) < 2:
            continue
        members.sort()
        points = []
        for cap, label in members:
            point = {"cap": int(cap) if cap == int(cap) else cap, "condition": label}
            point.update(ratio_stats(cs.sums[label], (*ACCURACIES, "tpc", "mean_cost", "mean_search_calls"), cfg))
            points.append(point)
        roi: list[dict[str, Any]] = []
        for (_cap_a, a), (_cap_b, b) in itertools.pairwise(members):
            added = difference(ratio_stat(cs.sums[b], "mean_cost"), ratio_stat(cs.sums[a], "mean_cost"))
            step: dict[str, Any] = {"from_cap": points[len(roi)]["cap"], "to_cap": points[len(roi) + 1]["cap"]}
            set_stat(step, "added_cost_per_query", *added, cfg)
            if added[0] is not None and abs(added[0]) < ROI_MIN_ADDED_COST:
                step["roi_undefined"] = f"mean cost per query changes by less than {ROI_MIN_ADDED_COST:g} tokens"
            for name in ACCURACIES:
                gain = difference(ratio_stat(cs.sums[b], name), ratio_stat(cs.sums[a], name))
                set_stat(step, f"{name}_per_1k_tokens", *roi_per_1k(gain, added), cfg)
            roi.append(step)
        first = members[0][1]
        series.append(
            {
                "cap_key": cap_key,
                "other": json.loads(rest_json),
                "model": cs.model(first),
                "points": points,
                "marginal_roi": roi,
                "roi_min_added_cost": ROI_MIN_ADDED_COST,
            }
        )
    return series


def marginal_roi(
    gain: float, added_cost: float, k: float = 1000.0, min_added_cost: float = ROI_MIN_ADDED_COST
) -> float | None:
    """Marginal ROI_j = ΔAccuracy_{j−1→j} / (ΔCost_{j−1→j} / k), accuracy as a fraction.

    Over-searching study, Appendix A.2 (Table 7; the study prints it × 100 %, as the report
    does). ΔCost is the change in mean cost per query (g + λ·x + μ·|S|), k = 1,000 tokens.
    None (undefined) when |ΔCost| < `min_added_cost`: the study gives no threshold; ours is
    1 % of k, so a cost change that is noise next to one search call (μ = 500) is not divided by.
    """
    if not math.isfinite(added_cost) or abs(added_cost) < min_added_cost:
        return None
    return gain / (added_cost / k)


def roi_per_1k(
    gain: tuple[float | None, np.ndarray | None], added: tuple[float | None, np.ndarray | None]
) -> tuple[float | None, np.ndarray | None]:
    """`marginal_roi` with resamples; resamples whose added cost is below the threshold are undefined."""
    (g, gs), (c, cs_) = gain, added
    if g is None or c is None:
        return None, None
    point = marginal_roi(g, c)
    if point is None:
        return None, None
    samples = None
    if gs is not None and cs_ is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            samples = ratio_samples(gs, cs_ / 1000.0)
        samples[~np.isfinite(cs_) | (np.abs(cs_) < ROI_MIN_ADDED_COST)] = math.nan
    return point, samples


# --------------------------------------------------------------------------------------------
# Multi-turn curves and reasoning effort
# --------------------------------------------------------------------------------------------


def multi_turn(cs: ConditionSet, cfg: MetricsConfig) -> dict[str, Any]:
    """Accuracy curves by number of preceding turns, per context kind (only when the keys exist)."""
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for label, cond in cs.conditions.items():
        pre_key = find_key(cond, "multi_turn.preceding")
        if pre_key is None:
            continue
        ctx_key = find_key(cond, "multi_turn.context")
        context = str(cond[ctx_key]) if ctx_key else "all"
        preceding = as_number(cond[pre_key])
        if preceding is not None:
            groups.setdefault((context, _key(_rest(cond, pre_key, ctx_key))), []).append((preceding, label))
    if not groups:
        return {"available": False, "reason": "no condition has a multi_turn.preceding key"}
    series = []
    for (context, rest_json), members in sorted(groups.items()):
        members.sort()
        points = []
        for preceding, label in members:
            point = {"preceding": int(preceding), "condition": label}
            point.update(ratio_stats(cs.sums[label], (*ACCURACIES, "tpc"), cfg))
            points.append(point)
        series.append(
            {"context": context, "other": json.loads(rest_json), "model": cs.model(members[0][1]), "points": points}
        )
    return {"available": True, "series": series}


def reasoning_effort(
    cs: ConditionSet, cfg: MetricsConfig, sweep: Mapping[str, Sequence[Any]] | None = None
) -> dict[str, Any]:
    """One row per condition with a reasoning-effort key, grouped by the other keys, efforts in
    the spec's order (`sweep`), each with its search cap where the condition has one."""
    rows: list[dict[str, Any]] = []
    for label, cond in cs.conditions.items():
        keys = sorted(k for k in cond if "reasoning_effort" in k)
        if not keys:
            continue
        effort = str(cond[keys[0]])
        row: dict[str, Any] = {
            "effort": effort,
            "key": keys[0],
            "condition": label,
            "model": cs.model(label),
            "other": _rest(cond, keys[0]),
        }
        cap_key = find_key(cond, "search_cap")
        if cap_key is not None:
            row["search_cap"] = as_number(cond[cap_key])
        row.update(ratio_stats(cs.sums[label], tuple(RATIOS), cfg))
        rows.append(row)
    if not rows:
        return {"available": False, "reason": "no condition has a reasoning_effort key"}
    order = _effort_rank([cs.conditions[r["condition"]] for r in rows], sweep)

    def in_spec_order(r: dict[str, Any]) -> tuple[Any, ...]:
        rest = {k: v for k, v in r["other"].items() if k != find_key(r["other"], "search_cap")}
        cap = r.get("search_cap")
        return (_key(rest), order.get(r["effort"], len(order)), -1 if cap is None else cap, r["effort"])

    rows.sort(key=in_spec_order)
    return {"available": True, "rows": rows}
