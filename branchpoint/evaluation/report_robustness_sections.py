"""The sections of report.md on how far the headline numbers hold, from a `MetricsReport`: the
agreement between judges and the sensitivity of TPC to its coefficients λ and μ. Each returns
markdown lines."""

from __future__ import annotations

from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.report_format import md_table
from branchpoint.evaluation.report_sections import Figures, figure_lines, no_data


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
        return lines + [no_data((sens or {}).get("reason"), "not computed (older metrics.json)"), ""]
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
