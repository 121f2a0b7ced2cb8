"""The figure of the boundary over training: three panels against the training step.

Answerable without search (%), redundant-search share (%) and TPC, each with its bootstrap
interval as error bars; PNG and SVG (`figure_common.save_figure`) with the numbers as CSV beside them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from branchpoint.evaluation.figure_common import error_bar, pct, save_figure, write_csv

FIGURE_FILE = "training_boundary.png"
PANELS = (
    ("answerable_without_search", "Answerable without search (%)", 100.0),
    ("redundant_search_share", "Redundant searches (%)", 100.0),
    ("tpc", "TPC (tokens per correct)", 1.0),
)


def _value(v: Any, scale: float) -> float:
    if v is None:
        return math.nan
    return pct(v) if scale == 100.0 else (float(v) if math.isfinite(float(v)) else math.nan)


def write_training_figure(report: dict[str, Any], folder: Path) -> Path | None:
    """The figure (and its CSV) of a `training_boundary` report; None when it has no steps."""
    steps = report["steps"]
    if not steps:
        return None
    x = [s["step"] for s in steps]
    fig = Figure(figsize=(11, 3.4))
    for i, (key, title, scale) in enumerate(PANELS):
        ax = fig.add_subplot(1, 3, i + 1)
        y = [_value(s[key], scale) for s in steps]
        errs = [error_bar(s[key], s.get(f"{key}_ci"), scale) for s in steps]
        ax.errorbar(x, y, yerr=[[e[0] for e in errs], [e[1] for e in errs]], marker="o", capsize=3, color=f"C{i}")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        if scale == 100.0:
            ax.set_ylim(-5, 105)
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"The search boundary over training (judge {report['judge']}; 95% intervals over questions)", fontsize=10
    )
    path = save_figure(fig, folder / FIGURE_FILE)
    header = ["step", "questions", "rollouts"]
    for key, _, _ in PANELS:
        header += [key, f"{key}_lo", f"{key}_hi"]
    rows = []
    for s in steps:
        row: list[Any] = [s["step"], s["questions"], s["rollouts"]]
        for key, _, _ in PANELS:
            ci = s.get(f"{key}_ci") or [None, None]
            row += [s[key], ci[0], ci[1]]
        rows.append(row)
    write_csv(path.with_suffix(".csv"), header, rows)
    return path


def report_json(report: dict[str, Any]) -> str:
    """The report as JSON text (infinity written as the string "inf", as metrics.json does)."""

    def ready(v: Any) -> Any:
        if isinstance(v, float) and math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if isinstance(v, dict):
            return {k: ready(x) for k, x in v.items()}
        if isinstance(v, list):
            return [ready(x) for x in v]
        return v

    return json.dumps(ready(report), indent=2) + "\n"
