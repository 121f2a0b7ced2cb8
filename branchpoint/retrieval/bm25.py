"""BM25 index through `bm25s`, saved in its own format inside an index directory + our manifest.

On disk: `bm25/` (bm25s's files: the CSC score matrix, vocabulary, parameters),
`passages.jsonl` (FlashRAG `{"id", "contents"}`, row i = bm25s document i) and
`manifest.json` (kind "bm25", no encoder; params k1, b, method, stopwords). Passages are
indexed as `"Title"\\ntext`, lower-cased, split on word characters, English stopwords removed
(bm25s's tokenizer, no stemming). Documents that share no term with the query (score 0) are
not returned, so a query may get fewer than k results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval._deps import require
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.corpus_store import fingerprint_of, open_mapped_corpus
from branchpoint.retrieval.index_kinds import Hits, resolve_params
from branchpoint.retrieval.manifest import (
    MANIFEST_FILE,
    PASSAGES_FILE,
    IndexManifest,
    check_manifest,
    new_manifest,
    read_manifest,
    write_dir_atomically,
    write_manifest,
    write_passages,
)

BM25_DIR = "bm25"
BM25S_VERSION = "0.3.16"


def _bm25s() -> Any:
    """The bm25s module, or one line saying what to install."""
    return require("bm25s", f"bm25s=={BM25S_VERSION}", "the bm25 index")


class BM25Index:
    """Passages and their bm25s index; `search` gives (passage, BM25 score) lists, best first."""

    def __init__(self, passages: Sequence[Passage], retriever: Any, manifest: IndexManifest) -> None:
        """Wrap parts already checked to agree; use `build` or `load` to make one."""
        self.passages = passages
        self.retriever = retriever
        self.manifest = manifest

    kind = "bm25"

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the corpus this index was built from."""
        return self.manifest.corpus_fingerprint

    def __len__(self) -> int:
        """Number of indexed passages."""
        return len(self.passages)

    def _tokenize(self, texts: list[str], **kwargs: Any) -> Any:
        return _bm25s().tokenize(
            texts, stopwords=str(self.manifest.params["stopwords"]) or None, show_progress=False, **kwargs
        )

    @classmethod
    def build(
        cls, passages: Sequence[Passage], params: Mapping[str, Any] | None = None, progress: bool = False
    ) -> BM25Index:
        """Tokenize every passage's `"Title"\\ntext` and build the BM25 score matrix."""
        if not passages:
            raise InputError("cannot build an index over an empty corpus (no passages given)")
        bm25s = _bm25s()
        resolved = resolve_params("bm25", params)
        manifest = new_manifest("bm25", len(passages), fingerprint_of(passages), resolved)
        retriever = bm25s.BM25(k1=float(resolved["k1"]), b=float(resolved["b"]), method=str(resolved["method"]))
        index = cls(list(passages), retriever, manifest)
        tokens = bm25s.tokenize(
            [p.contents for p in passages], stopwords=str(resolved["stopwords"]) or None, show_progress=False
        )
        retriever.index(tokens, show_progress=False)
        return index

    def search(self, queries: list[str], k: int) -> Hits:
        """Top-k (passage, BM25 score) per query, best first; zero-score documents left out."""
        if k < 1:
            raise InputError(f"k (passages per query) must be at least 1, got {k}")
        if not queries:
            return []
        tokens = self._tokenize(list(queries), return_ids=False)
        ids, scores = self.retriever.retrieve(tokens, k=min(k, len(self.passages)), show_progress=False, n_threads=0)
        passages = self.passages
        return [
            [(passages[i], s) for i, s in zip(row_i.tolist(), row_s.tolist()) if s > 0]
            for row_i, row_s in zip(np.asarray(ids), np.asarray(scores))
        ]

    def save(self, directory: str | Path) -> Path:
        """Write the index directory atomically (bm25s files in `bm25/`, passages, manifest)."""

        def fill(tmp: Path) -> None:
            self.retriever.save(str(tmp / BM25_DIR), show_progress=False)
            write_passages(tmp / PASSAGES_FILE, list(self.passages))
            open_mapped_corpus(tmp / PASSAGES_FILE).close()  # its offsets and fingerprint, once
            write_manifest(tmp / MANIFEST_FILE, self.manifest)

        return write_dir_atomically(directory, fill)

    @classmethod
    def load(
        cls, directory: str | Path, expected_fingerprint: str | None = None, *, params: Mapping[str, Any] | None = None
    ) -> BM25Index:
        """Load a saved BM25 index; StaleIndexError if its kind, corpus or parameters differ."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        where = directory / MANIFEST_FILE
        check_manifest(manifest, where, kind="bm25", expected_fingerprint=expected_fingerprint, params=params)
        for path in (directory / BM25_DIR, directory / PASSAGES_FILE):
            if not path.exists():
                raise InputError(f"{path}: missing (expected a saved bm25 index)")
        passages = open_mapped_corpus(directory / PASSAGES_FILE)
        if passages.fingerprint != manifest.corpus_fingerprint:
            raise StaleIndexError(
                f"{directory / PASSAGES_FILE}: fingerprint {passages.fingerprint} differs "
                f"from corpus_fingerprint {manifest.corpus_fingerprint} in {where}; the index is "
                "damaged, rebuild it"
            )
        try:
            # mmap: the score matrix stays in the page cache, shared by every process.
            retriever = _bm25s().BM25.load(str(directory / BM25_DIR), mmap=True, show_progress=False)
        except (OSError, ValueError, KeyError) as exc:
            raise StaleIndexError(f"{directory / BM25_DIR}: unreadable bm25s index ({exc}); rebuild it") from None
        n_docs = int(retriever.scores.get("num_docs", -1))
        if n_docs != manifest.n_passages:
            raise StaleIndexError(
                f"{directory / BM25_DIR}: holds {n_docs} documents but {where} "
                f"says {manifest.n_passages}; the index is damaged, rebuild it"
            )
        return cls(passages, retriever, manifest)
