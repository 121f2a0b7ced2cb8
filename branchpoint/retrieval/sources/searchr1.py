"""Source kind `searchr1`: a Search-R1-compatible retrieval server at `url`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from branchpoint.retrieval.sources.base import SourceSpec, source

if TYPE_CHECKING:
    from branchpoint.retrieval.searchr1 import SearchR1Source


def _held_by_the_server(field: str) -> str:
    return f'"{field}" is not used by kind searchr1 (the server holds the corpus and index)'


@source("searchr1")
class SearchR1SourceSpec(SourceSpec):
    """A Search-R1-compatible retrieval server (`POST {url}/retrieve`); it holds corpus and index."""

    kind: Literal["searchr1"] = "searchr1"
    url: str | None = None

    unused_fields: ClassVar = {
        field: (value, _held_by_the_server(field))
        for field, value in (
            ("corpus", "demo"),
            ("format", "auto"),
            ("encoder", "minilm-onnx"),
            ("chunk_words", None),
            ("index_kind", None),
            ("index", None),
            ("index_params", {}),
            ("device", "cpu"),
            ("retrieval_method", None),
            ("encoder_settings", None),
        )
    }
    dumped_unused: ClassVar = ("corpus", "format", "encoder", "chunk_words")

    @model_validator(mode="after")
    def _needs_url(self) -> Any:
        if not self.url:
            raise PydanticCustomError(
                "source_settings",
                '"url" is required for kind searchr1 (the server, e.g. http://127.0.0.1:8000)',
            )
        return self

    def open(self, name: str, *, progress: bool = False) -> SearchR1Source:
        """The HTTP client of the server (imported here: only specs that name a server need it)."""
        from branchpoint.retrieval.searchr1 import SearchR1Source

        return SearchR1Source(name, str(self.url))
