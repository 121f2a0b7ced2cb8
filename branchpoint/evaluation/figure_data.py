"""The numbers behind each metrics figure, as CSV rows (`FIGURE_DATA`): `figures.write_figures`
writes them beside each PNG (same name, .csv), so a figure can be redrawn or checked elsewhere.
Each function reads a `MetricsReport` and returns (header, rows); infinity stays `inf`, an
undefined value is left empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.report_format import GROUP_NAMES, OUTCOME_NAMES

Rows = list[list[Any]]


def _ci(entry: Any, key: str) -> list[Any]:
    """[value, ci_low, ci_high] of a statistic of a metrics block (all None without the block)."""
    if entry is None:
        return [None, None, None]
    ci = getattr(entry, f"{key}_ci", None) or [None, None]
    return [getattr(entry, key, None), ci[0], ci[1]]


def data_accuracy_search(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the with/without-search figure, one row per pair, side and metric."""
    header = ["model", "condition", "search", "metric", "value", "ci_low", "ci_high", "n"]
    rows: Rows = []
    for pair in metrics.search_effect or []:
        for side, label in (("without", pair.without), ("with", pair.with_)):
            m = metrics.by_condition[label]
            for metric in ("answer_accuracy", "abstention_accuracy"):
                rows.append([pair.model, label, side, metric, *_ci(m, metric), m.n])
    return header, rows


def data_tpc_search_cap(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the search-cap figure, one row per sweep and cap (TPC `inf` kept)."""
    header = [
        "model",
        "other",
        "cap",
        "n",
        "tpc",
        "tpc_ci_low",
        "tpc_ci_high",
        "answer_accuracy",
        "abstention_accuracy",
    ]
    rows: Rows = []
    for sweep in metrics.search_cap_sweep or []:
        other = condition_label(sweep.other) if sweep.other else ""
        for p in sweep.points:
            rows.append([sweep.model, other, p.cap, p.n, *_ci(p, "tpc"), p.answer_accuracy, p.abstention_accuracy])
    return header, rows


def data_tpc_outcome(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the cost-by-outcome figure, one row per condition and outcome."""
    header = ["condition", "outcome", "n", "cost_per_execution", "ci_low", "ci_high"]
    rows: Rows = []
    for label, m in metrics.by_condition.items():
        for outcome in OUTCOME_NAMES:
            entry = (m.tpc_by_outcome or {}).get(outcome)
            if entry is not None:
                rows.append([label, outcome, entry.n, *_ci(entry, "cost_per_execution")])
    return header, rows


def data_evidence_balance(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the evidence-balance figure, one row per group."""
    header = ["group", "n", "abstention_accuracy", "ci_low", "ci_high"]
    groups = metrics.evidence_balance.groups if metrics.evidence_balance is not None else {}
    return header, [[g, groups[g].n, *_ci(groups[g], "abstention_accuracy")] for g in GROUP_NAMES if g in groups]


def data_multi_turn(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the multi-turn figure, one row per context, other settings and turns."""
    header = [
        "context",
        "other",
        "preceding",
        "n",
        "answer_accuracy",
        "answer_ci_low",
        "answer_ci_high",
        "abstention_accuracy",
        "abstention_ci_low",
        "abstention_ci_high",
    ]
    rows: Rows = []
    for series in metrics.multi_turn.series if metrics.multi_turn is not None else []:
        other = condition_label(series.other) if series.other else ""
        for p in series.points:
            rows.append(
                [series.context, other, p.preceding, p.n, *_ci(p, "answer_accuracy"), *_ci(p, "abstention_accuracy")]
            )
    return header, rows


def data_marginal_roi(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the marginal-ROI figure, one row per sweep, cap step and metric (an
    undefined ROI, where the cost barely moved, is left empty)."""
    header = [
        "model",
        "other",
        "from_cap",
        "to_cap",
        "metric",
        "per_1k_tokens",
        "ci_low",
        "ci_high",
        "added_cost_per_query",
    ]
    rows: Rows = []
    for sweep in metrics.search_cap_sweep or []:
        other = condition_label(sweep.other) if sweep.other else ""
        for r in sweep.marginal_roi:
            for metric in ("overall_accuracy", "answer_accuracy", "abstention_accuracy"):
                rows.append(
                    [
                        sweep.model,
                        other,
                        r.from_cap,
                        r.to_cap,
                        metric,
                        *_ci(r, f"{metric}_per_1k_tokens"),
                        r.added_cost_per_query,
                    ]
                )
    return header, rows


def data_effort_cap_frontier(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the effort × cap frontier figure, one row per grid and condition."""
    header = [
        "model",
        "other",
        "effort",
        "cap",
        "condition",
        "n",
        "overall_accuracy",
        "overall_accuracy_ci_low",
        "overall_accuracy_ci_high",
        "tpc",
        "tpc_ci_low",
        "tpc_ci_high",
        "on_frontier",
        "frontier_probability",
    ]
    rows: Rows = []
    fr = metrics.effort_cap_frontier
    for grid in fr.series if fr is not None else []:
        other = condition_label(grid.other) if grid.other else ""
        for p in grid.points:
            rows.append(
                [
                    grid.model,
                    other,
                    p.effort,
                    p.cap,
                    p.condition,
                    p.n,
                    *_ci(p, "overall_accuracy"),
                    *_ci(p, "tpc"),
                    p.on_frontier,
                    p.frontier_probability,
                ]
            )
    return header, rows


def data_judge_agreement(metrics: MetricsReport) -> tuple[list[str], Rows]:
    """The numbers of the judge-agreement heatmap, one row per judged pair and kind."""
    from branchpoint.evaluation.agreement_figure import agreement_rows

    return agreement_rows(metrics)


#: The data behind each figure, written as CSV beside it (same name, .csv).
FIGURE_DATA: dict[str, Callable[[MetricsReport], tuple[list[str], Rows]]] = {
    "accuracy_search": data_accuracy_search,
    "tpc_search_cap": data_tpc_search_cap,
    "tpc_outcome": data_tpc_outcome,
    "evidence_balance": data_evidence_balance,
    "multi_turn": data_multi_turn,
    "marginal_roi": data_marginal_roi,
    "judge_agreement": data_judge_agreement,
    "effort_cap_frontier": data_effort_cap_frontier,
}
