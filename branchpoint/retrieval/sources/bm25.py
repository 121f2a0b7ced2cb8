"""Source kind `bm25`: BM25 over a corpus (bm25s), or a saved bm25 index directory."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from branchpoint.errors import InputError
from branchpoint.retrieval.source import BM25Source
from branchpoint.retrieval.sources.base import source
from branchpoint.retrieval.sources.corpus import CorpusSourceSpec

_NO_ENCODER = '"encoder" is not used by kind bm25 (it scores words, not vectors)'


@source("bm25")
class BM25SourceSpec(CorpusSourceSpec):
    """BM25 over `corpus` (scores are BM25 scores, not cosines); `index_params` k1, b."""

    kind: Literal["bm25"] = "bm25"

    unused_fields: ClassVar = {
        "encoder": ("minilm-onnx", _NO_ENCODER),
        "retrieval_method": (None, _NO_ENCODER),
        "encoder_settings": (None, _NO_ENCODER),
        "index_kind": (None, '"index_kind" is only for kind dense (flat, hnsw, ivf)'),
        "device": (
            "cpu",
            '"device: gpu" is only for kind dense (bm25 runs on the CPU)',
        ),
        "url": (None, '"url" is only for kind searchr1 (this source is kind bm25)'),
    }
    dumped_unused: ClassVar = ("encoder",)
    dumped_if_set: ClassVar = {"index": None, "index_params": {}}

    @property
    def manifest_kind(self) -> str | None:
        return "bm25"

    @model_validator(mode="after")
    def _check_params(self) -> Any:
        if self.index_params:
            from branchpoint.retrieval.index_kinds import resolve_params

            try:
                resolve_params("bm25", self.index_params)
            except InputError as exc:
                raise PydanticCustomError("source_settings", f'"index_params": {exc}') from None
        return self

    def open(self, name: str, *, progress: bool = False) -> BM25Source:
        """The BM25 source (its index loaded, or built once and cached)."""
        from branchpoint.retrieval.source import open_bm25_source

        return open_bm25_source(
            name,
            self.corpus_path(),
            fmt=self.format,
            chunk_words=self.chunk_words,
            index=self.index,
            index_params=self.index_params,
            progress=progress,
        )
