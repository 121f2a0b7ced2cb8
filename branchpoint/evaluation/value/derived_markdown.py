"""Report tables of the scores `derived` adds to value.json: the two-probe router's token
accounting (search-value study §5.5) and the share of Brier improvement recovered by task
priors (§5.1); see docs/search-value.md."""

from __future__ import annotations

from branchpoint.evaluation.value.value_file import Estimate, Share, ValueReport


def _ci(e: Estimate | Share | None, digits: int) -> str:
    if e is None or e.value is None:
        return "—"
    text = f"{float(e.value):.{digits}f}"
    if e.interval and e.interval[0] is not None and e.interval[1] is not None:
        text += f" [{float(e.interval[0]):.{digits}f}, {float(e.interval[1]):.{digits}f}]"
    return text


def accounting_markdown(report: ValueReport) -> list[str]:
    """The two-probe router's tokens saved, probe cost, net and success cost."""
    acc = report.consistency_accounting
    if acc is None or acc.skipped:
        return []
    rows = [
        ("agreement rate", acc.agreement_rate, 3),
        ("continuation tokens saved vs always SEARCH (before probes)", acc.tokens_saved, 1),
        ("probe tokens (both THINK probes)", acc.probe_tokens, 1),
        ("net tokens saved", acc.net_tokens_saved, 1),
        ("success cost (Ȳ_S − reward of the chosen action)", acc.success_cost, 4),
    ]
    lines = ["### Two-probe consistency: token accounting", "", "| quantity | per state |", "|---|---|"]
    lines += [f"| {label} | {_ci(e, d)} |" for label, e, d in rows]
    return lines + [""]


def prior_share_markdown(report: ValueReport) -> list[str]:
    """Per forecaster: the share of its Brier improvement the task prior recovers, and the
    share carried by its success-level term."""
    block = report.task_prior_share
    if block is None or block.skipped or not block.forecasters:
        return []
    lines = [
        "### Improvement recovered by task priors",
        "",
        f"Brier of the global means (`{block.global_means}`) {block.brier_global_means:.4f}, of the task "
        f"prior (`{block.task_prior}`) {block.brier_task_prior:.4f}. share = (Brier_G − Brier_S) / "
        "(Brier_G − Brier_F); level share = the part of Brier_G − Brier_F in the success-level term.",
        "",
        "| forecaster | share recovered by task prior | level share |",
        "|---|---|---|",
    ]
    for name, entry in block.forecasters.items():
        cells = []
        for s in (entry.share, entry.level_share):
            cells.append(_ci(s, 3) if s.value is not None else f"— ({s.withheld})")
        lines.append(f"| `{name}` | {cells[0]} | {cells[1]} |")
    return lines + [""]


def source_supported_markdown(report: ValueReport) -> list[str]:
    """Brier and gain risk of every forecaster on the source-supported test states."""
    block = report.source_supported
    if block is None:
        return []
    if block.skipped:
        return ["### Source-supported subset", "", f"Not scored: {block.skipped}.", ""]
    lines = [
        "### Source-supported subset",
        "",
        f"{block.test_states} of {block.of_test_states} test states ({block.test_questions} questions) whose "
        f"reference the source audit supports ({block.file}); {block.note}.",
        "",
        "| forecaster | Brier | gain risk L |",
        "|---|---|---|",
    ]
    for name, b in block.brier.items():
        lines.append(f"| `{name}` | {_ci(b, 4)} | {_ci(block.gain_risk.get(name), 4)} |")
    return lines + [""]


def supervision_markdown(report: ValueReport) -> list[str]:
    """Per family and budget: history-fitted minus target-k-fitted Brier, SEARCH alone, and the
    part of the target-k Brier that training-subset variability adds."""
    block = report.supervision_subsets
    if not block:
        return []
    if block.get("skipped"):
        return ["### Supervision subsets", "", f"Not scored: {block['skipped']}.", ""]
    hist = block["history"]
    lines = [
        "### Supervision subsets",
        "",
        f"Fitted on the history ({hist['questions']} questions, {hist.get('source', '')}) vs on k target "
        f"questions ({block['samples']} draws per k, {block['outer_folds']} outer folds by support component).",
        "",
        "| forecaster | k | Brier target-k | historical − target-k | SEARCH alone | subset variability |",
        "|---|---|---|---|---|---|",
    ]
    for name, fam in block["families"].items():
        for k, e in fam["by_budget"].items():
            cells = [
                _ci(Estimate(**e[c]), 4)
                for c in ("brier_target", "historical_minus_target", "search_only", "subset_variability")
            ]
            lines.append(f"| `{name}` | {k} | " + " | ".join(cells) + " |")
    return lines + [""]
