"""The sections of report.md on sweeps, one function each, from a `MetricsReport`: the search-cap
sweep and its marginal ROI, reasoning effort, and the effort × search-cap frontier. Each returns
markdown lines."""

from __future__ import annotations

from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.metrics_sweeps import FrontierCapStep, FrontierEffortStep, RoiStep
from branchpoint.evaluation.report_format import fmt_interval, fmt_num_ci, fmt_pct_ci, md_table
from branchpoint.evaluation.report_sections import Figures, figure_lines, no_data


def _roi(step: RoiStep | FrontierCapStep | FrontierEffortStep, metric: str) -> str:
    key = f"{metric}_per_1k_tokens"
    value = getattr(step, key)
    if value is None:
        return "—"
    return f"{100 * float(value):+.2f}{fmt_interval(getattr(step, key + '_ci'), 100.0, 2)}"


def sweep_section(metrics: MetricsReport, figures: Figures) -> list[str]:
    sweeps = metrics.search_cap_sweep
    lines = ["## Search-cap sweep and marginal ROI", ""]
    if not sweeps:
        lines += [no_data(None, "no conditions differ only in agent.search_cap"), ""]
    for sweep in sweeps or []:
        other = condition_label(sweep.other) if sweep.other else "—"
        lines += [f"### {sweep.model} (`{other}`)", ""]
        rows = [
            [
                str(p.cap),
                str(p.n),
                fmt_pct_ci(p, "answer_accuracy"),
                fmt_pct_ci(p, "abstention_accuracy"),
                fmt_num_ci(p, "tpc", 0),
                fmt_num_ci(p, "mean_search_calls", 2),
            ]
            for p in sweep.points
        ]
        lines += [md_table(("cap", "n", "Answer Acc", "Abst. Acc", "TPC", "mean searches"), rows), ""]
        n_at = {p.cap: p.n for p in sweep.points}
        roi = [
            [
                f"{r.from_cap} → {r.to_cap}",
                f"{n_at.get(r.from_cap, '—')} / {n_at.get(r.to_cap, '—')}",
                fmt_num_ci(r, "added_cost_per_query", 0),
                _roi(r, "overall_accuracy"),
                _roi(r, "answer_accuracy"),
                _roi(r, "abstention_accuracy"),
            ]
            for r in sweep.marginal_roi
        ]
        threshold = sweep.roi_min_added_cost
        note = (
            f" ROI is undefined (—) where the mean cost per query moves by less than {threshold:g} tokens."
            if threshold is not None
            else ""
        )
        lines += [
            "Marginal ROI (study Appendix A.2): accuracy change in percentage points per 1,000 tokens "
            "of added cost per query." + note,
            "",
            md_table(
                ("caps", "n", "added cost / query", "overall pp / 1k", "answer pp / 1k", "abstention pp / 1k"), roi
            ),
            "",
        ]
    lines += figure_lines(figures, "tpc_search_cap", "TPC vs search cap", "no search-cap sweep")
    lines += figure_lines(figures, "marginal_roi", "Marginal ROI per search-cap step", "no search-cap sweep")
    return lines


def effort_section(metrics: MetricsReport) -> list[str]:
    re_ = metrics.reasoning_effort
    lines = ["## Reasoning effort", ""]
    if re_ is None or not re_.available:
        return lines + [no_data(re_.reason if re_ else None, "no reasoning_effort key in the conditions"), ""]
    capped = any(r.search_cap is not None for r in re_.rows)
    rows = [
        [
            r.model,
            r.effort,
            *([_cap_text(r.search_cap)] if capped else []),
            str(r.n),
            fmt_pct_ci(r, "answer_accuracy"),
            fmt_pct_ci(r, "abstention_accuracy"),
            fmt_num_ci(r, "tpc", 0),
            fmt_num_ci(r, "mean_search_calls", 2),
            fmt_num_ci(r, "mean_output_tokens", 0),
            fmt_num_ci(r, "mean_reasoning_tokens", 0),
        ]
        for r in re_.rows
    ]
    header = (
        "model",
        "effort",
        *(("search cap",) if capped else ()),
        "n",
        "Answer Acc",
        "Abst. Acc",
        "TPC",
        "searches",
        "output tok",
        "reasoning tok",
    )
    return lines + [md_table(header, rows), ""]


def _cap_text(cap: float | None) -> str:
    if cap is None:
        return "–"
    return str(int(cap)) if float(cap).is_integer() else f"{cap:g}"


def _frontier_roi(step: FrontierCapStep | FrontierEffortStep) -> list[str]:
    return [
        fmt_num_ci(step, "added_cost_per_query", 0),
        fmt_pct_ci(step, "overall_accuracy_change"),
        _roi(step, "overall_accuracy"),
        _roi(step, "answer_accuracy"),
        _roi(step, "abstention_accuracy"),
    ]


def frontier_section(metrics: MetricsReport, figures: Figures) -> list[str]:
    """The effort × search-cap grid: points, the Pareto frontier, marginal ROI along each axis."""
    fr = metrics.effort_cap_frontier
    lines = ["## Reasoning effort × search cap: frontier and marginal ROI", ""]
    if fr is None or not fr.available:
        return lines + [no_data(fr.reason if fr else None, "no effort × search-cap sweep"), ""]
    roi_head = ("added cost / query", "Δ overall acc (pp)", "overall pp / 1k", "answer pp / 1k", "abstention pp / 1k")
    for grid in fr.series:
        other = condition_label(grid.other) if grid.other else "—"
        order = " → ".join(grid.effort_order)
        lines += [
            f"### {grid.model} (`{other}`)",
            "",
            f"Efforts in the {grid.effort_order_source} order ({order}); {grid.n_questions} questions, one "
            "question draw per bootstrap replicate shared by every condition (paired). On the frontier: no other "
            "condition is at least as accurate (overall) at no more TPC and better in one. P(frontier) = share "
            "of replicates in which the condition is on it.",
            "",
        ]
        rows = [
            [
                p.effort,
                str(p.cap),
                str(p.n),
                fmt_pct_ci(p, "overall_accuracy"),
                fmt_pct_ci(p, "answer_accuracy"),
                fmt_pct_ci(p, "abstention_accuracy"),
                fmt_num_ci(p, "tpc", 0),
                "yes" if p.on_frontier else "",
                "—" if p.frontier_probability is None else f"{float(p.frontier_probability):.2f}",
            ]
            for p in grid.points
        ]
        header = ("effort", "cap", "n", "Overall Acc", "Answer Acc", "Abst. Acc", "TPC", "frontier", "P(frontier)")
        lines += [md_table(header, rows), ""]
        cap_rows = [[s.effort, f"{s.from_cap} → {s.to_cap}", *_frontier_roi(s)] for s in grid.cap_roi]
        effort_rows = [[str(s.cap), f"{s.from_effort} → {s.to_effort}", *_frontier_roi(s)] for s in grid.effort_roi]
        note = (
            "Marginal ROI (study Appendix A.2): accuracy change in percentage points per 1,000 tokens of added "
            f"cost per query, paired by question; undefined (—) where the mean cost moves by less than "
            f"{fr.roi_min_added_cost:g} tokens."
            if fr.roi_min_added_cost is not None
            else "Marginal ROI: accuracy points per 1,000 tokens of added cost per query."
        )
        lines += [note, ""]
        if cap_rows:
            lines += [
                "Along the search cap, at each effort:",
                "",
                md_table(("effort", "caps", *roi_head), cap_rows),
                "",
            ]
        if effort_rows:
            lines += [
                "Along the reasoning effort, at each cap:",
                "",
                md_table(("cap", "efforts", *roi_head), effort_rows),
                "",
            ]
    lines += figure_lines(
        figures, "effort_cap_frontier", "Accuracy vs TPC over effort × search cap", "no effort × cap grid"
    )
    return lines
