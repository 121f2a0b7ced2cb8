"""Figures of the sweeps in metrics.json: TPC vs search cap, marginal ROI per search-cap step, and
accuracy vs TPC over the reasoning effort × search cap grid (see `figures` for the conventions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
    section_key,
    short,
    stat_of,
)
from branchpoint.evaluation.metrics_file import MetricsReport, as_metrics

#: Line colours of the search-cap figure's series (efforts in the spec's order; cycled).
SERIES_COLORS = ("#08519c", "#e6550d", "#31a354", "#756bb1", "#636363", "#9ecae1", "#fdae6b")


def series_label(sweep: Any) -> str:
    """A sweep's full label: its model, and every other setting (never cut)."""
    other = condition_label({section_key(k): v for k, v in (sweep.other or {}).items()})
    return f"{sweep.model}: {other}" if other else str(sweep.model)


def plot_tpc_search_cap(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """TPC, answer accuracy and abstention accuracy against the search cap: three panels with a
    shared cap axis, one line per series (per reasoning effort in the spec's order, or per other
    setting), full labels in one legend under the panels; TPC = ∞ is a marked point at the top."""
    m_all = as_metrics(metrics)
    sweeps = m_all.search_cap_sweep or []
    if not sweeps:
        return None
    fig = Figure(figsize=(12.0, 3.9 + 0.22 * len(sweeps)))
    axes = fig.subplots(1, 3, sharex=True)
    panels = (
        ("tpc", "TPC (tokens per correct)", 1.0),
        ("answer_accuracy", "answer accuracy (%)", 100.0),
        ("abstention_accuracy", "abstention accuracy (%)", 100.0),
    )
    infinite_at: list[str] = []
    for ax, (metric, ylabel, scale) in zip(axes, panels):
        finite_top = 0.0
        for k, sweep in enumerate(sweeps):
            caps = [p.cap for p in sweep.points]
            values = [finite(getattr(p, metric)) for p in sweep.points]
            ys = [math.nan if v is None else v * scale for v in values]
            finite_top = max([finite_top, *(y for y in ys if not math.isnan(y))])
            errs = list(zip(*(error_bar(*stat_of(p, metric), scale) for p in sweep.points)))
            color = SERIES_COLORS[k % len(SERIES_COLORS)]
            ax.errorbar(caps, ys, yerr=errs, marker="o", capsize=2, color=color, label=series_label(sweep))
            if metric == "tpc":
                inf = [p.cap for p in sweep.points if p.tpc is not None and math.isinf(float(p.tpc))]
                infinite_at += [f"{series_label(sweep)} at cap {c}" for c in inf]
                ax.plot(inf, [math.nan] * len(inf))  # placed below, once the top is known
        if metric == "tpc" and infinite_at:
            top = (finite_top or 1.0) * 1.15
            ax.set_ylim(0, top * 1.05)
            for k, sweep in enumerate(sweeps):
                inf = [p.cap for p in sweep.points if p.tpc is not None and math.isinf(float(p.tpc))]
                ax.plot(
                    inf, [top] * len(inf), "^", color=SERIES_COLORS[k % len(SERIES_COLORS)], markersize=8, clip_on=False
                )
        if scale == 100.0:
            ax.set_ylim(0, 105)
        ax.set_xlabel("search cap")
        ax.set_ylabel(ylabel)
        integer_ticks(ax)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, -0.02), ncols=1, fontsize=8, frameon=False)
    fig.subplots_adjust(bottom=0.2 + 0.05 * len(sweeps), wspace=0.3)
    if infinite_at:
        fig.text(
            0.5,
            1.0,
            "▲ at the top edge: TPC = ∞ (nothing correct): " + "; ".join(infinite_at),
            ha="center",
            va="bottom",
            fontsize=7,
            color="#de2d26",
        )
    fig.suptitle("TPC and accuracy across the search-cap sweep (95% CI)", y=1.06 if infinite_at else 1.0)
    return save_figure(fig, path, m_all.simulated)


def plot_marginal_roi(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """Marginal ROI per step of each search-cap sweep (accuracy points per 1,000 tokens, 95% CI);
    undefined steps (the cost barely moved) are marked with an x on the zero line."""
    sweeps = [s for s in as_metrics(metrics).search_cap_sweep or [] if s.marginal_roi]
    if not sweeps:
        return None
    cols = min(3, len(sweeps))
    rows = math.ceil(len(sweeps) / cols)
    fig = Figure(figsize=(4.6 * cols, 3.4 * rows))
    series = (
        ("overall_accuracy", "#444444", "overall"),
        ("answer_accuracy", "#3182bd", "answer"),
        ("abstention_accuracy", "#e6550d", "abstention"),
    )
    for k, sweep in enumerate(sweeps):
        ax = fig.add_subplot(rows, cols, k + 1)
        steps = sweep.marginal_roi
        labels = [f"{r.from_cap}→{r.to_cap}" for r in steps]
        width = 0.8 / len(series)
        for i, (metric, color, name) in enumerate(series):
            key = f"{metric}_per_1k_tokens"
            xs = [j + (i - 1) * width for j in range(len(steps))]
            ys = [pct(getattr(r, key)) for r in steps]
            errs = list(zip(*(error_bar(*stat_of(r, key), 100.0) for r in steps)))
            ax.bar(xs, ys, width, yerr=errs, capsize=2, color=color, label=name)
            undefined = [x for x, y in zip(xs, ys) if math.isnan(y)]
            ax.plot(undefined, [0.0] * len(undefined), "x", color=color, markersize=6)
        ax.axhline(0.0, color="#999999", linewidth=0.8)
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlabel("search cap step")
        ax.set_ylabel("accuracy points per 1k tokens")
        other = short(condition_label(sweep.other), 60) if sweep.other else ""
        ax.set_title(f"{sweep.model}: {other}" if other else sweep.model, fontsize=9)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Marginal ROI of raising the search cap (x: undefined, cost barely moved)")
    return save_figure(fig, path, as_metrics(metrics).simulated)


#: One colour per reasoning effort, light to dark in the spec's order (cycled past five).
EFFORT_COLORS = ("#9ecae1", "#4292c6", "#08519c", "#fd8d3c", "#a63603")


def plot_effort_cap_frontier(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """Overall accuracy against TPC for every (effort, cap) condition: one line per effort in the
    spec's order through its caps (each point labelled with its cap), 95% intervals both ways,
    the Pareto frontier ringed and joined; "(simulated model)" in the title for a sim run."""
    fr = as_metrics(metrics).effort_cap_frontier
    if fr is None or not fr.available or not fr.series:
        return None
    cols = min(2, len(fr.series))
    rows = math.ceil(len(fr.series) / cols)
    fig = Figure(figsize=(6.4 * cols, 4.6 * rows))
    for k, grid in enumerate(fr.series):
        ax = fig.add_subplot(rows, cols, k + 1)
        infinite: list[str] = []
        handles: list[Any] = []
        for i, effort in enumerate(grid.effort_order):
            pts = sorted((p for p in grid.points if p.effort == effort), key=lambda p: float(p.cap))
            drawn = [p for p in pts if finite(p.tpc) is not None]
            infinite += [f"{effort}/cap {p.cap}" for p in pts if p.tpc is not None and math.isinf(float(p.tpc))]
            xs = [finite(p.tpc) or 0.0 for p in drawn]
            ys = [pct(p.overall_accuracy) for p in drawn]
            xerr: Sequence[Sequence[float]] = list(zip(*(error_bar(*stat_of(p, "tpc")) for p in drawn))) or ([], [])
            yerr: Sequence[Sequence[float]] = list(
                zip(*(error_bar(*stat_of(p, "overall_accuracy"), 100.0) for p in drawn))
            ) or ([], [])
            color = EFFORT_COLORS[i % len(EFFORT_COLORS)]
            handles.append(
                ax.errorbar(
                    xs,
                    ys,
                    xerr=xerr,
                    yerr=yerr,
                    fmt="o-",
                    color=color,
                    capsize=2,
                    markersize=5,
                    label=f"effort = {effort}",
                )
            )
            for p, x, y in zip(drawn, xs, ys):
                ax.annotate(f"cap {p.cap}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color)
        front = sorted(
            (p for p in grid.points if p.on_frontier and finite(p.tpc) is not None),
            key=lambda p: finite(p.tpc) or 0.0,
        )
        if front:
            fx, fy = [finite(p.tpc) or 0.0 for p in front], [pct(p.overall_accuracy) for p in front]
            ax.plot(fx, fy, "--", color="#222222", linewidth=1.0, zorder=1)
            (ring,) = ax.plot(
                fx,
                fy,
                "o",
                markersize=12,
                markerfacecolor="none",
                markeredgecolor="#222222",
                label="Pareto frontier (max accuracy, min TPC)",
            )
            handles.append(ring)
        if infinite:
            ax.text(
                0.5,
                -0.2,
                "not drawn, TPC = ∞ (nothing correct): " + ", ".join(infinite[:8]),
                transform=ax.transAxes,
                ha="center",
                va="top",
                fontsize=7,
                color="#de2d26",
            )
        ax.set_xlabel("TPC (tokens per correct answer, g + λ·x + μ·|S|)")
        ax.set_ylabel("overall accuracy (%)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        other = short(condition_label(grid.other), 60) if grid.other else ""
        ax.set_title(f"{grid.model}: {other}" if other else grid.model, fontsize=9)
        ax.margins(x=0.12)
        ax.legend(handles=handles, fontsize=7, loc="best")  # efforts in the spec's order, then the frontier
    title = "Accuracy vs TPC over reasoning effort × search cap (95% CI)"
    fig.suptitle(title)
    return save_figure(fig, path, fr.simulated or as_metrics(metrics).simulated)
