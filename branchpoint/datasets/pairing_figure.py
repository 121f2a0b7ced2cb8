"""The builder's pairing report as a figure: how alike the two halves of a benchmark are.

Four panels over the selected pairs (the over-searching study's Figures 3 and 9 check the same
thing): the cosine similarity of each pair, the length ratio (answerable words / unanswerable
words), the question lengths of both sides, and a t-SNE map of both sides' question embeddings
(scikit-learn's TSNE, seeded; the two halves should overlap, pairs joined by a line). Written as
PNG and SVG, with the pairs behind it (and their t-SNE coordinates) as CSV beside them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from branchpoint.datasets.builder import BuildResult, word_count
from branchpoint.evaluation.figure_common import save_figure, write_csv


def write_pairing_figure(result: BuildResult, path: str | Path) -> Path:
    """Draw the pairing report of `result` at `path` (PNG; SVG and CSV beside it)."""
    path = Path(path)
    pairs = result.pairs
    sims = [p.similarity for p in pairs]
    u_words = [word_count(p.unanswerable.question) for p in pairs]
    a_words = [word_count(p.answerable.question) for p in pairs]
    ratios = [a / u for a, u in zip(a_words, u_words)]
    coords = tsne_coordinates(result)
    panels = 4 if coords is not None else 3
    fig = Figure(figsize=(4.0 * panels, 3.4))
    ax = fig.add_subplot(1, panels, 1)
    ax.hist(sims, bins=20, color="#3182bd", edgecolor="white")
    ax.set_xlabel("cosine similarity of the pair")
    ax.set_ylabel("pairs")
    ax.set_title(f"Similarity (median {result.similarity['median']:.2f})", fontsize=9)
    ax = fig.add_subplot(1, panels, 2)
    ax.hist(ratios, bins=20, color="#e6550d", edgecolor="white")
    ax.axvline(1.0, color="#444444", linestyle="--", linewidth=1)
    tol = result.settings.get("length_tolerance")
    ax.set_xlabel("length ratio (answerable / unanswerable words)")
    ax.set_title(f"Length ratio (tolerance ±{tol:g})" if tol is not None else "Length ratio", fontsize=9)
    ax = fig.add_subplot(1, panels, 3)
    top = max([*u_words, *a_words, 1])
    bins = list(range(1, top + 2))
    ax.hist([u_words, a_words], bins=bins, label=["unanswerable", "answerable"], color=["#e6550d", "#3182bd"])
    ax.set_xlabel("question length (words)")
    ax.set_title("Question length per side", fontsize=9)
    ax.legend(fontsize=7)
    for a in fig.axes:
        a.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]  # a MaxNLocator
    if coords is not None:
        ax = fig.add_subplot(1, panels, 4)
        n = len(pairs)
        for i in range(n):
            ax.plot([coords[i, 0], coords[n + i, 0]], [coords[i, 1], coords[n + i, 1]], color="#bbbbbb", linewidth=0.5)
        ax.scatter(coords[:n, 0], coords[:n, 1], s=10, color="#e6550d", label="unanswerable")
        ax.scatter(coords[n:, 0], coords[n:, 1], s=10, color="#3182bd", label="answerable")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title("t-SNE of question embeddings (pairs joined)", fontsize=9)
        ax.legend(fontsize=7)
    per_cat = ", ".join(f"{c} {n}" for c, n in result.per_category.items())
    fig.suptitle(f"Pairing report: {len(pairs)} pairs ({per_cat})", fontsize=10, y=1.04)
    save_figure(fig, path)
    n = len(pairs)
    rows = [
        [
            p.unanswerable.id,
            p.answerable.id,
            p.category,
            round(p.similarity, 6),
            u,
            a,
            round(a / u, 4),
            *([round(float(v), 4) for v in (*coords[i], *coords[n + i])] if coords is not None else []),
        ]
        for i, (p, u, a) in enumerate(zip(pairs, u_words, a_words))
    ]
    header = [
        "unanswerable_id",
        "answerable_id",
        "category",
        "similarity",
        "unanswerable_words",
        "answerable_words",
        "length_ratio",
    ]
    if coords is not None:
        header += ["tsne_unanswerable_x", "tsne_unanswerable_y", "tsne_answerable_x", "tsne_answerable_y"]
    write_csv(path.with_suffix(".csv"), header, rows)
    return path


def tsne_coordinates(result: BuildResult) -> np.ndarray | None:
    """2-d t-SNE coordinates of the selected pairs' embeddings, unanswerable rows first (seeded by
    the build's seed); None with fewer than 5 pairs or without embeddings."""
    pairs = result.pairs
    if len(pairs) < 5 or any(p.vectors is None for p in pairs):
        return None
    from sklearn.manifold import TSNE  # imported here: scikit-learn is slow to import

    x = np.vstack([np.asarray([p.vectors[0] for p in pairs]), np.asarray([p.vectors[1] for p in pairs])])  # type: ignore[index]
    perplexity = float(min(30, max(2, (len(x) - 1) // 3)))
    seed = int(result.settings.get("seed") or 0)
    embedded: np.ndarray = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(x)
    return embedded
