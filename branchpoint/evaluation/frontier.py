"""The reasoning-effort × search-cap frontier: Pareto-optimal conditions (accuracy up, TPC down)
with their bootstrap probability of being on the frontier, and the marginal ROI along each axis.

Over-searching study §5.1 (Table 3: reasoning effort low / medium / high; Figure 2: the
search-cap sweep 0…19, TPC against accuracy) and Appendix A.2 (marginal ROI). The study reads
each axis on its own; a sweep over both (`sweep: {model.reasoning_effort: [...],
agent.search_cap: [...]}`) is read here as one grid per setting of the other keys:

- *Grid*: the conditions with a reasoning-effort key (any key containing `reasoning_effort`)
  and a search-cap key (`search_cap`, see `conditions.find_key`), search not switched off by a
  false `search` key (cap 0 stays: it is the no-search end of the cap axis), grouped by their
  other keys. A grid needs at least two conditions.
- *Accuracy* is overall accuracy (correct / n: answers on answerable questions, abstentions on
  unanswerable ones), the numerator of TPC's denominator; TPC = Σ cost / Σ correct (+inf when
  nothing is correct), cost = g + λ·x + μ·|S|.
- *Pareto frontier*: a condition is on it when no other condition of its grid is at least as
  accurate and at most as costly per correct answer, and strictly better in one of the two
  (two conditions with equal accuracy and TPC are both on it). A condition whose accuracy is
  undefined (no question drawn) is on no frontier and dominates nothing.
- *Pairing*: every condition of a grid is resampled with one draw of the grid's questions per
  replicate (the union of its conditions' question ids; `bootstrap.QuestionBootstrap`), so the
  frontier of a replicate, and every difference between two conditions, is paired by question.
  `frontier_probability` = the share of replicates in which the condition is on the frontier.
- *Marginal ROI* (`studies.marginal_roi`): along the cap axis at each effort (consecutive caps
  in numeric order) and along the effort axis at each cap (consecutive efforts in the spec's
  order of the sweep values, not alphabetical: `low → medium → high`), ΔAccuracy / (Δ mean cost
  per query / 1,000), undefined when |Δ mean cost| < `studies.ROI_MIN_ADDED_COST`. A missing
  cell of the grid is skipped: a step joins the neighbours that were run.
- *Effort order*: the spec's list for the effort axis (`spec.yaml` → `sweep`), values it lacks
  after it in the built-in order none < minimal < low < medium < high, then as first seen; the
  order and where it came from are written with each grid.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from branchpoint.evaluation.bootstrap import QuestionBootstrap
from branchpoint.evaluation.conditions import as_number, find_key, truthy
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.evaluation.studies import (
    ACCURACIES,
    ROI_MIN_ADDED_COST,
    difference,
    effort_order,
    ratio_stat,
    ratio_stats,
    roi_per_1k,
)
from branchpoint.evaluation.tally import Sums, cell_sums, set_stat
from branchpoint.traces import SPEC_FILE

ACCURACY = "overall_accuracy"
_POINT_STATS = (*ACCURACIES, "tpc", "mean_cost", "mean_search_calls", "mean_reasoning_tokens")
Rows = list[tuple[str, np.ndarray]]


def effort_key(condition: Mapping[str, Any]) -> str | None:
    """The reasoning-effort key of a condition (first in sorted order), or None."""
    keys = sorted(k for k in condition if "reasoning_effort" in k)
    return keys[0] if keys else None


def spec_sweep(folder: Path) -> dict[str, list[Any]]:
    """The sweep axes of the spec.yaml in `folder`, each with its values in the spec's order
    ({} when there is no spec.yaml or it has no readable sweep)."""
    import yaml

    path = Path(folder) / SPEC_FILE
    if not path.is_file():
        return {}
    try:
        sweep = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("sweep") or {}
    except (yaml.YAMLError, AttributeError):
        return {}
    return {str(k): list(v) for k, v in sweep.items() if isinstance(v, list)} if isinstance(sweep, dict) else {}


def pareto_mask(accuracy: np.ndarray, tpc: np.ndarray) -> np.ndarray:
    """On the accuracy-up / TPC-down Pareto frontier, along the last axis (any leading axes are
    replicates). NaN accuracy or TPC: on no frontier, dominating nothing; +inf TPC compares as
    the largest cost."""
    acc = np.asarray(accuracy, dtype=float)
    cost = np.asarray(tpc, dtype=float)
    defined = ~(np.isnan(acc) | np.isnan(cost))
    a_i, a_j = acc[..., :, None], acc[..., None, :]
    c_i, c_j = cost[..., :, None], cost[..., None, :]
    with np.errstate(invalid="ignore"):
        dominates = (a_j >= a_i) & (c_j <= c_i) & ((a_j > a_i) | (c_j < c_i)) & defined[..., None, :]
    return cast(np.ndarray, defined & ~dominates.any(axis=-1))


def _grids(conditions: Mapping[str, dict[str, Any]]) -> dict[tuple[str, str, str], list[tuple[str, float, str]]]:
    """(effort key, cap key, other keys as JSON) → [(effort, cap, label)] of every grid."""
    groups: dict[tuple[str, str, str], list[tuple[str, float, str]]] = {}
    for label, cond in conditions.items():
        e_key, c_key = effort_key(cond), find_key(cond, "search_cap")
        if e_key is None or c_key is None:
            continue
        search_key = find_key(cond, "search")
        if search_key is not None and not truthy(cond[search_key]):
            continue
        cap = as_number(cond[c_key])
        if cap is None:
            continue
        rest = {k: v for k, v in cond.items() if k not in (e_key, c_key)}
        groups.setdefault((e_key, c_key, json.dumps(rest, sort_keys=True, default=str)), []).append(
            (str(cond[e_key]), cap, label)
        )
    return {k: v for k, v in groups.items() if len(v) >= 2}


def _cap(value: float) -> int | float:
    return int(value) if value == int(value) else value


def _step(a: Sums, b: Sums, cfg: MetricsConfig) -> dict[str, Any]:
    """Cost added from a to b and the accuracy gained per 1,000 tokens of it (paired samples)."""
    out: dict[str, Any] = {}
    added = difference(ratio_stat(b, "mean_cost"), ratio_stat(a, "mean_cost"))
    set_stat(out, "added_cost_per_query", *added, cfg)
    if added[0] is not None and abs(added[0]) < ROI_MIN_ADDED_COST:
        out["roi_undefined"] = f"mean cost per query changes by less than {ROI_MIN_ADDED_COST:g} tokens"
    set_stat(out, f"{ACCURACY}_change", *difference(ratio_stat(b, ACCURACY), ratio_stat(a, ACCURACY)), cfg)
    for name in ACCURACIES:
        gain = difference(ratio_stat(b, name), ratio_stat(a, name))
        set_stat(out, f"{name}_per_1k_tokens", *roi_per_1k(gain, added), cfg)
    return out


def _grid(
    members: list[tuple[str, float, str]],
    rows: Mapping[str, Rows],
    boot: QuestionBootstrap,
    cfg: MetricsConfig,
    spec_values: Sequence[Any] | None,
) -> dict[str, Any]:
    questions = sorted({q for _, _, label in members for q, _ in rows.get(label, [])})
    sums = {label: _sums(rows.get(label, []), questions, boot) for _, _, label in members}
    order, source = effort_order([e for e, _, _ in members], spec_values)
    rank = {e: i for i, e in enumerate(order)}
    members = sorted(members, key=lambda m: (rank[m[0]], m[1]))
    acc = np.array([_num(ratio_stat(sums[label], ACCURACY)[0]) for _, _, label in members])
    tpc = np.array([_num(ratio_stat(sums[label], "tpc")[0]) for _, _, label in members])
    on = pareto_mask(acc, tpc)
    probability: list[float | None] = [None] * len(members)
    if boot.enabled:
        acc_b = np.column_stack([_samples(sums[label], ACCURACY) for _, _, label in members])
        tpc_b = np.column_stack([_samples(sums[label], "tpc") for _, _, label in members])
        probability = [float(p) for p in pareto_mask(acc_b, tpc_b).mean(axis=0)]
    points = []
    for (effort, cap, label), frontier, prob in zip(members, on, probability):
        point: dict[str, Any] = {"effort": effort, "cap": _cap(cap), "condition": label}
        point.update(ratio_stats(sums[label], _POINT_STATS, cfg))
        point["on_frontier"] = bool(frontier)
        point["frontier_probability"] = prob
        points.append(point)
    cap_roi = []
    for effort in order:
        line = sorted((c, label) for e, c, label in members if e == effort)
        for (ca, a), (cb, b) in itertools.pairwise(line):
            head = {"effort": effort, "from_cap": _cap(ca), "to_cap": _cap(cb), "from_condition": a, "to_condition": b}
            cap_roi.append({**head, **_step(sums[a], sums[b], cfg)})
    effort_roi = []
    for cap in sorted({c for _, c, _ in members}):
        line2 = sorted(((rank[e], e, label) for e, c, label in members if c == cap))
        for (_, ea, a), (_, eb, b) in itertools.pairwise(line2):
            head = {"cap": _cap(cap), "from_effort": ea, "to_effort": eb, "from_condition": a, "to_condition": b}
            effort_roi.append({**head, **_step(sums[a], sums[b], cfg)})
    frontier = sorted((p for p in points if p["on_frontier"]), key=lambda p: (p["tpc"], -p[ACCURACY]))
    return {
        "effort_order": order,
        "effort_order_source": source,
        "n_questions": len(questions),
        "points": points,
        "frontier": [p["condition"] for p in frontier],
        "cap_roi": cap_roi,
        "effort_roi": effort_roi,
    }


def _sums(rows: Rows, questions: list[str], boot: QuestionBootstrap) -> Sums:
    if not rows:
        return Sums.empty(boot.n_resamples)
    return cell_sums(rows, questions, boot)


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _samples(s: Sums, name: str) -> np.ndarray:
    samples = ratio_stat(s, name)[1]
    assert samples is not None  # the bootstrap is on
    return samples


def effort_cap_frontier(
    conditions: Mapping[str, dict[str, Any]],
    rows: Mapping[str, Rows],
    boot: QuestionBootstrap,
    cfg: MetricsConfig,
    *,
    sweep: Mapping[str, Sequence[Any]] | None = None,
    model_of: Callable[[str], str],
    simulated: bool = False,
) -> dict[str, Any]:
    """metrics.json's `effort_cap_frontier`: one entry per effort × cap grid (see the module doc).

    `rows` are each condition's scored (question id, `tally.record_row`) pairs; `sweep` is the
    spec's sweep (axis → values in the spec's order, `spec_sweep`); `model_of(label)` names a
    condition's model; `simulated` marks a run of the simulated model (its figure says so).
    """
    grids = _grids(conditions)
    if not grids:
        return {
            "available": False,
            "reason": "no two conditions with both a reasoning_effort and a search_cap key (sweep both axes)",
        }
    series = []
    for (e_key, c_key, rest_json), members in sorted(grids.items()):
        entry = _grid(members, rows, boot, cfg, (sweep or {}).get(e_key))
        series.append(
            {
                "effort_key": e_key,
                "cap_key": c_key,
                "other": json.loads(rest_json),
                "model": model_of(members[0][2]),
                **entry,
            }
        )
    return {
        "available": True,
        "accuracy": ACCURACY,
        "simulated": simulated,
        "roi_min_added_cost": ROI_MIN_ADDED_COST,
        "pairing": "one draw of each grid's questions per replicate, shared by all its conditions",
        "series": series,
    }
