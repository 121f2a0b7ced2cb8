"""Corpora: load passages from FlashRAG / HippoRAG / Wikipedia-summary files, chunk, fingerprint.

Formats (see CORPUS_FORMATS; `fmt="auto"` picks one from the file):
- "flashrag-jsonl": one object a line, either `{"id", "contents"}` with contents =
  `"Title"\\ntext` (the title line may also come unquoted, as in some Wikipedia dumps: the
  contents are then kept exactly as given, so what is encoded and served equals the corpus row),
  or FlashRAG's other shape `{"id", "title", "text"}` (contents = `"Title"\\ntext`).
- "title-text-list": JSON list of `{"title", "text"}` (MuSiQue / 2Wiki HippoRAG corpora).
- "title-sentences-dict": JSON dict title -> list of sentences (HotpotQA HippoRAG corpus).
- "title-extract-dict": JSON dict title -> `{"title", "extract", ...}` (Wikipedia summaries).
- "flashrag": JSON lines read as FlashRAG's own `load_corpus` reads them (flashrag/retriever/
  utils.py): a row's `contents` as given, and for a row without one its `text` alone (FlashRAG
  maps `contents = text` and drops the title), so what is encoded is what FlashRAG encodes.
Passages of the JSON formats get ids `<file stem>-<index>` (0-based, in file order).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from branchpoint.errors import InputError
from branchpoint.traces import TraceError, iter_json_lines, json_error

CORPUS_FORMATS = ("flashrag-jsonl", "flashrag", "title-text-list", "title-sentences-dict", "title-extract-dict")


class Passage(BaseModel):
    """One retrievable passage: an id, the title of its page, and its text."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    title: str
    text: str
    #: The corpus row's `contents` when it is not the canonical `"Title"\\ntext` (an unquoted
    #: title line, say): then `contents` returns it unchanged. None for canonical rows.
    given_contents: str | None = None

    @field_validator("title")
    @classmethod
    def _one_line_title(cls, title: str) -> str:
        """Keep titles on one line so the FlashRAG `"Title"\\ntext` form stays unambiguous."""
        return title.replace("\r", " ").replace("\n", " ")

    @property
    def contents(self) -> str:
        """The corpus row as given, else the FlashRAG form `"Title"\\ntext` (what the encoder sees,
        the retrieval server serves and passages.jsonl stores)."""
        if self.given_contents is not None:
            return self.given_contents
        return f'"{self.title}"\n{self.text}'


def split_contents(contents: str) -> tuple[str, str]:
    """Split FlashRAG contents into (title, text); one quoted first line is the title.

    Contents without a newline are an untitled passage: ("", contents).
    """
    if "\n" not in contents:
        return "", contents
    first, text = contents.split("\n", 1)
    title = first.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = title[1:-1]
    return title, text


def load_corpus(path: str | Path, fmt: str = "auto") -> list[Passage]:
    """Read a corpus file into passages; bad input raises InputError naming file, line/item, field."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: corpus file not found")
    if fmt not in ("auto", *CORPUS_FORMATS):
        raise InputError(f"{path}: unknown corpus format {fmt!r} (expected one of: auto, {', '.join(CORPUS_FORMATS)})")
    if fmt == "auto" and path.suffix == ".jsonl":
        fmt = "flashrag-jsonl"
    if fmt in ("flashrag-jsonl", "flashrag"):
        passages = _load_flashrag(path, as_flashrag=fmt == "flashrag")
    else:
        passages = _load_json(path, fmt)
    if not passages:
        raise InputError(f"{path}: corpus is empty (no passages found)")
    return passages


FLASHRAG_EXPECTED = '(expected {"id", "contents"} or {"id", "title", "text"})'


def passage_from_row(obj: dict[str, Any], where: str, *, as_flashrag: bool = False) -> Passage:
    """One FlashRAG jsonl row as a Passage: `{"id", "contents"}` or `{"id", "title", "text"}`.

    Contents that `split_contents` would not give back unchanged (an unquoted title line,
    say) are kept in `given_contents`, so the passage's `contents` equals the row.
    `as_flashrag`: a row without `contents` gets its `text` alone as contents, as FlashRAG's
    `load_corpus` gives it (`corpus.map(lambda x: {"contents": x["text"]})`; the title is dropped).
    """
    if "id" not in obj:
        raise InputError(f'{where}: field "id" missing {FLASHRAG_EXPECTED}')
    if as_flashrag and "contents" not in obj and "text" in obj:
        obj = {"id": obj["id"], "contents": obj["text"]}
    doc_id = obj["id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise InputError(f'{where}: field "id" must be a string, got {type(doc_id).__name__}')
    if "contents" not in obj:
        if "text" not in obj:
            raise InputError(f'{where}: field "contents" missing {FLASHRAG_EXPECTED}')
        text, title = obj["text"], obj.get("title") or ""
        for field, value in (("text", text), ("title", title)):
            if not isinstance(value, str):
                raise InputError(f'{where}: field "{field}" must be a string, got {type(value).__name__}')
        return Passage(doc_id=str(doc_id), title=title, text=text)
    contents = obj["contents"]
    if not isinstance(contents, str):
        raise InputError(f'{where}: field "contents" must be a string, got {type(contents).__name__}')
    title, text = split_contents(contents)
    passage = Passage(doc_id=str(doc_id), title=title, text=text)
    if passage.contents != contents:
        passage = passage.model_copy(update={"given_contents": contents})
    return passage


def _load_flashrag(path: Path, *, as_flashrag: bool = False) -> list[Passage]:
    """Read FlashRAG jsonl; ids must be unique strings (integers are accepted and kept as text).

    `as_flashrag`: rows without `contents` as FlashRAG reads them (`passage_from_row`)."""
    passages: list[Passage] = []
    first_line: dict[str, int] = {}
    try:
        for lineno, obj in iter_json_lines(path):
            where = f"{path} line {lineno}"
            passage = passage_from_row(obj, where, as_flashrag=as_flashrag)
            doc_id = passage.doc_id
            if doc_id in first_line:
                raise InputError(
                    f'{where}: duplicate id "{doc_id}" (first on line {first_line[doc_id]}); ids must be unique'
                )
            first_line[doc_id] = lineno
            passages.append(passage)
    except TraceError as exc:
        raise InputError(str(exc)) from None
    return passages


def _load_json(path: Path, fmt: str) -> list[Passage]:
    """Read one of the whole-file JSON formats, detecting which when `fmt` is "auto"."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} line {exc.lineno}: invalid JSON ({json_error(exc)}); "
            'for JSON lines name the file *.jsonl or pass fmt="flashrag-jsonl"'
        ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read (is this a corpus?)") from None
    if fmt == "auto":
        fmt = _detect_json_format(path, data)
    if fmt == "title-text-list":
        return _from_title_text_list(path, data)
    if fmt == "title-sentences-dict":
        return _from_dict(path, data, _sentences_text)
    return _from_dict(path, data, _extract_text)


def _detect_json_format(path: Path, data: Any) -> str:
    """Name the JSON corpus format of `data` from its shape."""
    if isinstance(data, list):
        return "title-text-list"
    if isinstance(data, dict):
        first = next(iter(data.values()), None)
        if isinstance(first, dict):
            return "title-extract-dict"
        return "title-sentences-dict"
    raise InputError(
        f'{path}: expected a JSON list of {{"title", "text"}} or a JSON dict keyed by title, got {type(data).__name__}'
    )


def _string_field(obj: dict[str, Any], field: str, where: str, expected: str) -> str:
    """Return obj[field] as a string, or raise InputError naming `where` and the field."""
    if field not in obj:
        raise InputError(f'{where}: field "{field}" missing (expected {expected})')
    value = obj[field]
    if not isinstance(value, str):
        raise InputError(f'{where}: field "{field}" must be a string, got {type(value).__name__}')
    return value


def _from_title_text_list(path: Path, data: Any) -> list[Passage]:
    """Passages from a JSON list of {"title", "text"} objects."""
    expected = '{"title", "text"}'
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of {expected}, got {type(data).__name__}")
    passages = []
    for i, item in enumerate(data):
        where = f"{path} item {i}"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected an object {expected}, got {type(item).__name__}")
        title = _string_field(item, "title", where, expected)
        text = _string_field(item, "text", where, expected)
        passages.append(Passage(doc_id=f"{path.stem}-{i}", title=title, text=text))
    return passages


def _sentences_text(value: Any, where: str) -> tuple[str | None, str]:
    """Text of a HotpotQA entry: its sentences, each stripped, joined by one space."""
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise InputError(f"{where}: expected a list of sentence strings, got {type(value).__name__}")
    return None, " ".join(s.strip() for s in value if s.strip())


def _extract_text(value: Any, where: str) -> tuple[str | None, str]:
    """Title and text of a Wikipedia-summary entry ({"title", "extract", ...})."""
    expected = '{"title", "extract", ...}'
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object {expected}, got {type(value).__name__}")
    title = _string_field(value, "title", where, expected) if "title" in value else None
    return title, _string_field(value, "extract", where, expected)


TextParser = Callable[[Any, str], tuple[str | None, str]]


def _from_dict(path: Path, data: Any, parse: TextParser) -> list[Passage]:
    """Passages from a JSON dict keyed by title; `parse(value, where)` gives (title or None, text)."""
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON dict keyed by title, got {type(data).__name__}")
    passages = []
    for i, (key, value) in enumerate(data.items()):
        title, text = parse(value, f'{path} entry "{key}"')
        passages.append(Passage(doc_id=f"{path.stem}-{i}", title=title or key, text=text))
    return passages


def chunk_passages(passages: Iterable[Passage], words: int = 100) -> list[Passage]:
    """Split texts into `words`-word chunks (DPR Wikipedia style), keeping the title on each.

    A passage that fits in one chunk is kept unchanged; one that splits gets ids `<doc_id>#<k>`
    (k from 0) and its words re-joined by single spaces.
    """
    if words < 1:
        raise InputError(f"chunk size must be at least 1 word, got {words}")
    chunks: list[Passage] = []
    for passage in passages:
        tokens = passage.text.split()
        if len(tokens) <= words:
            chunks.append(passage)
            continue
        for k, start in enumerate(range(0, len(tokens), words)):
            chunks.append(
                Passage(
                    doc_id=f"{passage.doc_id}#{k}",
                    title=passage.title,
                    text=" ".join(tokens[start : start + words]),
                )
            )
    seen: set[str] = set()
    for chunk in chunks:
        if chunk.doc_id in seen:
            raise InputError(f'chunking produced duplicate id "{chunk.doc_id}"; ids must be unique')
        seen.add(chunk.doc_id)
    return chunks


def fingerprint_row(passage: Passage) -> bytes:
    """What `corpus_fingerprint` hashes for one passage (id, title, text, and contents kept as given)."""
    fields = [passage.doc_id, passage.title, passage.text]
    if passage.given_contents is not None:
        fields.append(passage.given_contents)
    return json.dumps(fields, ensure_ascii=False).encode("utf-8") + b"\n"


def corpus_fingerprint(passages: Iterable[Passage]) -> str:
    """sha256 over ids, titles and texts in order: the identity of a corpus an index was built on.

    Contents kept as given (an unquoted title line) are hashed too, so rewriting a row's title
    line changes the fingerprint; canonical corpora keep the fingerprints they always had.
    """
    digest = hashlib.sha256()
    for p in passages:
        digest.update(fingerprint_row(p))
    return digest.hexdigest()
