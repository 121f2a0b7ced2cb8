"""`branchpoint augment`: synthetic negative evidence added to a corpus, with a rank report."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from branchpoint.cli.common import app, console, friendly_errors
from branchpoint.errors import BranchpointError


@app.command()
@friendly_errors
def augment(
    questions: str = typer.Option(..., "--questions", help="Question file (any known format), or demo."),
    corpus: str = typer.Option(..., "--corpus", help="Corpus file (FlashRAG jsonl or a JSON corpus format), or demo."),
    out: Path = typer.Option(..., "--out", help="Output folder: corpus.jsonl, generated.jsonl, rank_report.json."),
    n: int = typer.Option(
        10, "--n", min=1, max=10, help="Documents per question, one per angle (at most the 10 angles)."
    ),
    all_questions: bool = typer.Option(False, "--all", help="Every question, not only the unanswerable ones."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N selected questions."),
    model_spec: Path | None = typer.Option(
        None,
        "--model-spec",
        help="YAML with the model fields (provider, name, base_url, style ...), or an experiment spec.",
    ),
    provider: str | None = typer.Option(None, "--provider", help="embedded (default), openai or scripted."),
    model: str | None = typer.Option(None, "--model", help="Model name sent to the server."),
    base_url: str | None = typer.Option(
        None, "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."
    ),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Environment variable holding the API key."),
    style: str | None = typer.Option(None, "--style", help="chat (instruct models) or completion (base models)."),
    max_tokens: int = typer.Option(256, "--max-tokens", min=16, help="Token limit of one generated document."),
    concurrency: int = typer.Option(1, "--concurrency", min=1, help="Model calls at once."),
    report_k: int = typer.Option(
        3, "--report-k", min=0, help="Rank report over the top-k (0: no report, no index build)."
    ),
    encoder: str = typer.Option("minilm-onnx", "--encoder", help="Encoder of the index the rank report builds."),
    no_fact_check: bool = typer.Option(
        False,
        "--no-fact-check",
        help="Skip the model call that checks each document against its question's gold answers or note "
        "(documents contradicting them are dropped).",
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Add synthetic negative evidence to a corpus: for each unanswerable question, N ~100-word
    documents explaining why the answer is unavailable, one per angle; prints a rank report.

    Writes OUT/corpus.jsonl (the corpus plus the documents, ids neg-<question id>-<angle>), usable
    as a source in a spec (`retrieval: {sources: {augmented: {corpus: OUT/corpus.jsonl}}}`), and
    OUT/generated.jsonl; rerunning into the same OUT generates only what is missing.

    Example: branchpoint augment --questions demo --corpus demo --out corpora/demo-neg
    --provider openai --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 --style chat
    """
    from branchpoint.datasets import load_questions
    from branchpoint.datasets.questions import demo_corpus_path
    from branchpoint.errors import ModelServerError
    from branchpoint.models import TransportError, open_model
    from branchpoint.models.spec import load_model_spec
    from branchpoint.retrieval import load_corpus
    from branchpoint.retrieval.negative_evidence.corpus import augment as run_augment
    from branchpoint.retrieval.negative_evidence.documents import ANGLES
    from branchpoint.retrieval.negative_evidence.generate import select_questions
    from branchpoint.retrieval.negative_evidence.rank_report import (
        REPORT_FILE,
        write_rank_report,
    )

    spec = load_model_spec(
        model_spec,
        {"provider": provider, "name": model, "base_url": base_url, "api_key_env": api_key_env, "style": style},
    )
    selected = select_questions(load_questions(questions), all_questions=all_questions, limit=limit)
    passages = load_corpus(demo_corpus_path() if corpus == "demo" else corpus)
    kind = "questions" if all_questions else "unanswerable questions"
    console.print(
        f"{len(selected)} {kind} × {n} angles ({', '.join(a.name for a in ANGLES[:n])}); "
        f"model {spec.name} ({spec.provider}, {spec.style})",
        soft_wrap=True,
    )
    try:
        with open_model(spec, log_dir=out) as client:
            result = run_augment(
                client,
                selected,
                passages,
                out,
                n=n,
                style=spec.style,
                max_tokens=max_tokens,
                concurrency=concurrency,
                progress=not no_progress,
                fact_check=not no_fact_check,
            )
    except TransportError as exc:
        raise ModelServerError(
            f"model calls failed ({exc}); documents generated so far are kept in {out / 'generated.jsonl'}, "
            "rerun the same command to continue (a slow server may need a larger timeout_s in --model-spec)"
        ) from None
    st = result.stats
    console.print(
        f"{st.generated} generated, {st.reused} reused from an earlier run, {st.skipped} skipped as malformed "
        f"after a retry ({st.retried} retried); {st.model_calls} model calls, {st.input_tokens} input / "
        f"{st.output_tokens} output tokens",
        soft_wrap=True,
    )
    checked = f"{st.fact_checked} checked against their question's known facts"
    if st.fact_check_unclear:
        checked += f" ({st.fact_check_unclear} unclear verdicts, kept)"
    dropped = [f"{len(ids)} {why} ({', '.join(ids)})" for why, ids in st.dropped.items()]
    console.print(f"{checked}; dropped: {'; '.join(dropped) if dropped else 'none'}", soft_wrap=True)
    console.print(
        f"wrote {result.corpus_path} ({result.corpus_passages} + {len(result.docs)} passages) and "
        f"{result.generated_path}",
        soft_wrap=True,
    )
    console.print(
        f"as a source in a spec: retrieval: {{sources: {{augmented: {{corpus: {result.corpus_path}}}}}}}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    if report_k == 0 or not result.docs:
        return
    from rich.table import Table

    from branchpoint.retrieval import open_dense_source

    try:
        source = open_dense_source("augmented", result.corpus_path, encoder_name=encoder, progress=not no_progress)
    except BranchpointError as exc:
        console.print(f"[yellow]no rank report:[/] cannot build the index ({escape(str(exc))})", soft_wrap=True)
        return
    report = write_rank_report(source, selected, result, out, k=report_k)
    table = Table(
        "questions",
        f"with one in top-{report_k}",
        "own docs in top-k / question",
        "share of top-k slots",
        "other questions' docs in top-k",
        title="Generated documents in the top-k",
    )
    table.add_row(
        str(report.questions),
        f"{report.hit_questions} ({100 * report.hit_rate:.1f}%)",
        f"{report.mean_own_in_topk:.2f}",
        f"{100 * report.share_of_topk:.1f}%",
        str(report.other_in_topk),
    )
    console.print(table)
    ranks = Table("rank", "own generated docs", "questions with their best own doc here", title="Rank distribution")
    for r in range(1, report_k + 1):
        ranks.add_row(str(r), str(report.rank_counts[r]), str(report.best_rank_counts[str(r)]))
    ranks.add_row(f"> {report_k}", str(report.generated - report.own_in_topk), str(report.best_rank_counts["miss"]))
    console.print(ranks)
    console.print(f"wrote {out / REPORT_FILE}")
