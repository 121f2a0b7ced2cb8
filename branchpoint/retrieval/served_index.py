"""What `branchpoint retrieval serve` serves, loaded and checked: a saved index directory (dense,
with the encoder its manifest names, or bm25), or a FlashRAG / Search-R1 faiss index file with
its corpus jsonl as they are (row i of the index is line i of the corpus; nothing re-encoded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.registry import REGISTRY
from branchpoint.retrieval.encoder import get_encoder, is_encoder_name, resolve_encoder_name
from branchpoint.retrieval.encoder_base import Encoder
from branchpoint.retrieval.encoder_settings import EncoderSettings
from branchpoint.retrieval.index import DenseIndex
from branchpoint.retrieval.manifest import read_manifest


def load_index_dir(directory: str | Path, encoder: Encoder | None = None) -> Any:
    """Load a saved index directory (dense: with the encoder its manifest names; or bm25)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(
            f"{directory}: index directory not found (expected index.faiss, passages.jsonl and manifest.json)"
        )
    manifest = read_manifest(directory)
    if manifest.kind == "bm25":
        from branchpoint.retrieval.bm25 import BM25Index

        return BM25Index.load(directory)
    if encoder is not None:
        return DenseIndex.load(directory, encoder)
    assert manifest.encoder is not None  # IndexManifest requires it of a dense index
    if not is_encoder_name(manifest.encoder):
        raise InputError(
            f"{directory / 'manifest.json'}: index was built with encoder "
            f"{manifest.encoder!r}, which this installation does not know "
            f"(known: {', '.join(REGISTRY.names('encoder'))})"
        )
    return DenseIndex.load(directory, get_encoder(manifest.encoder))


def load_served_index(
    index: str | Path,
    *,
    corpus: str | Path | None = None,
    encoder: Encoder | None = None,
    fmt: str = "auto",
    params: dict[str, Any] | None = None,
    device: str = "cpu",
) -> Any:
    """What `retrieval serve` serves: an index directory, or a FlashRAG faiss file with its corpus.

    A FlashRAG / Search-R1 file (`e5_Flat.index`) is served as it is, row i = corpus line i,
    after checking that the file holds one vector per corpus row of the encoder's dimension.
    """
    path = Path(index)
    if path.is_dir():
        if corpus is not None:
            raise InputError(
                f"--corpus: {path} is an index directory, which holds its own passages "
                "(--corpus is for a FlashRAG index file)"
            )
        return load_index_dir(path, encoder)
    if not path.exists():
        raise InputError(
            f"{path}: index not found (expected a directory that `branchpoint index "
            "build` wrote, or a FlashRAG faiss index file with --corpus)"
        )
    if corpus is None:
        raise InputError(
            f"{path}: a FlashRAG index file needs the corpus jsonl it was built from (--corpus wiki-18.jsonl)"
        )
    if encoder is None:
        raise InputError(
            f"{path}: a FlashRAG index file does not say which encoder made it; give "
            "--encoder (e.g. --encoder st:intfloat/e5-base-v2 --retrieval-method e5)"
        )
    return DenseIndex.load_flashrag(path, corpus, encoder, fmt=fmt, params=params, device=device)


def open_served_index(
    index: str | Path,
    *,
    corpus: str | Path | None = None,
    encoder: str | None = None,
    retrieval_method: str | None = None,
    settings: EncoderSettings | None = None,
    fmt: str = "auto",
    params: dict[str, Any] | None = None,
    device: str = "cpu",
) -> Any:
    """`load_served_index` with the encoder given by name: `encoder` resolved with a FlashRAG
    `retrieval_method` and encoder `settings` (prefixes, pooling, normalisation), loaded on `device`.

    A method or non-default settings without an encoder name is an InputError: an index
    directory's manifest names its own encoder.
    """
    settings = settings or EncoderSettings()
    enc = None
    if encoder is not None:
        name = resolve_encoder_name(encoder, retrieval_method, settings)
        enc = get_encoder(name) if device == "cpu" else get_encoder(name, device=device)
    elif retrieval_method or not settings.is_default():
        raise InputError("--retrieval-method and the encoder settings need --encoder")
    return load_served_index(index, corpus=corpus, encoder=enc, fmt=fmt, params=params, device=device)
