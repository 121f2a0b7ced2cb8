"""Add a new source kind: one class that validates its fields and opens itself (then
`retrieval: {sources: {notes: {kind: keyword, passages: {d1: "..."}}}}` in a spec)."""

from typing import Literal

from pydantic import Field

from branchpoint.api import RetrievedDoc, SourceSpec, source


class KeywordSource:
    """Passages ranked by how many query words they contain (ties: listed order)."""

    def __init__(self, name: str, passages: dict[str, str]) -> None:
        self.name, self.passages = name, passages

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        words = set(query.lower().split())
        scored = [(sum(w in text.lower() for w in words), doc_id, text) for doc_id, text in self.passages.items()]
        scored = sorted((s for s in scored if s[0] > 0), key=lambda s: -s[0])[:k]
        return [RetrievedDoc(doc_id=d, score=float(n), text=t, source=self.name) for n, d, t in scored]


@source("keyword")
class KeywordSourceSpec(SourceSpec):
    """Inline passages (`doc id: text`) searched by word overlap."""

    kind: Literal["keyword"] = "keyword"
    passages: dict[str, str] = Field(min_length=1)

    def open(self, name: str, *, progress: bool = False) -> KeywordSource:
        return KeywordSource(name, self.passages)
