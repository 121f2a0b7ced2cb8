"""Source kind `dense` (the default): a FAISS index over an encoded corpus."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from branchpoint.errors import InputError
from branchpoint.retrieval.encoder import DEFAULT_ENCODER
from branchpoint.retrieval.encoder_settings import EncoderSettings
from branchpoint.retrieval.source import DenseSource
from branchpoint.retrieval.sources.base import source
from branchpoint.retrieval.sources.corpus import CorpusSourceSpec


@source("dense")
class DenseSourceSpec(CorpusSourceSpec):
    """`corpus` (`demo` or a file) encoded with `encoder` into a FAISS index of `index_kind` flat
    (exact, default), hnsw, ivf or pq, built once and cached; or `index`: a directory `branchpoint
    index build` wrote (then `corpus` is optional and, if given, must be the corpus it was built
    from), or a FlashRAG faiss index file with its `corpus` jsonl. `device: gpu` puts the faiss
    index on the GPU (faiss-gpu needed). Encoding: `retrieval_method` (FlashRAG's names: e5, bge,
    contriever, jina, dpr) sets prefixes, pooling and normalisation as FlashRAG does;
    `encoder_settings` ({query_prefix, passage_prefix, pooling: mean|cls, normalize}) sets them
    one by one (wins).
    """

    kind: Literal["dense"] = "dense"
    encoder: str = DEFAULT_ENCODER
    index_kind: Literal["flat", "hnsw", "ivf", "pq"] | None = None
    device: Literal["cpu", "gpu"] = "cpu"
    retrieval_method: str | None = None
    encoder_settings: EncoderSettings | None = None

    unused_fields: ClassVar = {"url": (None, '"url" is only for kind searchr1 (this source is kind dense)')}
    dumped_if_set: ClassVar = {
        "kind": "dense",
        "index_kind": None,
        "index": None,
        "index_params": {},
        "device": "cpu",
        "retrieval_method": None,
        "encoder_settings": None,
    }

    @property
    def encoder_name(self) -> str:
        """The encoder's full name, its settings included (what index manifests record)."""
        from branchpoint.retrieval.encoder import resolve_encoder_name

        return resolve_encoder_name(self.encoder, self.retrieval_method, self.encoder_settings)

    @property
    def manifest_kind(self) -> str | None:
        return self.index_kind

    @model_validator(mode="after")
    def _check_settings(self) -> Any:
        """Refuse encoder settings that do not resolve, GPU HNSW and parameters of another kind."""
        if self.retrieval_method or self.encoder_settings:
            try:
                self.encoder_name  # noqa: B018 - checks the method name and settings
            except InputError as exc:
                raise PydanticCustomError("source_settings", str(exc)) from None
        if self.device == "gpu" and self.index_kind == "hnsw":
            raise PydanticCustomError(
                "source_settings",
                '"device: gpu" cannot serve index_kind hnsw (faiss has no GPU HNSW); use flat or ivf',
            )
        params_kind = self.index_kind or (None if self.index else "flat")
        if self.index_params and params_kind is not None:
            from branchpoint.retrieval.index_kinds import resolve_params

            try:
                resolve_params(params_kind, self.index_params)
            except InputError as exc:
                hint = " (set index_kind)" if params_kind == "flat" and not self.index_kind else ""
                raise PydanticCustomError("source_settings", f'"index_params": {exc}{hint}') from None
        return self

    def check(self, name: str) -> None:
        """Refuse an unknown encoder, then what every corpus source refuses."""
        from branchpoint.registry import REGISTRY
        from branchpoint.retrieval.encoder import is_encoder_name

        if not is_encoder_name(self.encoder):
            raise InputError(
                f"retrieval.sources.{name}.encoder: unknown encoder {self.encoder!r} (known: "
                f"{', '.join(REGISTRY.names('encoder'))}, or st:MODEL for a sentence-transformers model)"
            )
        super().check(name)

    def open(self, name: str, *, progress: bool = False) -> DenseSource:
        """The dense source (its index loaded, or built once and cached)."""
        from branchpoint.retrieval.source import open_dense_source

        return open_dense_source(
            name,
            self.corpus_path(),
            self.encoder_name,
            chunk_words=self.chunk_words,
            progress=progress,
            fmt=self.format,
            index_kind=self.index_kind,
            index=self.index,
            index_params=self.index_params,
            device=self.device,
        )
