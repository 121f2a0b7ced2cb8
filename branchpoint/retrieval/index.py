"""Dense index: exact inner-product FAISS search over encoded passages, saved with a manifest.

On disk (a directory): `index.faiss` (faiss.write_index), `passages.jsonl` (FlashRAG
`{"id", "contents"}`, row i = FAISS id i) and `manifest.json` (IndexManifest). A saved index is
only reused with the encoder and corpus it was built from.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ValidationError

import branchpoint
from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval._deps import require
from branchpoint.retrieval.corpus import Passage, corpus_fingerprint, load_corpus
from branchpoint.retrieval.encoder import Encoder
from branchpoint.traces import describe_validation_error

INDEX_FILE = "index.faiss"
PASSAGES_FILE = "passages.jsonl"
MANIFEST_FILE = "manifest.json"


def _faiss() -> Any:
    """The faiss module, or one line saying what to install."""
    return require("faiss", "faiss-cpu", "the dense index")


class IndexManifest(BaseModel):
    """What an index was built from; checked before a saved index is reused."""

    kind: Literal["flat"] = "flat"
    encoder: str
    dim: int
    n_passages: int
    corpus_fingerprint: str
    created_at: str
    branchpoint_version: str


class DenseIndex:
    """Passages, their vectors in a faiss.IndexFlatIP, and the encoder that made them."""

    def __init__(self, passages: list[Passage], faiss_index: Any, encoder: Encoder,
                 manifest: IndexManifest) -> None:
        """Wrap parts already checked to agree; use `build` or `load` to make one."""
        self.passages = passages
        self.faiss_index = faiss_index
        self.encoder = encoder
        self.manifest = manifest

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the corpus this index was built from."""
        return self.manifest.corpus_fingerprint

    def __len__(self) -> int:
        """Number of indexed passages."""
        return len(self.passages)

    @classmethod
    def build(cls, passages: list[Passage], encoder: Encoder, batch_size: int = 64,
              progress: bool = False) -> DenseIndex:
        """Encode every passage's `"Title"\\ntext` and index the vectors for exact IP search."""
        if not passages:
            raise InputError("cannot build an index over an empty corpus (no passages given)")
        faiss = _faiss()
        index = faiss.IndexFlatIP(encoder.dim)
        texts = [p.contents for p in passages]
        starts = range(0, len(texts), batch_size)
        if progress:
            from rich.progress import track

            starts = track(starts, description=f"encoding {len(texts)} passages",
                           total=len(starts))
        for start in starts:
            vectors = encoder.encode(texts[start : start + batch_size], batch_size=batch_size)
            index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        manifest = IndexManifest(
            encoder=encoder.name,
            dim=encoder.dim,
            n_passages=len(passages),
            corpus_fingerprint=corpus_fingerprint(passages),
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            branchpoint_version=branchpoint.__version__,
        )
        return cls(list(passages), index, encoder, manifest)

    def search(self, queries: list[str], k: int) -> list[list[tuple[Passage, float]]]:
        """Top-k (passage, inner-product score) per query, best first, encoded with this index's encoder."""
        return self.search_vectors(self.encoder.encode(list(queries)), k)

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[tuple[Passage, float]]]:
        """Top-k (passage, score) per already-encoded query row, best first."""
        if k < 1:
            raise InputError(f"k (passages per query) must be at least 1, got {k}")
        if len(vectors) == 0:
            return []
        scores, ids = self.faiss_index.search(
            np.ascontiguousarray(vectors, dtype=np.float32), min(k, len(self.passages))
        )
        return [
            [(self.passages[i], float(s)) for s, i in zip(row_s, row_i) if i >= 0]
            for row_s, row_i in zip(scores, ids)
        ]

    def save(self, directory: str | Path) -> Path:
        """Write the index directory atomically: into a temporary sibling, then renamed into place."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = directory.with_name(f".{directory.name}.tmp-{uuid.uuid4().hex[:8]}")
        tmp.mkdir()
        try:
            _faiss().write_index(self.faiss_index, str(tmp / INDEX_FILE))
            with (tmp / PASSAGES_FILE).open("w", encoding="utf-8") as fh:
                for p in self.passages:
                    fh.write(json.dumps({"id": p.doc_id, "contents": p.contents},
                                        ensure_ascii=False) + "\n")
            (tmp / MANIFEST_FILE).write_text(self.manifest.model_dump_json(indent=2) + "\n",
                                             encoding="utf-8")
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

    @classmethod
    def load(cls, directory: str | Path, encoder: Encoder,
             expected_fingerprint: str | None = None) -> DenseIndex:
        """Load a saved index; StaleIndexError if its encoder, dimension or corpus differ from those given."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        where = directory / MANIFEST_FILE
        if manifest.encoder != encoder.name or manifest.dim != encoder.dim:
            raise StaleIndexError(
                f'{where}: index was built with encoder "{manifest.encoder}" (dim {manifest.dim}) '
                f'but encoder "{encoder.name}" (dim {encoder.dim}) was given; rebuild the index'
            )
        if expected_fingerprint is not None and manifest.corpus_fingerprint != expected_fingerprint:
            raise StaleIndexError(
                f"{where}: corpus_fingerprint {manifest.corpus_fingerprint} differs from the "
                f"expected {expected_fingerprint}; the corpus changed since the index was built, "
                "rebuild the index"
            )
        for name in (INDEX_FILE, PASSAGES_FILE):
            if not (directory / name).is_file():
                raise InputError(f"{directory / name}: file missing (expected a saved index)")
        faiss_index = _faiss().read_index(str(directory / INDEX_FILE))
        passages = load_corpus(directory / PASSAGES_FILE, fmt="flashrag-jsonl")
        if faiss_index.d != manifest.dim or faiss_index.ntotal != manifest.n_passages:
            raise StaleIndexError(
                f"{directory / INDEX_FILE}: holds {faiss_index.ntotal} vectors of dim "
                f"{faiss_index.d}, but {where} says {manifest.n_passages} of dim {manifest.dim}; "
                "the index is damaged, rebuild it"
            )
        if corpus_fingerprint(passages) != manifest.corpus_fingerprint:
            raise StaleIndexError(
                f"{directory / PASSAGES_FILE}: fingerprint {corpus_fingerprint(passages)} differs "
                f"from corpus_fingerprint {manifest.corpus_fingerprint} in {where}; the index is "
                "damaged, rebuild it"
            )
        return cls(passages, faiss_index, encoder, manifest)


def read_manifest(directory: str | Path) -> IndexManifest:
    """Read and validate `manifest.json` of a saved index; errors name the file and field."""
    where = Path(directory) / MANIFEST_FILE
    if not where.is_file():
        raise InputError(f"{where}: file not found (expected a saved index directory)")
    try:
        return IndexManifest.model_validate_json(where.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise InputError(f"{where}: {describe_validation_error(exc)}") from None
