"""Figures of metrics.json (matplotlib, Agg canvas; pyplot's global state is never touched).

Each `plot_*` function takes the metrics (a `MetricsReport`, or a metrics dict as computed) and a
path, draws one figure and returns the path, or returns None without writing anything when the
metrics hold no data for it. Error bars and bands are the bootstrap 95 % intervals. Every
figure is written as PNG and SVG side by side, and `write_figures` puts the numbers behind each
one beside it as CSV (`figure_data.FIGURE_DATA`), so a figure can be redrawn or checked elsewhere.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from branchpoint.evaluation.metrics_file import MetricsReport, SearchEffect, as_metrics
from branchpoint.evaluation.report_format import GROUP_NAMES, OUTCOME_NAMES
from branchpoint.evaluation.report_types import FileModel
from branchpoint.evaluation.tally import condition_label

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


def num(value: Any) -> float | None:
    """A number from metrics or metrics.json ("inf" strings included); None stays None."""
    if value is None:
        return None
    return float(value)


def _finite(value: Any) -> float | None:
    v = num(value)
    return v if v is not None and math.isfinite(v) else None


def _err(value: Any, ci: Any, scale: float = 1.0) -> tuple[float, float]:
    """Asymmetric error-bar half-widths of a value from its interval (0 when unknown or infinite)."""
    v = _finite(value)
    if v is None or not ci:
        return 0.0, 0.0
    lo, hi = _finite(ci[0]), _finite(ci[1])
    if lo is None or hi is None:
        return 0.0, 0.0
    return max(0.0, v - lo) * scale, max(0.0, hi - v) * scale


def _pct(value: Any) -> float:
    v = _finite(value)
    return math.nan if v is None else 100.0 * v


#: What every figure of a simulated model's run says (in its title).
SIMULATED_NOTE = "(simulated model)"


def mark_simulated(fig: Figure) -> None:
    """Put "(simulated model)" in the figure's title: its suptitle, else its one axes' title,
    else a line under the figure (a reader of a pasted figure sees where the numbers came from)."""
    title = fig.get_suptitle()
    if title:
        for text in fig.texts:  # the suptitle's Text: set in place, keeping its size and place
            if SIMULATED_NOTE not in title and text.get_text() == title:
                text.set_text(f"{title} {SIMULATED_NOTE}")
                break
        return
    if len(fig.axes) == 1 and fig.axes[0].get_title():
        ax = fig.axes[0]
        if SIMULATED_NOTE not in ax.get_title():
            ax.title.set_text(f"{ax.get_title()} {SIMULATED_NOTE}")
        return
    fig.text(0.99, 0.0, SIMULATED_NOTE, ha="right", va="top", fontsize=8, style="italic")


def _save(fig: Figure, path: Path, simulated: bool = False) -> Path:
    """Write the figure as PNG at `path` and as SVG beside it ("(simulated model)" in its title
    when `simulated`)."""
    if simulated:
        mark_simulated(fig)
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    with rc_context({"svg.fonttype": "none"}):  # text stays text: editable, searchable
        fig.savefig(path.with_suffix(".svg"), bbox_inches="tight")
    return path


def section_key(key: str) -> str:
    """A dotted setting with its section kept: `retrieval.default` stays, `retrieval.sources.x.chunk_words`
    becomes `x.chunk_words` (the last two parts)."""
    return ".".join(key.split(".")[-2:])


def short(label: str, width: int = 28) -> str:
    """`agent.search=true,model.name=x` with each key cut to its section and setting
    (`retrieval.default=clean`, never a bare `default=clean`), cut to `width` characters."""
    parts = []
    for part in label.split(","):
        key, sep, value = part.partition("=")
        parts.append(f"{section_key(key)}={value}" if sep else part)
    text = ",".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def _integer_ticks(ax: Any) -> None:
    """Counts (search caps, turns, searches) get whole-number ticks only."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _side(pair: SearchEffect, side: str) -> str:
    return pair.with_ if side == "with" else pair.without


def _stat(m: FileModel | None, metric: str) -> tuple[Any, Any]:
    """A statistic of a metrics block and its interval, by name (None, None without the block)."""
    if m is None:
        return None, None
    return getattr(m, metric, None), getattr(m, f"{metric}_ci", None)


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
            value, ci = _stat(conds[_side(pair, side)], metric)
            xs.append(j + (i - 1.5) * width)
            ys.append(_pct(value))
            lo, hi = _err(value, ci, 100.0)
            errs[0].append(lo)
            errs[1].append(hi)
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=name, color=color)
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels([f"{p.model}\n{short(p.with_, 22)}" for p in pairs], fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Accuracy with vs without search (95% CI)")
    ax.legend(fontsize=7, ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return _save(fig, path, m_all.simulated)


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
                value, ci = _stat(conds[_side(pair, side)], metric)
                lo, hi = _err(value, ci, 100.0)
                xs.append(_pct(value))
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
    return _save(fig, path, simulated)


#: Line colours of the search-cap figure's series (efforts in the spec's order; cycled).
SERIES_COLORS = ("#08519c", "#e6550d", "#31a354", "#756bb1", "#636363", "#9ecae1", "#fdae6b")


def _series_label(sweep: Any) -> str:
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
            values = [_finite(getattr(p, metric)) for p in sweep.points]
            ys = [math.nan if v is None else v * scale for v in values]
            finite_top = max([finite_top, *(y for y in ys if not math.isnan(y))])
            errs = list(zip(*(_err(*_stat(p, metric), scale) for p in sweep.points)))
            color = SERIES_COLORS[k % len(SERIES_COLORS)]
            ax.errorbar(caps, ys, yerr=errs, marker="o", capsize=2, color=color, label=_series_label(sweep))
            if metric == "tpc":
                inf = [p.cap for p in sweep.points if p.tpc is not None and math.isinf(float(p.tpc))]
                infinite_at += [f"{_series_label(sweep)} at cap {c}" for c in inf]
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
        _integer_ticks(ax)
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
    return _save(fig, path, m_all.simulated)


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
            ys = [_pct(getattr(r, key)) for r in steps]
            errs = list(zip(*(_err(*_stat(r, key), 100.0) for r in steps)))
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
    return _save(fig, path, as_metrics(metrics).simulated)


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
            value, ci = _stat(entry, "cost_per_execution")
            v = _finite(value)
            ys.append(math.nan if v is None else v)
            lo, hi = _err(value, ci)
            errs[0].append(lo)
            errs[1].append(hi)
        xs = [j + (i - (len(OUTCOME_NAMES) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=name, color=colors[i])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([short(lbl, 20) for lbl in labels], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("cost per execution (tokens)")
    ax.set_title("Cost by outcome (g + λ·x + μ·|S| per execution, 95% CI)")
    ax.legend(fontsize=7)
    return _save(fig, path, simulated)


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
            value, ci = _stat((conds[label].tpc_by_outcome or {}).get(outcome), "cost_per_execution")
            v = _finite(value)
            if v is None:
                continue
            lo, hi = _err(v, ci)
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
    return _save(fig, path, simulated)


def plot_evidence_balance(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """Abstention accuracy by evidence-balance group (pooled over conditions), n on each bar."""
    ev = as_metrics(metrics).evidence_balance
    if ev is None or not ev.available:
        return None
    groups = [g for g in GROUP_NAMES if g in ev.groups and ev.groups[g].n]
    fig = Figure(figsize=(6.0, 3.6))
    ax = fig.add_subplot()
    ys = [_pct(ev.groups[g].abstention_accuracy) for g in groups]
    errs: Sequence[Sequence[float]] = list(
        zip(*(_err(*_stat(ev.groups[g], "abstention_accuracy"), 100.0) for g in groups))
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
    share = _finite(ev.negative_share)
    note = "" if share is None else f"; negative documents: {100 * share:.1f}%"
    ax.set_title(f"Abstention by evidence balance (unanswerable questions{note})", fontsize=9)
    return _save(fig, path, as_metrics(metrics).simulated)


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
            ys = [_pct(getattr(p, metric)) for p in series.points]
            errs = list(zip(*(_err(*_stat(p, metric), 100.0) for p in series.points)))
            other = short(condition_label(series.other), 30) if series.other else ""
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=2, label=short(f"{series.context} {other}".strip(), 36))
        ax.set_xlabel("preceding turns")
        _integer_ticks(ax)
        ax.set_ylabel(f"{title} (%)")
        ax.set_ylim(0, 105)
        ax.set_title(title)
        ax.legend(fontsize=7, title="context", title_fontsize=7)
    fig.suptitle("Multi-turn: accuracy by conversation history")
    return _save(fig, path, as_metrics(metrics).simulated)


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
            drawn = [p for p in pts if _finite(p.tpc) is not None]
            infinite += [f"{effort}/cap {p.cap}" for p in pts if p.tpc is not None and math.isinf(float(p.tpc))]
            xs = [_finite(p.tpc) or 0.0 for p in drawn]
            ys = [_pct(p.overall_accuracy) for p in drawn]
            xerr: Sequence[Sequence[float]] = list(zip(*(_err(*_stat(p, "tpc")) for p in drawn))) or ([], [])
            yerr: Sequence[Sequence[float]] = list(
                zip(*(_err(*_stat(p, "overall_accuracy"), 100.0) for p in drawn))
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
            (p for p in grid.points if p.on_frontier and _finite(p.tpc) is not None),
            key=lambda p: _finite(p.tpc) or 0.0,
        )
        if front:
            fx, fy = [_finite(p.tpc) or 0.0 for p in front], [_pct(p.overall_accuracy) for p in front]
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
    return _save(fig, path, fr.simulated or as_metrics(metrics).simulated)


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


def write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    """A CSV file of a figure's data (numbers as written in metrics.json; infinity as `inf`)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


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
