"""The judge-agreement heatmap: pairwise agreement between every two judges, one panel per
label kind, from metrics.json's `judge_agreement` (`agreement.judge_agreement`).

Over-searching study, §3.4 "LLM Judge Evaluation Protocol" → *Inter-judge validation* (the
pairwise agreement matrix of its three judges, Appendix Figure 8: 89.4 % average on answer
accuracy, 92.3 % on abstention). Cell (a, b) of a kind's panel is the share of the items both
judges labelled on which their labels are equal, annotated with that share in %, Cohen's κ and
the number of items; the diagonal is a judge against itself (100 %, drawn blank); a pair that
shared no item of that kind is blank. Rule and LLM judges appear alike: every judge that
labelled the traces is a row. The numbers are written beside the figure as CSV
(`agreement_rows`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from branchpoint.evaluation.agreement import KINDS
from branchpoint.evaluation.metrics_file import MetricsReport, as_metrics

#: Kinds drawn, in order (those with at least one judged pair).
PANEL_KINDS: tuple[str, ...] = KINDS


def agreement_matrix(pairs: list[dict[str, Any]], judges: list[str], kind: str) -> tuple[np.ndarray, list[list[str]]]:
    """(agreement matrix, cell texts) of one kind: M[i][j] = agreement of judges i and j (NaN
    where they shared no item, and on the diagonal); text "87% / κ 0.61 / n 40"."""
    index = {j: i for i, j in enumerate(judges)}
    matrix = np.full((len(judges), len(judges)), np.nan)
    texts = [["" for _ in judges] for _ in judges]
    for p in pairs:
        if p["kind"] != kind or p.get("agreement") is None:
            continue
        a, b = index[p["judge_a"]], index[p["judge_b"]]
        kappa = "—" if p.get("kappa") is None else f"{p['kappa']:.2f}"
        text = f"{100 * p['agreement']:.0f}%\nκ {kappa}\nn {p['n']}"
        matrix[a, b] = matrix[b, a] = p["agreement"]
        texts[a][b] = texts[b][a] = text
    return matrix, texts


def agreement_rows(metrics: MetricsReport) -> tuple[list[str], list[list[Any]]]:
    """The numbers behind the heatmap: one row per judged pair and kind."""
    header = ["kind", "judge_a", "judge_b", "n", "agreement", "kappa", "n_excluded"]
    agreed = metrics.judge_agreement or {}
    rows = [
        [p["kind"], p["judge_a"], p["judge_b"], p["n"], p.get("agreement"), p.get("kappa"), p.get("n_excluded")]
        for p in agreed.get("pairs") or []
    ]
    return header, rows


def plot_judge_agreement(metrics: MetricsReport | dict[str, Any], path: Path) -> Path | None:
    """One heatmap panel per kind with a judged pair; None (nothing written) with fewer than two judges."""
    from branchpoint.evaluation.figure_common import save_figure

    agreed = as_metrics(metrics).judge_agreement or {}
    pairs = [p for p in agreed.get("pairs") or [] if p.get("agreement") is not None]
    if not pairs:
        return None
    judges = sorted({p["judge_a"] for p in pairs} | {p["judge_b"] for p in pairs})
    kinds = [k for k in PANEL_KINDS if any(p["kind"] == k for p in pairs)]
    size = max(2.6, 0.9 * len(judges) + 1.4)
    fig = Figure(figsize=(size * len(kinds) + 0.8, size + 0.4))
    image = None
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(1, len(kinds), i + 1)
        matrix, texts = agreement_matrix(pairs, judges, kind)
        image = ax.imshow(np.ma.masked_invalid(matrix), vmin=0.0, vmax=1.0, cmap="viridis")
        for a in range(len(judges)):
            for b in range(len(judges)):
                if texts[a][b]:
                    value = matrix[a, b]
                    color = "black" if not math.isnan(value) and value > 0.6 else "white"
                    ax.text(b, a, texts[a][b], ha="center", va="center", fontsize=7, color=color)
        ax.set_xticks(range(len(judges)))
        ax.set_yticks(range(len(judges)))
        ax.set_xticklabels(judges, fontsize=8, rotation=30, ha="right")
        ax.set_yticklabels(judges if i == 0 else [], fontsize=8)
        ax.set_title(kind, fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=fig.axes, shrink=0.8, label="agreement")
    fig.suptitle("Judge agreement (share of shared items with equal labels)", fontsize=10)
    return save_figure(fig, path, as_metrics(metrics).simulated)
