"""Figures of metrics.json (matplotlib, Agg canvas; pyplot's global state is never touched).

Each `plot_*` function takes the metrics (a `MetricsReport`, or a metrics dict as computed) and a
path, draws one figure and returns the path, or returns None without writing anything when the
metrics hold no data for it. Error bars and bands are the bootstrap 95 % intervals. Every
figure is written as PNG and SVG side by side, and `write_figures` puts the numbers behind each
one beside it as CSV (`figure_data.FIGURE_DATA`), so a figure can be redrawn or checked elsewhere.
The sweep figures are drawn in `sweep_figures`; the helpers they all share are in `figure_common`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.figure_common import (
    error_bar,
    finite,
    integer_ticks,
    pct,
    save_figure,
    short,
    stat_of,
    write_csv,
)
from branchpoint.evaluation.metrics_blocks import SearchEffect
from branchpoint.evaluation.metrics_file import MetricsReport, as_metrics
from branchpoint.evaluation.report_format import GROUP_NAMES, OUTCOME_NAMES
from branchpoint.evaluation.sweep_figures import plot_effort_cap_frontier, plot_marginal_roi, plot_tpc_search_cap

FIGURES: dict[str, str] = {
    "accuracy_search": "accuracy_with_without_search.png",
    "tpc_search_cap": "tpc_vs_search_cap.png",
    "marginal_roi": "marginal_roi.png",
    "tpc_outcome": "tpc_by_outcome.png",
    "evidence_balance": "evidence_balance.png",
    "multi_turn": "multi_turn.png",
    "judge_agreement": "judge_agreement.png",
    "effort_cap_frontier": "effort_cap_frontier.png",
}


def _side(pair: SearchEffect, side: str) -> str:
    return pair.with_ if side == "with" else pair.without


def plot_accuracy_search(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """Answer and abstention accuracy with and without search, one bar group per pair (model)."""
    m_all = as_metrics(metrics)
    pairs = m_all.search_effect or []
    if not pairs:
        return None
    conds = m_all.by_condition
    if len(pairs) > 6:  # many pairs: one row each, readable at 20 conditions or more
        return _accuracy_rows(pairs, conds, path, m_all.simulated)
    fig = Figure(figsize=(max(5.0, 2.2 * len(pairs) + 1.5), 3.8))
    ax = fig.add_subplot()
    width = 0.2
    series = [
        ("answer acc, no search", "without", "answer_accuracy", "#9ecae1"),
        ("answer acc, search", "with", "answer_accuracy", "#3182bd"),
        ("abstention acc, no search", "without", "abstention_accuracy", "#fdae6b"),
        ("abstention acc, search", "with", "abstention_accuracy", "#e6550d"),
    ]
    for i, (name, side, metric, color) in enumerate(series):
        xs, ys = [], []
        errs: tuple[list[float], list[float]] = ([], [])
        for j, pair in enumerate(pairs):
            value, ci = stat_of(conds[_side(pair, side)], metric)
            xs.append(j + (i - 1.5) * width)
            ys.append(pct(value))
            lo, hi = error_bar(value, ci, 100.0)
            errs[0].append(lo)
            errs[1].append(hi)
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=name, color=color)
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels([f"{p.model}\n{short(p.with_, 22)}" for p in pairs], fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Accuracy with vs without search (95% CI)")
    ax.legend(fontsize=7, ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return save_figure(fig, path, m_all.simulated)


def _accuracy_rows(pairs: list[SearchEffect], conds: dict[str, Any], path: Path, simulated: bool = False) -> Path:
    """Accuracy with vs without search as a dot plot: one row per pair, answer and abstention
    accuracy without (open marker) and with search (filled), each with its interval."""
    fig = Figure(figsize=(7.5, 1.4 + 0.45 * len(pairs)))
    ax = fig.add_subplot()
    series = (
        ("answer acc", "answer_accuracy", "#3182bd", -0.12),
        ("abstention acc", "abstention_accuracy", "#e6550d", 0.12),
    )
    for name, metric, color, offset in series:
        for side, face, tag in (("without", "white", "no search"), ("with", color, "search")):
            xs, ys = [], []
            errs: tuple[list[float], list[float]] = ([], [])
            for j, pair in enumerate(pairs):
                value, ci = stat_of(conds[_side(pair, side)], metric)
                lo, hi = error_bar(value, ci, 100.0)
                xs.append(pct(value))
                ys.append(j + offset)
                errs[0].append(lo)
                errs[1].append(hi)
            ax.errorbar(
                xs,
                ys,
                xerr=errs,
                fmt="o",
                markersize=5,
                capsize=2,
                color=color,
                markerfacecolor=face,
                label=f"{name}, {tag}",
            )
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels([f"{p.model}\n{short(p.with_, 40)}" for p in pairs], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 105)
    ax.set_xlabel("accuracy (%)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_title("Accuracy with vs without search (95% CI)", fontsize=9, pad=22)
    return save_figure(fig, path, simulated)


def plot_tpc_outcome(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """Mean cost per execution of each outcome, grouped by condition."""
    simulated = as_metrics(metrics).simulated
    conds = as_metrics(metrics).by_condition
    if not conds or not any(m.tpc_by_outcome is not None for m in conds.values()):
        return None
    labels = list(conds)
    colors = ("#31a354", "#de2d26", "#3182bd", "#fd8d3c")
    if len(labels) > 6:  # many conditions: one row each, readable at 20 or more
        return _tpc_outcome_rows(conds, labels, colors, path, simulated)
    fig = Figure(figsize=(max(5.0, 1.1 * len(labels) + 2.0), 3.8))
    ax = fig.add_subplot()
    width = 0.8 / len(OUTCOME_NAMES)
    for i, (outcome, name) in enumerate(OUTCOME_NAMES.items()):
        ys = []
        errs: tuple[list[float], list[float]] = ([], [])
        for label in labels:
            entry = (conds[label].tpc_by_outcome or {}).get(outcome)
            value, ci = stat_of(entry, "cost_per_execution")
            v = finite(value)
            ys.append(math.nan if v is None else v)
            lo, hi = error_bar(value, ci)
            errs[0].append(lo)
            errs[1].append(hi)
        xs = [j + (i - (len(OUTCOME_NAMES) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=name, color=colors[i])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([short(lbl, 20) for lbl in labels], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("cost per execution (tokens)")
    ax.set_title("Cost by outcome (g + λ·x + μ·|S| per execution, 95% CI)")
    ax.legend(fontsize=7)
    return save_figure(fig, path, simulated)


def _tpc_outcome_rows(
    conds: dict[str, Any], labels: list[str], colors: tuple[str, ...], path: Path, simulated: bool = False
) -> Path:
    """Cost by outcome as a dot plot: conditions as rows (in their natural order), one marker per
    outcome with its interval, so the figure stays a page wide however many conditions."""
    lines = max(label.count(",") + 1 for label in labels)  # one line per setting: never cut off
    fig = Figure(figsize=(7.5, 1.2 + (0.22 + 0.12 * lines) * len(labels)))
    ax = fig.add_subplot()
    offsets = [(i - (len(OUTCOME_NAMES) - 1) / 2) * 0.18 for i in range(len(OUTCOME_NAMES))]
    for i, (outcome, name) in enumerate(OUTCOME_NAMES.items()):
        xs, ys = [], []
        errs: tuple[list[float], list[float]] = ([], [])
        for j, label in enumerate(labels):
            value, ci = stat_of((conds[label].tpc_by_outcome or {}).get(outcome), "cost_per_execution")
            v = finite(value)
            if v is None:
                continue
            lo, hi = error_bar(v, ci)
            xs.append(v)
            ys.append(j + offsets[i])
            errs[0].append(lo)
            errs[1].append(hi)
        ax.errorbar(xs, ys, xerr=errs, fmt="o", markersize=4, capsize=2, color=colors[i], label=name)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(["\n".join(short(part, 48) for part in lbl.split(",")) for lbl in labels], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("cost per execution (tokens)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_title("Cost by outcome (g + λ·x + μ·|S| per execution, 95% CI)", fontsize=9, pad=22)
    return save_figure(fig, path, simulated)


def plot_evidence_balance(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """Abstention accuracy by evidence-balance group (pooled over conditions), n on each bar."""
    ev = as_metrics(metrics).evidence_balance
    if ev is None or not ev.available:
        return None
    groups = [g for g in GROUP_NAMES if g in ev.groups and ev.groups[g].n]
    fig = Figure(figsize=(6.0, 3.6))
    ax = fig.add_subplot()
    ys = [pct(ev.groups[g].abstention_accuracy) for g in groups]
    errs: Sequence[Sequence[float]] = list(
        zip(*(error_bar(*stat_of(ev.groups[g], "abstention_accuracy"), 100.0) for g in groups))
    ) or ([], [])
    bars = ax.bar(
        range(len(groups)),
        ys,
        yerr=errs,
        capsize=3,
        color=["#e6550d", "#fdae6b", "#9ecae1", "#3182bd", "#bdbdbd"][: len(groups)],
    )
    del bars  # counts go under the axis, never over an error bar
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{GROUP_NAMES[g]}\nn={ev.groups[g].n}" for g in groups], fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("abstention accuracy (%)")
    share = finite(ev.negative_share)
    note = "" if share is None else f"; negative documents: {100 * share:.1f}%"
    ax.set_title(f"Abstention by evidence balance (unanswerable questions{note})", fontsize=9)
    return save_figure(fig, path, as_metrics(metrics).simulated)


def plot_multi_turn(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """Answer and abstention accuracy by number of preceding turns, one line per context kind."""
    mt = as_metrics(metrics).multi_turn
    if mt is None or not mt.available:
        return None
    fig = Figure(figsize=(9.0, 3.6))
    for k, (metric, title) in enumerate(
        (("answer_accuracy", "answer accuracy"), ("abstention_accuracy", "abstention accuracy"))
    ):
        ax = fig.add_subplot(1, 2, k + 1)
        for series in mt.series:
            xs = [p.preceding for p in series.points]
            ys = [pct(getattr(p, metric)) for p in series.points]
            errs = list(zip(*(error_bar(*stat_of(p, metric), 100.0) for p in series.points)))
            other = short(condition_label(series.other), 30) if series.other else ""
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=2, label=short(f"{series.context} {other}".strip(), 36))
        ax.set_xlabel("preceding turns")
        integer_ticks(ax)
        ax.set_ylabel(f"{title} (%)")
        ax.set_ylim(0, 105)
        ax.set_title(title)
        ax.legend(fontsize=7, title="context", title_fontsize=7)
    fig.suptitle("Multi-turn: accuracy by conversation history")
    return save_figure(fig, path, as_metrics(metrics).simulated)


def _plot_judge_agreement(metrics: MetricsReport, path: Path) -> Path | None:
    from branchpoint.evaluation.agreement_figure import plot_judge_agreement

    return plot_judge_agreement(metrics, path)


PLOTTERS: dict[str, Callable[[MetricsReport, Path], Path | None]] = {
    "accuracy_search": plot_accuracy_search,
    "tpc_search_cap": plot_tpc_search_cap,
    "marginal_roi": plot_marginal_roi,
    "tpc_outcome": plot_tpc_outcome,
    "evidence_balance": plot_evidence_balance,
    "multi_turn": plot_multi_turn,
    "judge_agreement": _plot_judge_agreement,
    "effort_cap_frontier": plot_effort_cap_frontier,
}


def write_figures(metrics: MetricsReport | dict[str, Any], folder: Path) -> dict[str, Path | None]:
    """Every figure whose data is present, as folder/<name>.png and .svg with its data as .csv;
    None for those skipped."""
    from branchpoint.evaluation.figure_data import FIGURE_DATA

    m_all = as_metrics(metrics)
    out = {key: PLOTTERS[key](m_all, Path(folder) / FIGURES[key]) for key in PLOTTERS}
    for key, path in out.items():
        if path is not None and key in FIGURE_DATA:
            write_csv(path.with_suffix(".csv"), *FIGURE_DATA[key](m_all))
    return out
