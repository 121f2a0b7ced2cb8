"""The sections of report.md after its main tables, one function each, from a `MetricsReport`:
cost channels and latency, TPC by outcome, search vs no search, the search-cap sweep and its
marginal ROI, over-search, evidence balance, multi-turn, reasoning effort, the effort × cap
frontier, judge agreement, the
identical-conditions warning and the links into the viewer. Each returns markdown lines.
"""

from __future__ import annotations

from branchpoint.evaluation.metrics_file import Change, FrontierCapStep, FrontierEffortStep, MetricsReport, RoiStep
from branchpoint.evaluation.report_format import (
    GROUP_NAMES,
    OUTCOME_NAMES,
    fmt_interval,
    fmt_num_ci,
    fmt_pct_ci,
    md_cell,
    md_table,
)
from branchpoint.evaluation.tally import condition_label

Figures = dict[str, str | None] | None


def figure_lines(figures: Figures, key: str, caption: str, missing: str) -> list[str]:
    """The image line of a figure, a "skipped" line when it was not drawn, nothing without figures."""
    if figures is None:
        return []
    if figures.get(key):
        return [f"![{caption}]({figures[key]})", ""]
    return [f"_Figure skipped: {missing}._", ""]


def _no_data(reason: str | None, default: str) -> str:
    return f"No data: {reason or default}."


def cost_section(metrics: MetricsReport) -> list[str]:
    header = (
        "condition",
        "n",
        "TPC",
        "generated",
        "λ·input",
        "μ·search",
        "mean searches",
        "mean wall s",
        "model latency s / query",
        "s / model call",
    )
    rows = []
    for label, m in metrics.by_condition.items():
        ch = m.tpc_channels or {}

        def share(name: str) -> str:
            c = ch.get(name)
            return (
                "—"
                if c is None or c.share is None
                else f"{fmt_num_ci(c, 'per_correct', 0)} ({100 * float(c.share):.0f}%)"
            )

        rows.append(
            [
                label,
                str(m.n),
                fmt_num_ci(m, "tpc", 0),
                share("generated"),
                share("input"),
                share("search"),
                fmt_num_ci(m, "mean_search_calls", 2),
                fmt_num_ci(m, "mean_wall_s", 2),
                fmt_num_ci(m, "mean_model_latency_s", 2),
                fmt_num_ci(m, "mean_model_call_latency_s", 2),
            ]
        )
    return [
        "## Cost channels and latency",
        "",
        "TPC split into its three channels, each as tokens per correct answer and (share of the "
        "total cost): generated tokens g, λ·input tokens, μ·search calls. Latency per query: mean "
        "wall-clock seconds, mean model-call seconds per execution and per call.",
        "",
        md_table(header, rows),
        "",
    ]


def outcome_section(metrics: MetricsReport, figures: Figures) -> list[str]:
    header = ("condition", "n", *OUTCOME_NAMES.values())
    rows = []
    for label, m in metrics.by_condition.items():
        by = m.tpc_by_outcome or {}
        rows.append(
            [
                label,
                str(m.n),
                *(
                    "—"
                    if o not in by or by[o].cost_per_execution is None
                    else f"{fmt_num_ci(by[o], 'cost_per_execution', 0)} (n={by[o].n})"
                    for o in OUTCOME_NAMES
                ),
            ]
        )
    return [
        "## TPC by outcome",
        "",
        "Mean cost (g + λ·x + μ·|S|) per execution within each outcome; a wrong answer includes "
        "not attempting an answerable question. TPC itself stays Σ cost / Σ correct.",
        "",
        md_table(header, rows),
        "",
        *figure_lines(figures, "tpc_outcome", "TPC by outcome", "no scored executions"),
    ]


def _delta_pct(entry: Change) -> str:
    if entry.change is None:
        return "—"
    w, wo = entry.with_, entry.without
    base = f"{100 * float(entry.change):+.1f}{fmt_interval(entry.change_ci, 100.0)}"
    return base if w is None or wo is None else f"{base} ({100 * float(wo):.1f} → {100 * float(w):.1f})"


def search_effect_section(metrics: MetricsReport, figures: Figures) -> list[str]:
    pairs = metrics.search_effect
    lines = ["## With vs without search", ""]
    if not pairs:
        lines += [_no_data(None, "no two conditions differ only in agent.search (or search_cap 0 vs > 0)"), ""]
    else:
        header = (
            "model",
            "with search",
            "n with / without",
            "answer acc Δ",
            "abstention acc Δ",
            "overall acc Δ",
            "TPC Δ",
        )
        rows = []
        for p in pairs:
            n_with = "—" if p.n_with is None else p.n_with
            n_without = "—" if p.n_without is None else p.n_without
            rows.append(
                [
                    p.model,
                    p.with_,
                    f"{n_with} / {n_without}",
                    *(_delta_pct(c) for c in (p.answer_accuracy, p.abstention_accuracy, p.overall_accuracy)),
                    fmt_num_ci(p.tpc, "change", 0),
                ]
            )
        lines += [
            "Change = with search − without (percentage points; paired bootstrap 95% CI).",
            "",
            md_table(header, rows),
            "",
        ]
    lines += figure_lines(figures, "accuracy_search", "Accuracy with vs without search", "no with/without-search pairs")
    return lines


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
        lines += [_no_data(None, "no conditions differ only in agent.search_cap"), ""]
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


def over_search_section(metrics: MetricsReport) -> list[str]:
    ov = metrics.over_search
    lines = ["## Over-search", ""]
    if ov is None or not ov.available:
        return lines + [_no_data(ov.reason if ov else None, "no minimal_search.jsonl"), ""]
    entries = [*ov.by_condition.items(), ("all", ov)]
    rows = [
        [
            label,
            str(e.n),
            "—" if e.n_no_search is None else str(e.n_no_search),
            fmt_num_ci(e, "mean_searches", 2),
            fmt_num_ci(e, "mean_minimal_searches", 2),
            fmt_num_ci(e, "over_search_pct", 1),
        ]
        for label, e in entries
    ]
    judges = ", ".join(ov.judges) or "unknown"
    lines += [
        "Over-search % (study Appendix A.1) = mean searches / mean minimal searches − 1, over correct "
        "executions, those that needed no search included (n = correct executions, of which n₀ made no "
        f"search; minimal searches from THINK forks, `branchpoint fork --minimal-search`; judge: {judges}).",
        "",
        md_table(("condition", "n", "n₀", "mean searches", "mean minimal", "over-search %"), rows),
        "",
    ]
    avg = ov.model_average
    if ov.by_model:
        model_rows = [
            [
                m,
                str(e.n),
                "—" if e.n_no_search is None else str(e.n_no_search),
                fmt_num_ci(e, "mean_searches", 3),
                fmt_num_ci(e, "mean_minimal_searches", 3),
                fmt_num_ci(e, "over_search_pct", 1),
            ]
            for m, e in ov.by_model.items()
        ]
        if avg is not None and avg.n_models:
            model_rows.append(
                [
                    f"average of {avg.n_models} models",
                    "—",
                    "—",
                    fmt_num_ci(avg, "mean_searches", 3),
                    fmt_num_ci(avg, "mean_minimal_searches", 3),
                    fmt_num_ci(avg, "over_search_pct", 1),
                ]
            )
        lines += [
            "Per model (its conditions pooled) and the unweighted average over models, as the study averages Table 8.",
            "",
            md_table(("model", "n", "n₀", "mean searches", "mean minimal", "over-search %"), model_rows),
            "",
        ]
    return lines


def evidence_section(metrics: MetricsReport, figures: Figures) -> list[str]:
    ev = metrics.evidence_balance
    lines = ["## Evidence balance", ""]
    if ev is None or not ev.available:
        lines += [_no_data(ev.reason if ev else None, "no evidence judgments"), ""]
    else:
        header = ("condition", "n", "negative docs (unanswerable)", "negative docs (answerable)", *GROUP_NAMES.values())
        rows = []
        for label, e in [*ev.by_condition.items(), ("all", ev)]:
            groups = [e.groups.get(g) for g in GROUP_NAMES]
            rows.append(
                [
                    label,
                    "—" if e.n_unanswerable is None else str(e.n_unanswerable),
                    fmt_pct_ci(e, "negative_share"),
                    fmt_pct_ci(e.answerable, "negative_share"),
                    *(
                        "—" if g is None or not g.n else f"{fmt_pct_ci(g, 'abstention_accuracy')} (n={g.n})"
                        for g in groups
                    ),
                ]
            )
        lines += [
            "Abstention accuracy by the balance of positive (supports an answer) and negative "
            "(signals uncertainty) documents among those retrieved, and the share of negative "
            "documents among those retrieved for unanswerable and for answerable questions (study "
            f"§5.2, Tables 5 and 10); judge: {metrics.judge}"
            + (
                f"; {ev.n_unparseable_documents} unparseable document judgments left out"
                if ev.n_unparseable_documents
                else ""
            )
            + ".",
            "",
            md_table(header, rows),
            "",
        ]
    lines += figure_lines(figures, "evidence_balance", "Evidence balance", "no evidence judgments")
    return lines


def multi_turn_section(metrics: MetricsReport, figures: Figures) -> list[str]:
    mt = metrics.multi_turn
    lines = ["## Multi-turn", ""]
    if mt is None or not mt.available:
        lines += [_no_data(mt.reason if mt else None, "no multi_turn.preceding key in the conditions"), ""]
    else:
        rows = []
        for series in mt.series:
            other = condition_label(series.other) if series.other else ""
            for p in series.points:
                rows.append(
                    [
                        series.context,
                        other or "—",
                        str(p.preceding),
                        str(p.n),
                        fmt_pct_ci(p, "answer_accuracy"),
                        fmt_pct_ci(p, "abstention_accuracy"),
                        fmt_num_ci(p, "tpc", 0),
                    ]
                )
        lines += [md_table(("context", "other", "preceding turns", "n", "Answer Acc", "Abst. Acc", "TPC"), rows), ""]
    lines += figure_lines(figures, "multi_turn", "Multi-turn curves", "no multi-turn conditions")
    return lines


def effort_section(metrics: MetricsReport) -> list[str]:
    re_ = metrics.reasoning_effort
    lines = ["## Reasoning effort", ""]
    if re_ is None or not re_.available:
        return lines + [_no_data(re_.reason if re_ else None, "no reasoning_effort key in the conditions"), ""]
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
        return lines + [_no_data(fr.reason if fr else None, "no effort × search-cap sweep"), ""]
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


def agreement_section(metrics: MetricsReport, figures: Figures = None) -> list[str]:
    from branchpoint.evaluation.agreement import agreement_markdown

    agreement = metrics.judge_agreement
    lines = ["## Judge agreement", ""]
    if not agreement:
        return lines + [
            "No data: only one judge has labelled these traces (run `branchpoint evaluate` with another `--judge`).",
            "",
        ]
    return lines + [
        "Pairwise agreement and Cohen's κ on the items both judges labelled (`decisive` = the label "
        "that decides correctness). The seed study reports 89.4% / 92.3% between LLM judges and 84% "
        "with humans.",
        "",
        agreement_markdown(agreement),
        "",
        *figure_lines(figures, "judge_agreement", "Judge agreement heatmap", "fewer than two judges"),
    ]


def _n_of(metrics: MetricsReport, label: str) -> str:
    m = metrics.by_condition.get(label)
    return "—" if m is None else str(m.n)


def tpc_sensitivity_section(metrics: MetricsReport) -> list[str]:
    """TPC per condition with λ varied (μ at the run's value) and with μ varied (λ at the run's
    value), and how often the conditions' order by TPC is the one at the run's (λ, μ) over the
    whole grid (`evaluation.tpc_sensitivity`; the full grid is in metrics.json)."""
    from branchpoint.evaluation.report_format import fmt_tpc

    sens = metrics.tpc_sensitivity
    lines = ["## TPC-coefficient sensitivity", ""]
    if not sens or not sens.get("available"):
        return lines + [_no_data((sens or {}).get("reason"), "not computed (older metrics.json)"), ""]
    base = sens["base"]
    points = {(p["lam"], p["mu"]): p for p in sens["points"]}
    labels = list(sens["by_condition"])

    def table(axis: str, values: list[float]) -> str:
        cols = [points[(v, base["mu"]) if axis == "lam" else (base["lam"], v)] for v in values]
        sym = "λ" if axis == "lam" else "μ"
        header = ("condition", "n", *(f"{sym} = {v:g}" for v in values))
        rows = [
            [label, _n_of(metrics, label), *(fmt_tpc(c["by_condition"][label]["tpc"]) for c in cols)]
            for label in labels
        ]
        return md_table(header, rows)

    taus = [p for p in sens["points"] if p["kendall_tau"] is not None]
    worst = min(taus, key=lambda p: p["kendall_tau"]) if taus else None
    lines += [
        f"TPC recomputed with the coefficients varied (seed 000, Appendix B.2); the run's own are "
        f"λ = {base['lam']:g}, μ = {base['mu']:g}. The conditions' order by TPC is the run's own at "
        f"{sens['n_same_order']} of {sens['n_points']} grid points"
        + (
            f"; the lowest Kendall τ against it is {worst['kendall_tau']:.2f} "
            f"(λ = {worst['lam']:g}, μ = {worst['mu']:g})."
            if worst
            else "."
        ),
        "",
        f"TPC with λ varied (μ = {base['mu']:g}):",
        "",
        table("lam", sens["lams"]),
        "",
        f"TPC with μ varied (λ = {base['lam']:g}):",
        "",
        table("mu", sens["mus"]),
        "",
    ]
    return lines


def identical_section(metrics: MetricsReport) -> list[str]:
    """A loud warning block naming the sweep conditions that sent the model identical requests."""
    from branchpoint.evaluation.sameness import identical_warnings

    lines = identical_warnings(metrics.identical_conditions or [])
    if not lines:
        return []
    out = [
        "> **Warning: identical conditions.** These conditions sent the model exactly the same "
        "requests; their rows below differ only by label (or by sampling).",
        ">",
    ]
    out += [f"> - {md_cell(line.removeprefix('IDENTICAL CONDITIONS: '))}" for line in lines]
    return [*out, ""]


def viewer_section(metrics: MetricsReport, viewer: str) -> list[str]:
    """Links from each condition's outcome counts into the viewer's table, filtered to them."""
    from urllib.parse import urlencode

    lines = [
        "## Executions in the viewer",
        "",
        f"Each link opens the viewer export (`{viewer}`) filtered to those executions.",
        "",
    ]
    for label, m in metrics.by_condition.items():
        by = m.tpc_by_outcome or {}
        links = [
            f"[{name}: {by[o].n}]({viewer}#/?{urlencode({'condition': label, 'outcome': o})})"
            for o, name in OUTCOME_NAMES.items()
            if o in by and by[o].n
        ]
        lines.append(f"- `{label}`: " + (", ".join(links) or "no scored executions"))
    return [*lines, ""]
