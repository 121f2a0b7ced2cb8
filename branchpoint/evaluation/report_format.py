"""How the reports write numbers and tables: accuracies, TPC and means with their bootstrap
intervals, markdown tables, short condition labels, and the names of outcomes and evidence
groups. Shared by the markdown report, its sections, the combined report and the figures.

The `*_ci` helpers read a statistic and its interval by name from a metrics block (a
`metrics_file` model): `fmt_pct_ci(block, "answer_accuracy")` formats `block.answer_accuracy`
with `block.answer_accuracy_ci`.
"""

from __future__ import annotations

import math
from typing import Any

OUTCOME_NAMES: dict[str, str] = {
    "correct_answer": "correct answer",
    "wrong_answer": "wrong answer",
    "correct_abstention": "correct abstention",
    "failed_abstention": "failed abstention",
}
GROUP_NAMES: dict[str, str] = {
    "only_positive": "only positive",
    "positive_ge_negative": "positive ≥ negative",
    "negative_gt_positive": "negative > positive",
    "only_negative": "only negative",
    "no_evidence": "no evidence",
}


def fmt_accuracy(value: float | None) -> str:
    """An accuracy as a percentage with one decimal; "—" when undefined."""
    return "—" if value is None else f"{100 * value:.1f}%"


def fmt_tpc(value: float | str | None) -> str:
    """A TPC with thousands separators; "∞" when nothing was correct, "—" when undefined."""
    if value is None:
        return "—"
    value = float(value)  # "inf" parses too
    return "∞" if math.isinf(value) else f"{value:,.1f}"


def fmt_mean(value: float | None) -> str:
    """A mean with one decimal; "—" when undefined."""
    return "—" if value is None else f"{value:,.1f}"


def pct(value: float | None) -> str:
    """A fraction in percent, one decimal, without the sign; "—" when undefined."""
    return "—" if value is None else f"{100 * value:.1f}"


def whole(value: float | None) -> str:
    """A number rounded to a whole one with thousands separators; "—" when undefined."""
    return "—" if value is None else f"{value:,.0f}"


def fmt_interval(ci: Any, scale: float = 1.0, digits: int = 1) -> str:
    """` [lo, hi]` of a bootstrap interval (scaled), "" when there is none."""
    if not ci:
        return ""
    lo, hi = (None if v is None else float(v) for v in ci)
    if lo is None or hi is None:
        return ""

    def one(v: float) -> str:
        return ("∞" if v > 0 else "−∞") if math.isinf(v) else f"{v * scale:,.{digits}f}"

    return f" [{one(lo)}, {one(hi)}]"


def _stat(block: Any, key: str) -> tuple[Any, Any]:
    if block is None:
        return None, None
    return getattr(block, key, None), getattr(block, key + "_ci", None)


def fmt_pct_ci(block: Any, key: str) -> str:
    """An accuracy of a metrics block in % with its interval, e.g. `61.2 [55.0, 67.1]`; "—" when undefined."""
    value, ci = _stat(block, key)
    if value is None:
        return "—"
    return f"{100 * float(value):.1f}{fmt_interval(ci, 100.0)}"


def fmt_num_ci(block: Any, key: str, digits: int = 1) -> str:
    """A number of a metrics block (TPC, a mean, a share) with its interval; ∞ for infinity, "—" when undefined."""
    value, ci = _stat(block, key)
    if value is None:
        return "—"
    v = float(value)
    text = "∞" if math.isinf(v) else f"{v:,.{digits}f}"
    return text + fmt_interval(ci, 1.0, digits)


def md_cell(text: str) -> str:
    """A markdown table cell (pipes escaped)."""
    return text.replace("|", "\\|")


def md_table(header: tuple[str, ...], rows: list[list[str]]) -> str:
    """A markdown table, the first column left-aligned and the others right-aligned."""
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |",
    ]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def short_label(label: str) -> str:
    """`agent.search=true,retrieval.sources.noisy.chunk_words=40` -> `agent.search=true,noisy.chunk_words=40`:
    each key keeps its section and setting (the last two parts), never a bare `default=clean`."""
    return ",".join(
        ".".join(part.split("=", 1)[0].split(".")[-2:]) + "=" + part.split("=", 1)[1] if "=" in part else part
        for part in label.split(",")
    )
