"""The learning-curve figure of value.json (`value --learning-curves`): gain R²_Δ and Brier by
training size, one line per feature family, PNG + SVG with its data as CSV beside them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from branchpoint.evaluation.figure_common import finite, save_figure, write_csv
from branchpoint.evaluation.value.value_file import ValueReport, as_value


def data_learning_curves(value: ValueReport | dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The numbers of the learning-curve figure (value.json's `learning_curves`): one row per
    feature family and training budget."""
    header = ["family", "budget", "gain_r2", "gain_r2_low", "gain_r2_high", "brier", "brier_low", "brier_high"]
    rows: list[list[Any]] = []
    curves = as_value(value).learning_curves
    for fam, entry in (curves.families if curves is not None else {}).items():
        for budget, p in entry.by_budget.items():
            band, bband = p.gain_r2_band or [None, None], p.brier_band or [None, None]
            rows.append([fam, int(budget), p.gain_r2, band[0], band[1], p.brier, bband[0], bband[1]])
    return header, rows


def plot_learning_curves(value: ValueReport | dict[str, Any], path: Path, simulated: bool = False) -> Path | None:
    """Gain R²_Δ and Brier against the number of training questions, one line per feature family
    with the band over the nested training draws (search-value study, the matched-configuration
    learning curves of its Figure 4); PNG + SVG, data as CSV beside them."""
    header, rows = data_learning_curves(value)
    if not rows:
        return None
    fig = Figure(figsize=(9.6, 3.6))
    panels = ((2, 3, 4, "gain R²_Δ (held-out folds)"), (5, 6, 7, "Brier (held-out folds)"))
    families = list(dict.fromkeys(r[0] for r in rows))
    for k, (col, lo, hi, label) in enumerate(panels):
        ax = fig.add_subplot(1, 2, k + 1)
        for fam in families:
            pts = sorted((r for r in rows if r[0] == fam), key=lambda r: r[1])
            xs = [r[1] for r in pts]
            ys = [finite(r[col]) for r in pts]
            line = ax.plot(xs, [math.nan if y is None else y for y in ys], marker="o", label=fam)[0]
            los = [v for r in pts if (v := finite(r[lo])) is not None]
            his = [v for r in pts if (v := finite(r[hi])) is not None]
            if len(los) == len(his) == len(pts):
                ax.fill_between(xs, los, his, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_xlabel("training questions")
        ax.set_ylabel(label)
        locator = ax.xaxis.get_major_locator()
        assert isinstance(locator, MaxNLocator)  # a linear axis' default AutoLocator is one
        locator.set_params(integer=True)
        if k == 0:
            ax.axhline(0.0, color="#999999", linewidth=0.8)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Learning curves: forecasters fitted on nested training sizes (bands: over training draws)")
    save_figure(fig, path, simulated)
    write_csv(path.with_suffix(".csv"), header, rows)
    return path
