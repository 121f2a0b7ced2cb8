"""What the index-backed source kinds (dense, bm25) share: a corpus, its format and chunking, and
an optional saved index, with the checks a run makes before it writes anything."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from branchpoint.errors import InputError
from branchpoint.retrieval.sources.base import SourceSpec
from branchpoint.spec_paths import PathSetting, SpecPath


class CorpusSourceSpec(SourceSpec):
    """A source over a corpus file (`demo`: the embedded demo corpus) or a saved `index`.

    `index_params`: M, efConstruction, efSearch (hnsw); nlist, nprobe (ivf); k1, b (bm25).
    """

    corpus: SpecPath = "demo"
    format: str = "auto"
    chunk_words: int | None = Field(None, ge=10)
    index: Annotated[str | None, PathSetting()] = None
    index_params: dict[str, int | float | str] = Field(default_factory=dict)

    @property
    def manifest_kind(self) -> str | None:
        """The index kind a saved index directory must have (None: any)."""
        return None

    def corpus_path(self) -> Path | None:
        """The corpus file (`demo` is the embedded demo corpus); None for a prebuilt index
        directory whose corpus is left at `demo` (its own passages are used, unchecked)."""
        if self.corpus == "demo":
            if self.index is not None and Path(self.index).is_dir():
                return None
            from branchpoint.demo_data import demo_corpus_path

            return demo_corpus_path()
        return Path(self.corpus)

    def check(self, name: str) -> None:
        """Refuse a missing index or corpus file, and a FlashRAG index file without its corpus."""
        if self.index is not None:
            index = Path(self.index)
            if not index.exists():
                raise InputError(f"retrieval.sources.{name}.index: not found: {self.index}")
            if index.is_file() and self.corpus == "demo":
                raise InputError(
                    f"retrieval.sources.{name}.corpus: the FlashRAG index file {self.index} needs the corpus jsonl "
                    "it was built from"
                )
        corpus = self.corpus_path()
        if corpus is not None and not corpus.is_file():
            raise InputError(f"retrieval.sources.{name}.corpus: file not found: {self.corpus}")

    def check_data(self) -> None:
        """Read the corpus and check a saved index directory (its manifest) or a FlashRAG index
        file (memory-mapped, not loaded) against it: a corpus that is not JSON, not UTF-8 or
        empty, an index of another corpus, kind or build parameters, or a damaged index file is
        an InputError."""
        from branchpoint.retrieval import load_corpus
        from branchpoint.retrieval.corpus import chunk_passages, corpus_fingerprint
        from branchpoint.retrieval.index import DenseIndex
        from branchpoint.retrieval.manifest import check_manifest, read_manifest

        corpus = self.corpus_path()
        if corpus is None:
            return
        passages: Any = load_corpus(corpus, self.format)
        index = Path(self.index) if self.index is not None else None
        if index is not None and index.is_dir():
            if self.chunk_words is not None:
                passages = chunk_passages(passages, self.chunk_words)
            check_manifest(
                read_manifest(index),
                index / "manifest.json",
                kind=self.manifest_kind,
                expected_fingerprint=corpus_fingerprint(passages),
                params=self.index_params,
            )
        elif index is not None and index.is_file():  # a FlashRAG index file: row i is corpus line i
            DenseIndex.check_flashrag_file(index, len(passages), corpus)
