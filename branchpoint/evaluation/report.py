"""Human-readable views of a metrics dict: a rich table for the terminal and a markdown report.

Both accept the dict from `compute_metrics` or the same dict read back from metrics.json (where
an infinite TPC is the string "inf").
"""

from __future__ import annotations

import math
from typing import Any

from rich import box
from rich.table import Table

_COLUMNS: tuple[str, ...] = (
    "condition",
    "n",
    "answer acc",
    "abstention acc",
    "overall acc",
    "TPC",
    "mean searches",
    "mean input tok",
    "mean output tok",
)
_CATEGORY_COLUMNS: tuple[str, ...] = (
    "category",
    "n",
    "accuracy",
    "TPC",
    "mean searches",
    "mean input tok",
    "mean output tok",
)
_CATEGORY_NAMES: dict[str, str] = {
    "answerable": "answerable",
    "AU": "AU (answer unknown)",
    "FP": "FP (false premise)",
    "UC": "UC (underspecified context)",
    "unanswerable": "unanswerable (no category)",
}


def fmt_accuracy(value: float | None) -> str:
    """An accuracy as a percentage with one decimal; "—" when undefined."""
    return "—" if value is None else f"{100 * value:.1f}%"


def fmt_tpc(value: float | str | None) -> str:
    """A TPC with thousands separators; "∞" when nothing was correct, "—" when undefined."""
    if value is None:
        return "—"
    value = float(value)  # "inf" read back from JSON parses too
    return "∞" if math.isinf(value) else f"{value:,.1f}"


def fmt_mean(value: float | None) -> str:
    """A mean with one decimal; "—" when undefined."""
    return "—" if value is None else f"{value:,.1f}"


def _condition_row(label: str, m: dict[str, Any]) -> list[str]:
    return [
        label,
        str(m["n"]) + (f" (+{m['n_incomplete']} incomplete)" if m.get("n_incomplete") else ""),
        fmt_accuracy(m["answer_accuracy"]),
        fmt_accuracy(m["abstention_accuracy"]),
        fmt_accuracy(m["overall_accuracy"]),
        fmt_tpc(m["tpc"]),
        fmt_mean(m["mean_search_calls"]),
        fmt_mean(m["mean_input_tokens"]),
        fmt_mean(m["mean_output_tokens"]),
    ]


def _category_row(key: str, m: dict[str, Any]) -> list[str]:
    accuracy = m["answer_accuracy"] if key == "answerable" else m["abstention_accuracy"]
    return [
        _CATEGORY_NAMES.get(key, key),
        str(m["n"]) + (f" (+{m['n_incomplete']} incomplete)" if m.get("n_incomplete") else ""),
        fmt_accuracy(accuracy),
        fmt_tpc(m["tpc"]),
        fmt_mean(m["mean_search_calls"]),
        fmt_mean(m["mean_input_tokens"]),
        fmt_mean(m["mean_output_tokens"]),
    ]


def tpc_caption(metrics: dict[str, Any]) -> str:
    """One sentence on how TPC was computed, with this run's λ and μ."""
    return (
        f"TPC (tokens per correctness) = Σ(g + λ·x + μ·|S|) / #correct with λ = {metrics['lam']:g}, "
        f"μ = {metrics['mu']:g}: g generated tokens (reasoning included), x input tokens, "
        "|S| search calls, summed over scored questions; ∞ when nothing is correct; lower is "
        "better. Correct = answer judged CORRECT (answerable) or abstained (unanswerable); "
        f"judge: {metrics['judge']}; incomplete executions are excluded."
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _whole(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


#: Short headers for the terminal table, so it fits 80 columns.
_SHORT_COLUMNS: tuple[str, ...] = (
    "condition", "n", "answer", "abstain", "overall", "TPC", "searches", "in tok", "out tok",
)  # fmt: skip


def short_label(label: str) -> str:
    """`agent.search=true,model.name=x` -> `search=true,name=x` (the last part of each key)."""
    return ",".join(part.split("=", 1)[0].rsplit(".", 1)[-1] + "=" + part.split("=", 1)[1]
                    if "=" in part else part for part in label.split(","))


def comparison_table(metrics: dict[str, Any]) -> Table:
    """A rich table with one row per condition (accuracies in %, means per execution)."""
    table = Table(
        title="Accuracy (%) and cost by condition",
        caption=tpc_caption(metrics),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for i, col in enumerate(_SHORT_COLUMNS):
        table.add_column(col, justify="left" if i == 0 else "right", no_wrap=True)
    labels = {label: short_label(label) for label in metrics["by_condition"]}
    if len(set(labels.values())) < len(labels):  # shortening made two conditions look alike
        labels = {label: label for label in labels}
    for label, m in metrics["by_condition"].items():
        tpc = m["tpc"]
        table.add_row(
            labels[label],
            str(m["n"]) + (f" (+{m['n_incomplete']})" if m.get("n_incomplete") else ""),
            *(_pct(m[k]) for k in ("answer_accuracy", "abstention_accuracy", "overall_accuracy")),
            fmt_tpc(tpc) if tpc is None or math.isinf(float(tpc)) else f"{float(tpc):,.0f}",
            fmt_mean(m["mean_search_calls"]),
            *(_whole(m[k]) for k in ("mean_input_tokens", "mean_output_tokens")),
        )
    return table


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(header: tuple[str, ...], rows: list[list[str]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_report(metrics: dict[str, Any], title: str) -> str:
    """A markdown report: the comparison table, then a per-category table for each condition."""
    parts = [f"# {title}", "", tpc_caption(metrics), "", "## By condition", ""]
    rows = [_condition_row(label, m) for label, m in metrics["by_condition"].items()]
    parts += [_md_table(_COLUMNS, rows), ""]
    for label, m in metrics["by_condition"].items():
        parts += [f"## `{label}` by category", ""]
        cat_rows = [_category_row(k, c) for k, c in m["by_category"].items()]
        parts += [_md_table(_CATEGORY_COLUMNS, cat_rows), ""]
    parts += [
        "Accuracy is answer accuracy for answerable questions and abstention accuracy for "
        "AU / FP / UC questions.",
        "",
    ]
    return "\n".join(parts)
