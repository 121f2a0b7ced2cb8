"""The sections of report.md after its main tables, one function each, from a `MetricsReport`:
cost channels and latency, TPC by outcome, search vs no search, over-search, evidence balance,
multi-turn, the identical-conditions warning and the links into the viewer. Each returns markdown
lines. The sweep sections (search cap, reasoning effort, their frontier) are in
`report_sweep_sections`; judge agreement and TPC sensitivity in `report_robustness_sections`.
"""

from __future__ import annotations

from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.metrics_blocks import Change
from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.report_format import (
    GROUP_NAMES,
    OUTCOME_NAMES,
    fmt_interval,
    fmt_num_ci,
    fmt_pct_ci,
    md_cell,
    md_table,
)

Figures = dict[str, str | None] | None


def figure_lines(figures: Figures, key: str, caption: str, missing: str) -> list[str]:
    """The image line of a figure, a "skipped" line when it was not drawn, nothing without figures."""
    if figures is None:
        return []
    if figures.get(key):
        return [f"![{caption}]({figures[key]})", ""]
    return [f"_Figure skipped: {missing}._", ""]


def no_data(reason: str | None, default: str) -> str:
    """The line a section shows when it has nothing to show: `reason`, else `default`."""
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
        lines += [no_data(None, "no two conditions differ only in agent.search (or search_cap 0 vs > 0)"), ""]
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


def over_search_section(metrics: MetricsReport) -> list[str]:
    ov = metrics.over_search
    lines = ["## Over-search", ""]
    if ov is None or not ov.available:
        return lines + [no_data(ov.reason if ov else None, "no minimal_search.jsonl"), ""]
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
        lines += [no_data(ev.reason if ev else None, "no evidence judgments"), ""]
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
        lines += [no_data(mt.reason if mt else None, "no multi_turn.preceding key in the conditions"), ""]
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
