"""The report's "Budgets" section: how much of each per-execution budget (search cap, token
budget) the executions used, per condition, from metrics.json's `budgets` block
(`tally.budget_summary`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.report_format import fmt_num_ci, fmt_pct_ci, md_table
from branchpoint.evaluation.tally import BUDGETS

_HEADER = ("condition", "budget", "n", "mean limit", "mean used", "use share", "reached", "answer forced")
_NAMES = {"search_cap": "search cap (searches)", "token_budget": "token budget (generated tokens)"}


def _row(label: str, name: str, entry: dict[str, Any]) -> list[str]:
    e = SimpleNamespace(**entry)
    return [
        label,
        _NAMES.get(name, name),
        str(entry.get("n", "—")),
        f"{float(entry['mean_limit']):,.1f}" if entry.get("mean_limit") is not None else "—",
        fmt_num_ci(e, "mean_used", 2),
        fmt_pct_ci(e, "use_share"),
        fmt_pct_ci(e, "hit_share"),
        fmt_pct_ci(e, "forced_share"),
    ]


def budgets_section(metrics: MetricsReport) -> list[str]:
    """The section's lines ([] when no record states its budgets)."""
    block = metrics.budgets or {}
    if not block.get("available"):
        return []
    rows = [
        _row(label, name, entry)
        for label, by_budget in (block.get("by_condition") or {}).items()
        for name in BUDGETS
        if (entry := (by_budget or {}).get(name))
    ]
    if not rows:
        return []
    return [
        "## Budgets",
        "",
        "Per execution: the limit, what was used (searches made; generated tokens, reasoning included), "
        "the use share (Σ used / Σ limit), the share that reached the limit and the share whose answer "
        "that budget forced (95% intervals over questions).",
        "",
        md_table(_HEADER, rows),
        "",
    ]
