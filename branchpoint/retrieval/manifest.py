"""A saved index directory: its manifest, file names and atomic writing.

On disk (a directory): `index.faiss` (faiss.write_index; dense kinds), `passages.jsonl`
(FlashRAG `{"id", "contents"}`, row i = FAISS id i) and `manifest.json` (IndexManifest: kind,
encoder, dimension, corpus fingerprint, build and search parameters). A saved index is only
reused with the encoder, corpus and kind it was built from (`check_manifest`). Dense and BM25
indexes share the manifest and the passages file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

import branchpoint
from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.encoder_base import Encoder
from branchpoint.retrieval.encoder_fingerprint import EncoderFingerprint, fingerprint_of_encoder
from branchpoint.retrieval.index_kinds import (
    Params,
    default_factory,
    dense_kind_names,
    index_kind,
    resolve_params,
)
from branchpoint.traces import describe_validation_error

INDEX_FILE = "index.faiss"
PASSAGES_FILE = "passages.jsonl"
MANIFEST_FILE = "manifest.json"


class BuildSettings(BaseModel):
    """How `index build` read and encoded the corpus, where it was told to (recorded in the
    manifest and the retrieval-cache key; absent for a build with every default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The preset the build followed (`flashrag`: as FlashRAG's index builder builds), if any.
    like: str | None = None
    #: The corpus format the passages were read with (`flashrag`: FlashRAG's `contents`).
    corpus_format: str = "auto"
    #: Tokens of each passage encoded (None: the encoder's own length).
    max_length: int | None = None
    #: FlashRAG's `retrieval_method` name whose prefixes, pooling and normalisation were used.
    retrieval_method: str | None = None


class IndexManifest(BaseModel):
    """What an index was built from and how; checked before a saved index is reused."""

    #: A registered index kind (`index_kinds`: flat, hnsw, ivf, pq, bm25, or a plug-in's).
    kind: str = "flat"
    encoder: str | None = None
    dim: int | None = None
    n_passages: int
    corpus_fingerprint: str
    params: Params = {}
    #: The faiss index factory string, exactly (`IVF4096,PQ64x8`, `HNSW32`, `Flat`): IVF-PQ and
    #: IVF-Flat are both kind ivf, so the kind alone does not say what the results are.
    factory: str | None = None
    #: For an index file served as it is (FlashRAG): sha256 of its size and first and last MiB,
    #: so a swapped file never matches another file's cached results.
    index_digest: str | None = None
    #: What made the vectors (model, weights digest, pooling, normalisation, prefixes, max_length);
    #: a saved index is opened only with an encoder of the same vector space.
    encoder_fingerprint: EncoderFingerprint | None = None
    build: BuildSettings | None = None
    created_at: str
    branchpoint_version: str

    @model_validator(mode="after")
    def _dense_needs_encoder(self) -> IndexManifest:
        try:
            index_kind(self.kind)
        except InputError as exc:  # an unknown kind: the error lists the known ones
            raise ValueError(str(exc)) from None
        if self.kind in dense_kind_names() and (not self.encoder or not self.dim):
            raise ValueError(f"a {self.kind} index needs its encoder and dim")
        return self

    def cache_params(self) -> str:
        """What, besides query and k, decides this index's results (the retrieval cache key part).

        Same form as `cache.source_params` for an exact index, plus the parameters otherwise;
        the factory string when it says more than kind and parameters (IVF-PQ, OPQ, SQ), and
        the digest of an index file served as it is.
        """
        factory = None if self.factory == default_factory(self.kind, self.params) else self.factory
        parts = {
            "kind": self.kind,
            "corpus": self.corpus_fingerprint,
            "encoder": self.encoder,
            "dim": self.dim,
            "factory": factory,
            "index": self.index_digest,
        }
        text = ";".join(f"{k}={v}" for k, v in parts.items() if v is not None)
        if self.params:
            text += ";params=" + json.dumps(self.params, sort_keys=True)
        if self.build is not None:
            text += ";build=" + self.build.model_dump_json()
        return text


def file_digest(path: Path, window: int = 1 << 20) -> str:
    """sha256 of a file's size and its first and last `window` bytes: cheap on a 60 GB index, and
    different for any two index files that differ in size, training or head/tail contents."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as fh:
        digest.update(fh.read(window))
        if size > window:
            fh.seek(max(window, size - window))
            digest.update(fh.read(window))
    return digest.hexdigest()


def new_manifest(
    kind: str,
    n_passages: int,
    fingerprint: str,
    params: Params,
    encoder: Encoder | None = None,
    factory: str | None = None,
    build: BuildSettings | None = None,
) -> IndexManifest:
    """A manifest stamped with the time and branchpoint's version (and the encoder's fingerprint)."""
    return IndexManifest(
        kind=kind,
        factory=factory,
        encoder=encoder.name if encoder is not None else None,
        encoder_fingerprint=fingerprint_of_encoder(encoder) if encoder is not None else None,
        build=build,
        dim=encoder.dim if encoder is not None else None,
        n_passages=n_passages,
        corpus_fingerprint=fingerprint,
        params=params,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        branchpoint_version=branchpoint.__version__,
    )


def write_dir_atomically(directory: str | Path, fill: Callable[[Path], None]) -> Path:
    """Call `fill(tmp)` on a temporary sibling directory, then rename it over `directory`.

    An interruption leaves `directory` as it was (absent or the previous index).
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        fill(tmp)
        old = None
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(directory, old)
        os.rename(tmp, directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return directory


def write_passages(path: Path, passages: Sequence[Passage]) -> None:
    """FlashRAG jsonl `{"id", "contents"}`, one passage a line, in index order."""
    with path.open("w", encoding="utf-8") as fh:
        for p in passages:
            fh.write(json.dumps({"id": p.doc_id, "contents": p.contents}, ensure_ascii=False) + "\n")


def write_manifest(path: Path, manifest: IndexManifest) -> None:
    """Write `manifest.json` (indented JSON)."""
    path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")


def with_search_params(manifest: IndexManifest, params: Mapping[str, Any] | None) -> IndexManifest:
    """The manifest with the search-time parameters of `params` (efSearch, nprobe) put in."""
    searchable = index_kind(manifest.kind).search_params
    update = {k: v for k, v in (params or {}).items() if k in searchable}
    if not update:
        return manifest
    merged = resolve_params(manifest.kind, {**manifest.params, **update})
    if manifest.kind == "ivf":
        merged["nprobe"] = min(int(merged["nprobe"]), int(merged["nlist"]))
    return manifest.model_copy(update={"params": merged})


def check_manifest(
    manifest: IndexManifest,
    where: str | Path,
    *,
    kind: str | None = None,
    expected_fingerprint: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> None:
    """StaleIndexError if the saved index is of another kind, corpus, or build parameters."""
    if kind is not None and manifest.kind != kind:
        raise StaleIndexError(
            f"{where}: a {manifest.kind} index, but kind {kind} was asked for; rebuild the index "
            "with that kind or ask for the saved one"
        )
    if expected_fingerprint is not None and manifest.corpus_fingerprint != expected_fingerprint:
        raise StaleIndexError(
            f"{where}: corpus_fingerprint {manifest.corpus_fingerprint} differs from the "
            f"expected {expected_fingerprint}; the corpus changed since the index was built, "
            "rebuild the index"
        )
    if params:
        searchable = index_kind(manifest.kind).search_params
        wanted = resolve_params(manifest.kind, params, manifest.n_passages)
        for name in params:
            if name in searchable:
                continue
            if manifest.params.get(name) != wanted[name]:
                raise StaleIndexError(
                    f"{where}: built with {name}={manifest.params.get(name)!r} but "
                    f"{name}={wanted[name]!r} was asked for; rebuild the index"
                )


def check_encoder(manifest: IndexManifest, encoder: Encoder, where: str | Path) -> None:
    """StaleIndexError (one line naming both fingerprints) unless `encoder` makes the vectors of
    the index: same model, weights, pooling, normalisation and prefixes by the fingerprints, or,
    where either has none (an index of an older version, a plug-in encoder), the same name; and
    the same dimension."""
    recorded = manifest.encoder_fingerprint
    given = fingerprint_of_encoder(encoder)
    if recorded is not None and given is not None:
        differs = recorded.vector_space_differs(given)
        if differs or manifest.dim != encoder.dim:
            what = ", ".join(differs) if differs else f"dim {manifest.dim} vs {encoder.dim}"
            raise StaleIndexError(
                f"{where}: index encoder {recorded.describe()} differs from the given encoder "
                f"{given.describe()} in {what}; give the encoder the index was built with, or rebuild the index"
            )
        return
    if manifest.encoder != encoder.name or manifest.dim != encoder.dim:
        raise StaleIndexError(
            f'{where}: index was built with encoder "{manifest.encoder}" (dim {manifest.dim}) '
            f'but encoder "{encoder.name}" (dim {encoder.dim}) was given; rebuild the index'
        )


def read_manifest(directory: str | Path) -> IndexManifest:
    """Read and validate `manifest.json` of a saved index; errors name the file and field."""
    where = Path(directory) / MANIFEST_FILE
    if not where.is_file():
        raise InputError(f"{where}: file not found (expected a saved index directory)")
    try:
        return IndexManifest.model_validate_json(where.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise InputError(f"{where}: {describe_validation_error(exc)}") from None
