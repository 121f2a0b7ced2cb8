"""A run folder's passage store (`PASSAGES_FILE`): each retrieved passage's text once, `{"ref",
"text"}` per line. Records written by the run store carry `text_ref` instead of `text` in
`steps[].retrieved[]`; every reader puts the text back, so consumers see the inline form (which
is also valid)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from branchpoint.traces.jsonl import TraceError, iter_raw_lines, parse_json_line


def passage_ref(text: str) -> str:
    """The key of a passage text in a passage store (a hash of the text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class PassageResolver:
    """Puts passage texts back into records that refer to the passage store beside their file.

    The store is read on the first reference only (inline traces never touch it), unless its
    `texts` are given; a torn last line (a crash mid-append: its record was never written) is ignored.
    """

    def __init__(self, path: Path, texts: dict[str, str] | None = None) -> None:
        self.path = path
        self._texts: dict[str, str] | None = texts

    def _load(self) -> dict[str, str]:
        texts: dict[str, str] = {}
        if self.path.is_file():
            with self.path.open("rb") as fh:
                for lineno, raw in iter_raw_lines(fh, self.path):
                    if not raw.endswith(b"\n"):
                        break
                    obj = parse_json_line(raw, self.path, lineno)
                    if obj is None:
                        continue
                    if not isinstance(obj.get("ref"), str) or not isinstance(obj.get("text"), str):
                        raise TraceError(f'{self.path} line {lineno}: expected {{"ref": str, "text": str}}')
                    texts[obj["ref"]] = obj["text"]
        return texts

    def resolve(self, obj: dict[str, Any], where: str) -> dict[str, Any]:
        """`obj` (a record as parsed JSON) with every `text_ref` replaced by its text, in place."""
        for step in obj.get("steps") or ():
            if not isinstance(step, dict):
                continue
            for doc in step.get("retrieved") or ():
                if isinstance(doc, dict) and "text_ref" in doc:
                    if self._texts is None:
                        self._texts = self._load()
                    ref = doc.pop("text_ref")
                    if ref not in self._texts:
                        raise TraceError(f"{where}: passage {ref!r} is not in {self.path} (the run's passage store)")
                    doc["text"] = self._texts[ref]
        return obj
