"""The builder's pairing report as a figure: how alike the two halves of a benchmark are.

Three panels over the selected pairs (the over-searching study's Figure 3 checks the same
thing): the cosine similarity of each pair, the length ratio (answerable words / unanswerable
words), and the question lengths of both sides. Written as PNG and SVG, with the pairs behind it
as CSV beside them.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from branchpoint.evaluation.figures import _save, write_csv
from branchpoint.experiments.builder import BuildResult, word_count


def write_pairing_figure(result: BuildResult, path: str | Path) -> Path:
    """Draw the pairing report of `result` at `path` (PNG; SVG and CSV beside it)."""
    path = Path(path)
    pairs = result.pairs
    sims = [p.similarity for p in pairs]
    u_words = [word_count(p.unanswerable.question) for p in pairs]
    a_words = [word_count(p.answerable.question) for p in pairs]
    ratios = [a / u for a, u in zip(a_words, u_words)]
    fig = Figure(figsize=(12.0, 3.4))
    ax = fig.add_subplot(1, 3, 1)
    ax.hist(sims, bins=20, color="#3182bd", edgecolor="white")
    ax.set_xlabel("cosine similarity of the pair")
    ax.set_ylabel("pairs")
    ax.set_title(f"Similarity (median {result.similarity['median']:.2f})", fontsize=9)
    ax = fig.add_subplot(1, 3, 2)
    ax.hist(ratios, bins=20, color="#e6550d", edgecolor="white")
    ax.axvline(1.0, color="#444444", linestyle="--", linewidth=1)
    tol = result.settings.get("length_tolerance")
    ax.set_xlabel("length ratio (answerable / unanswerable words)")
    ax.set_title(f"Length ratio (tolerance ±{tol:g})" if tol is not None else "Length ratio", fontsize=9)
    ax = fig.add_subplot(1, 3, 3)
    top = max([*u_words, *a_words, 1])
    bins = list(range(1, top + 2))
    ax.hist([u_words, a_words], bins=bins, label=["unanswerable", "answerable"], color=["#e6550d", "#3182bd"])
    ax.set_xlabel("question length (words)")
    ax.set_title("Question length per side", fontsize=9)
    ax.legend(fontsize=7)
    for a in fig.axes:
        a.yaxis.get_major_locator().set_params(integer=True)
    per_cat = ", ".join(f"{c} {n}" for c, n in result.per_category.items())
    fig.suptitle(f"Pairing report: {len(pairs)} pairs ({per_cat})", fontsize=10, y=1.04)
    _save(fig, path)
    rows = [[p.unanswerable.id, p.answerable.id, p.category, round(p.similarity, 6), u, a, round(a / u, 4)]
            for p, u, a in zip(pairs, u_words, a_words)]  # fmt: skip
    write_csv(path.with_suffix(".csv"), ["unanswerable_id", "answerable_id", "category", "similarity",
                                         "unanswerable_words", "answerable_words", "length_ratio"], rows)  # fmt: skip
    return path
