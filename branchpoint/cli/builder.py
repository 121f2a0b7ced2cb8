"""`branchpoint builder`: build a balanced benchmark of matched question pairs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from branchpoint.cli.common import app, console, friendly_errors


@app.command()
@friendly_errors
def builder(
    unanswerable: list[str] = typer.Option(
        ...,
        "--unanswerable",
        help="Question file with unanswerable questions, FILE or FILE:CATEGORY (AU, FP, UC: "
        "replaces the file's own category, for sets without subtypes such as SelfAware); repeatable.",
    ),
    answerable: Path = typer.Option(..., "--answerable", help="Question file with the answerable candidates."),
    out: Path = typer.Option(..., "--out", help="Benchmark to write (branchpoint jsonl)."),
    format_unanswerable: str = typer.Option("auto", "--format-unanswerable", help="Format of --unanswerable."),
    format_answerable: str = typer.Option("auto", "--format-answerable", help="Format of --answerable."),
    k: int = typer.Option(30, "--k", min=1, help="Most similar answerable candidates per unanswerable question."),
    length_tolerance: float = typer.Option(
        0.5, "--length-tolerance", min=0.0, help="A candidate's length in words within ±this fraction."
    ),
    per_category: int | None = typer.Option(
        None, "--per-category", min=1, help="At most this many pairs per category (default: the smallest)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the per-category draw."),
    encoder: str = typer.Option("minilm-onnx", "--encoder", help="Sentence encoder for the similarity."),
    pairs: Path | None = typer.Option(None, "--pairs", help="Also write the matched pairs (jsonl)."),
    min_similarity: float | None = typer.Option(
        None, "--min-similarity", min=-1.0, max=1.0, help="Drop candidate pairs less similar than this (cosine)."
    ),
    near_duplicate: float = typer.Option(
        0.98,
        "--near-duplicate",
        min=-1.0,
        max=1.0,
        help="Drop candidate pairs at least this similar, or with the same text: the same question on both sides.",
    ),
    split: str | None = typer.Option(None, "--split", help="FreshQA files: keep one split (TEST or DEV)."),
    figure: Path | None = typer.Option(
        None, "--figure", help="Pairing report figure (PNG; SVG and CSV beside it). Default: OUT with .pairing.png."
    ),
) -> None:
    """Build a balanced benchmark: each unanswerable question matched to a similar answerable one.

    Both files may be in any question format (auto-detected); only the unanswerable questions of
    --unanswerable and the answerable ones of --answerable are used.

    Example: branchpoint builder --unanswerable data/unanswerable/coconot_eval.jsonl
    --answerable data/answerable/nq_open_dev.jsonl --per-category 30 --out bench.jsonl

    Example: branchpoint builder --unanswerable SelfAware.json:AU --unanswerable FalseQA/test.csv
    --unanswerable freshqa.csv --split TEST --answerable nq_open_dev.jsonl --min-similarity 0.5 --out bench.jsonl
    """
    from rich.table import Table

    from branchpoint.datasets.builder import build_benchmark_from_files, write_benchmark
    from branchpoint.datasets.pairing_figure import write_pairing_figure

    result = build_benchmark_from_files(
        list(unanswerable),
        answerable,
        unanswerable_format=format_unanswerable,
        answerable_format=format_answerable,
        encoder=encoder,
        k=k,
        length_tolerance=length_tolerance,
        per_category=per_category,
        seed=seed,
        min_similarity=min_similarity,
        near_duplicate=near_duplicate,
        split=split,
    )
    write_benchmark(out, result, pairs)
    figure_path = write_pairing_figure(result, figure or out.with_suffix(".pairing.png"))
    c = result.counts
    console.print(
        f"{c['unanswerable']} unanswerable, {c['answerable']} answerable candidates: {c['matched']} matched "
        f"({c['no_candidate']} without a candidate of similar length, {c['taken']} outbid by closer pairs; "
        f"{c['near_duplicate_pairs']} near-duplicate and {c['below_min_similarity_pairs']} too dissimilar "
        f"candidate pairs dropped), {c['selected']} pairs selected",
        soft_wrap=True,
    )
    table = Table("category", "pairs", title="Per category")
    for cat, n in result.per_category.items():
        table.add_row(cat, str(n))
    console.print(table)
    table = Table("side", "mean words", "median words", title="Question length")
    for side, stats in result.lengths.items():
        table.add_row(side, f"{stats['mean']:.1f}", f"{stats['median']:.1f}")
    console.print(table)
    sim = result.similarity
    table = Table("mean", "median", "p10", "p90", title="Similarity of matched pairs (cosine)")
    table.add_row(*(f"{sim[key]:.3f}" for key in ("mean", "median", "p10", "p90")))
    console.print(table)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    console.print(f"wrote {len(result.questions)} questions to {out}" + (f" and pairs to {pairs}" if pairs else ""))
    console.print(f"wrote the pairing report {figure_path} (and .svg, .csv)", soft_wrap=True)
