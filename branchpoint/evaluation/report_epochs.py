"""The report's "Epochs" section (`run.epochs` > 1): pass@k, pass^k, flip rate and the ICC(1) of
the decisions per condition and category, from metrics.json's `epochs` block (`evaluation.epochs`)."""

from __future__ import annotations

from branchpoint.evaluation.epochs import DECISIONS
from branchpoint.evaluation.metrics_blocks import EpochSummary
from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.report_format import fmt_num_ci, fmt_pct_ci, md_table

_HEADER = (
    "condition",
    "category",
    "questions",
    "epochs",
    "pass@1",
    "k",
    "pass@k",
    "pass^k",
    "flip rate",
    *(f"ICC {d}" for d in DECISIONS),
)


def _row(label: str, category: str, s: EpochSummary) -> list[str]:
    """One table row: pass@1, and pass@k / pass^k at the most epochs of the row's questions."""
    first = s.pass_[0] if s.pass_ else None
    last = s.pass_[-1] if s.pass_ else None
    epochs = str(s.epochs_max) if s.epochs_min == s.epochs_max else f"{s.epochs_min}–{s.epochs_max}"
    return [
        label,
        category,
        str(s.n_questions),
        epochs,
        fmt_pct_ci(first, "pass_at_k"),
        str(last.k) if last else "—",
        fmt_pct_ci(last, "pass_at_k"),
        fmt_pct_ci(last, "pass_hat_k"),
        fmt_pct_ci(s, "flip_rate"),
        *(fmt_num_ci(s.reliability.get(d), "icc", 2) for d in DECISIONS),
    ]


def epochs_section(metrics: MetricsReport) -> list[str]:
    """The section's lines; none when the run has one epoch per question and condition."""
    block = metrics.epochs
    if block is None:
        return []
    rows = []
    for label, c in block.by_condition.items():
        rows.append(_row(label, "all", c))
        rows += [_row(label, cat, s) for cat, s in c.by_category.items()]
    return [
        "## Epochs",
        "",
        f"Up to {block.epochs} independent executions (epochs) of each question per condition. pass@k: the "
        "chance that at least one of k epochs is correct, pass^k: that all k are (unbiased estimators over "
        "each question's epochs, averaged over questions; pass@k and pass^k in % at the row's most epochs); "
        "flip rate: share of questions whose correctness differs across epochs; ICC: one-way ICC(1) of each "
        "decision (searched, abstained, number of searches) with questions as groups (1: fixed by the "
        "question; 0: as variable within a question as across questions; — undefined). Every other table "
        "pools all epochs.",
        "",
        md_table(_HEADER, rows),
        "",
    ]
