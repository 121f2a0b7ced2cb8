"""Figures of `seed_analyses`' sections: the per-stratum panels (search-value study, Figure 3
right: per-stratum means with 95% component intervals) and the bootstrap distribution of the SD
of gains (Figure 4 left). PNG + SVG, each with its data as CSV beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from branchpoint.evaluation.figure_common import finite, save_figure, write_csv
from branchpoint.evaluation.value.seed_markdown import focal_price
from branchpoint.evaluation.value.value_file import ValueReport, as_value


def data_strata_panels(value: ValueReport | dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Rows (panel, entry, stratum, value, low, high) of the per-stratum figure: router utility at
    the focal price (factorial cells left out) and Brier minus the task prior."""
    block = as_value(value).strata_panels
    rows: list[list[Any]] = []
    if block is None:
        return [], rows
    keys = [k[len("utility:") :] for k in block.panels if k.startswith("utility:")]
    pk = focal_price(keys)
    for panel in (f"utility:{pk}", "brier_minus_reference"):
        for name, per in block.panels.get(panel, {}).items():
            if name.startswith("factorial:"):
                continue
            for s, e in per.items():
                lo, hi = e.interval if e.interval else (None, None)
                rows.append([panel, name, s, e.value, lo, hi])
    return ["panel", "entry", "stratum", "value", "low", "high"], rows


def plot_strata_panels(value: ValueReport | dict[str, Any], path: Path, simulated: bool = False) -> Path | None:
    """One panel per quantity (router utility at the focal price; Brier minus the task prior),
    strata on the x axis, one marker per router / forecaster with its interval."""
    header, rows = data_strata_panels(value)
    if not rows:
        return None
    panels = list(dict.fromkeys(r[0] for r in rows))
    fig = Figure(figsize=(5.2 * len(panels), 3.8))
    for k, panel in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1)
        mine = [r for r in rows if r[0] == panel]
        strata = list(dict.fromkeys(r[2] for r in mine))
        entries = list(dict.fromkeys(r[1] for r in mine))
        width = 0.8 / max(len(entries), 1)
        for j, name in enumerate(entries):
            xs, ys, lo, hi = [], [], [], []
            for i, s in enumerate(strata):
                r = next((r for r in mine if r[1] == name and r[2] == s), None)
                v = finite(r[3]) if r else None
                if v is None:
                    continue
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(v)
                a, b = finite(r[4]) if r else None, finite(r[5]) if r else None
                lo.append(v - a if a is not None else 0.0)
                hi.append(b - v if b is not None else 0.0)
            ax.errorbar(xs, ys, yerr=np.array([lo, hi]), fmt="o", markersize=3, capsize=2, label=name)
        ax.set_xticks(range(len(strata)))
        ax.set_xticklabels(strata, rotation=20, fontsize=8)
        ax.axhline(0.0, color="#999999", linewidth=0.8)
        ax.set_ylabel("utility" if panel.startswith("utility:") else "Brier difference")
        ax.set_title(
            f"router utility, λ = {panel.split(':', 1)[1]}" if panel.startswith("utility:") else "Brier − task prior",
            fontsize=9,
        )
        ax.legend(fontsize=6, loc="best")
    fig.suptitle("Per-stratum panels (95% support-component intervals)")
    save_figure(fig, path, simulated)
    write_csv(path.with_suffix(".csv"), header, rows)
    return path


def plot_gain_sd(value: ValueReport | dict[str, Any], path: Path, simulated: bool = False) -> Path | None:
    """Histogram of the bootstrap SD of gains, with the estimate and its interval marked."""
    g = as_value(value).gain_spread
    dist = g.sd_distribution if g is not None else None
    if g is None or dist is None or not dist.histogram.get("counts"):
        return None
    edges = [float(e) for e in dist.histogram["edges"]]
    counts = [int(c) for c in dist.histogram["counts"]]
    fig = Figure(figsize=(5.2, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    ax.stairs(counts, [100 * e for e in edges], fill=True, alpha=0.5)
    if (sd := finite(g.gain_sd.value)) is not None:
        ax.axvline(100 * sd, color="black", linewidth=1.2, label=f"SD of gains {100 * sd:.1f}")
    for end in g.gain_sd.interval or []:
        if (e := finite(end)) is not None:
            ax.axvline(100 * e, color="black", linestyle="--", linewidth=0.8)
    ax.set_xlabel("SD of gains √V_Δ (points)")
    ax.set_ylabel("resamples")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.suptitle("Sampling distribution of the SD of gains (support-component bootstrap)", fontsize=9)
    save_figure(fig, path, simulated)
    rows = [[edges[i], edges[i + 1], counts[i]] for i in range(len(counts))]
    write_csv(path.with_suffix(".csv"), ["low", "high", "resamples"], rows)
    return path
