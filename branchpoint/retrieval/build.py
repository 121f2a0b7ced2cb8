"""`branchpoint index build`: a corpus file -> a saved index directory, resumable.

Dense kinds encode passages in shards under `OUT/.partial/` (`emb-00000.npy` per
`shard_size` passages, with the corpus fingerprint and encoder in `state.json`), so an
interrupted build of a large corpus continues from the last complete shard. The finished index
is written to a temporary sibling and renamed over OUT (the shards go with the old OUT).
An OUT that already holds an index of another corpus, encoder, kind or build parameters is
refused; one that holds the same index is left as it is.

`like="flashrag"` builds what FlashRAG's index builder builds (flashrag/retriever/
index_builder.py, encoder.py, utils.py): the corpus read as its `load_corpus` reads it (a row's
`contents`, else its `text` alone), passages cut at its `--max_length` default of 180 tokens, its
`retrieval_method`'s prefixes, pooling and normalisation, and an exact inner-product index
(`faiss_type` "Flat", `METRIC_INNER_PRODUCT`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval.bm25 import BM25Index
from branchpoint.retrieval.corpus import chunk_passages, corpus_fingerprint, load_corpus
from branchpoint.retrieval.corpus_encoding import DEFAULT_SHARD_SIZE, encode_corpus, shard_state
from branchpoint.retrieval.encoder import DEFAULT_ENCODER, get_encoder
from branchpoint.retrieval.encoder_base import Encoder
from branchpoint.retrieval.encoder_fingerprint import fingerprint_of_encoder
from branchpoint.retrieval.gpu import check_gpu
from branchpoint.retrieval.index import DenseIndex
from branchpoint.retrieval.index_kinds import index_kind, resolve_params
from branchpoint.retrieval.manifest import MANIFEST_FILE, BuildSettings, IndexManifest, read_manifest

PARTIAL_DIR = ".partial"

#: Presets of `like`: the settings another tool's index builder uses.
BUILD_PRESETS = ("flashrag",)
#: FlashRAG's index builder: `--max_length` default (index_builder.py `main`, `default=180`).
FLASHRAG_MAX_LENGTH = 180


@dataclass(frozen=True)
class BuildReport:
    """What `build_index` did: the directory, the index, and how much it encoded this time."""

    out: Path
    manifest: IndexManifest
    encoded: int  # passages encoded by this call
    reused: int  # passages whose vectors came from shards of an interrupted build
    already_built: bool  # OUT already held this very index: nothing was done
    seconds: float


def _same_index(
    old: IndexManifest,
    kind: str,
    fingerprint: str,
    enc: Encoder | None,
    params: Mapping[str, Any],
    build: BuildSettings | None,
) -> str | None:
    """None if `old` is the index asked for, else what differs (for the refusal message)."""
    encoder_name = enc.name if enc is not None else None
    if old.kind != kind:
        return f"kind {old.kind} (asked: {kind})"
    if old.corpus_fingerprint != fingerprint:
        return f"corpus fingerprint {old.corpus_fingerprint[:16]}… (asked: {fingerprint[:16]}…)"
    if old.encoder != encoder_name:
        return f"encoder {old.encoder} (asked: {encoder_name})"
    if old.build != build:
        return f"build settings {_describe_build(old.build)} (asked: {_describe_build(build)})"
    given = fingerprint_of_encoder(enc) if enc is not None else None
    if old.encoder_fingerprint is not None and given is not None and old.encoder_fingerprint != given:
        return f"encoder {old.encoder_fingerprint.describe()} (asked: {given.describe()})"
    searchable = index_kind(kind).search_params
    for name, value in params.items():
        if name not in searchable and old.params.get(name) != value:
            return f"{name}={old.params.get(name)!r} (asked: {value!r})"
    return None


def _describe_build(build: BuildSettings | None) -> str:
    if build is None:
        return "none (defaults)"
    return ", ".join(f"{k}={v}" for k, v in build.model_dump(exclude_none=True).items())


def build_settings(
    corpus: Path,
    *,
    like: str | None,
    kind: str,
    fmt: str,
    max_length: int | None,
    retrieval_method: str | None,
) -> BuildSettings | None:
    """The build settings asked for, a preset's filled in (None when nothing was set).

    `like="flashrag"`: corpus format `flashrag` (FlashRAG's `contents`), max_length 180 unless
    given; a dense kind; a JSON lines corpus (FlashRAG's `load_corpus` reads `.jsonl`).
    """
    if like is None:
        if max_length is None and retrieval_method is None:
            return None
        return BuildSettings(corpus_format=fmt, max_length=max_length, retrieval_method=retrieval_method)
    if like not in BUILD_PRESETS:
        raise InputError(f"--like {like!r}: unknown preset (expected one of: {', '.join(BUILD_PRESETS)})")
    if kind == "bm25":
        raise InputError(
            "--like flashrag: a preset of dense builds (FlashRAG's encoder and faiss index); not kind bm25"
        )
    if fmt == "auto" and corpus.suffix != ".jsonl":
        raise InputError(
            f"{corpus}: --like flashrag reads the corpus as FlashRAG's load_corpus does, from JSON lines "
            '(*.jsonl rows {"id", "contents"} or {"id", "title", "text"}); convert it, or pass --format flashrag'
        )
    if fmt not in ("auto", "flashrag", "flashrag-jsonl"):
        raise InputError(f"--like flashrag: reads FlashRAG jsonl (--format flashrag), not --format {fmt}")
    return BuildSettings(
        like=like,
        corpus_format="flashrag",
        max_length=max_length if max_length is not None else FLASHRAG_MAX_LENGTH,
        retrieval_method=retrieval_method,
    )


def _build_encoder(encoder: str, build: BuildSettings | None) -> Encoder:
    """The encoder of a build: `encoder` with the build's max_length and retrieval_method."""
    if build is None:
        return get_encoder(encoder)
    try:
        return get_encoder(encoder, max_length=build.max_length, retrieval_method=build.retrieval_method)
    except InputError as exc:
        if build.like and "max_length" in str(exc):
            raise InputError(
                f"--like {build.like}: passages are cut at max_length {build.max_length} tokens as FlashRAG "
                f"cuts them, but {exc}; use minilm-onnx or st:MODEL"
            ) from None
        raise


def build_index(
    corpus: str | Path,
    out: str | Path,
    *,
    kind: str = "flat",
    encoder: str | Encoder = DEFAULT_ENCODER,
    fmt: str = "auto",
    like: str | None = None,
    max_length: int | None = None,
    retrieval_method: str | None = None,
    chunk_words: int | None = None,
    batch_size: int = 64,
    params: Mapping[str, Any] | None = None,
    device: str = "cpu",
    shard_size: int = DEFAULT_SHARD_SIZE,
    overwrite: bool = False,
    progress: bool = False,
) -> BuildReport:
    """Build (or resume building) the `kind` index of a corpus into the directory `out`.

    `like` ("flashrag") builds as that tool's index builder does; `max_length` (tokens of a
    passage) and `retrieval_method` (FlashRAG's name: its prefixes, pooling, normalisation) set
    those one by one. Each is recorded in the manifest (`build`) with the encoder's fingerprint.
    """
    started = time.perf_counter()
    index_kind(kind)  # an unknown kind: the error lists the registered ones
    if device not in ("cpu", "gpu"):
        raise InputError(f"unknown device {device!r} (expected cpu or gpu)")
    if device == "gpu":
        if kind == "bm25":
            raise InputError("device gpu: a bm25 index runs on the CPU; use device cpu")
        check_gpu(kind)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a directory (expected the index directory to write)")
    build = build_settings(
        Path(corpus), like=like, kind=kind, fmt=fmt, max_length=max_length, retrieval_method=retrieval_method
    )
    if build is not None and kind == "bm25":
        raise InputError("max_length and retrieval_method are encoder settings; kind bm25 has no encoder")
    passages = load_corpus(corpus, build.corpus_format if build is not None else fmt)
    if chunk_words is not None:
        passages = chunk_passages(passages, chunk_words)
    fingerprint = corpus_fingerprint(passages)
    resolved = resolve_params(kind, params, len(passages))
    enc: Encoder | None = None
    if kind != "bm25":
        if isinstance(encoder, str):
            enc = _build_encoder(encoder, build)
        elif build is not None:
            raise InputError("give the encoder by name to build with max_length, retrieval_method or like")
        else:
            enc = encoder

    if (out / MANIFEST_FILE).is_file():
        old = read_manifest(out)
        differs = _same_index(old, kind, fingerprint, enc, resolved, build)
        if differs is None:
            if kind != "bm25" and any(old.params.get(k) != resolved[k] for k in index_kind(kind).search_params):
                assert enc is not None  # only the search parameters change: no re-encoding
                updated = DenseIndex.load(out, enc, fingerprint, kind=kind, params=resolved)
                updated.save(out)
                old = updated.manifest
            return BuildReport(out, old, 0, 0, True, time.perf_counter() - started)
        if not overwrite:
            raise StaleIndexError(
                f"{out}: holds another index ({differs}); choose another --out, or pass --overwrite to replace it"
            )

    if kind == "bm25":
        built = BM25Index.build(passages, params, progress=progress)
        built.save(out)
        return BuildReport(out, built.manifest, 0, 0, False, time.perf_counter() - started)

    assert enc is not None
    partial = out / PARTIAL_DIR
    reused = _complete_rows(partial, len(passages), shard_size, fingerprint, enc)
    vectors = encode_corpus(
        passages, enc, batch_size, shard_dir=partial, shard_size=shard_size, fingerprint=fingerprint, progress=progress
    )
    if progress:
        from rich.console import Console

        Console(stderr=True).print(f"indexing {len(passages)} vectors ({kind})…", highlight=False)
    dense = DenseIndex.from_vectors(
        passages, vectors, enc, kind=kind, params=params, device=device, fingerprint=fingerprint, build=build
    )
    dense.save(out)
    return BuildReport(out, dense.manifest, len(passages) - reused, reused, False, time.perf_counter() - started)


def _complete_rows(partial: Path, n: int, shard_size: int, fingerprint: str, enc: Encoder) -> int:
    """Passages that complete shards in `partial` already cover (0 if they are of another build)."""
    state_file = partial / "state.json"
    if not state_file.is_file():
        return 0
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    if state != shard_state(fingerprint, enc, n, shard_size):
        return 0
    rows = 0
    for i, start in enumerate(range(0, n, shard_size)):
        if (partial / f"emb-{i:05d}.npy").is_file():
            rows += min(start + shard_size, n) - start
    return rows


def load_index(
    directory: str | Path,
    encoder: Encoder | None = None,
    *,
    expected_fingerprint: str | None = None,
    kind: str | None = None,
    params: Mapping[str, Any] | None = None,
    device: str = "cpu",
) -> DenseIndex | BM25Index:
    """Load any saved index directory; a dense one with `encoder`, else the one its manifest names."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest.kind == "bm25":
        if kind not in (None, "bm25"):
            raise StaleIndexError(f"{directory / MANIFEST_FILE}: a bm25 index, but kind {kind} was asked for")
        return BM25Index.load(directory, expected_fingerprint, params=params)
    if encoder is None:
        assert manifest.encoder is not None
        encoder = get_encoder(manifest.encoder) if device == "cpu" else get_encoder(manifest.encoder, device=device)
    return DenseIndex.load(directory, encoder, expected_fingerprint, kind=kind, params=params, device=device)
