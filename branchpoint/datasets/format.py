"""What a question format is, and where formats are registered.

A question format is a name, a loader (`parse(path)` yields one (where, Question | None, skip
reason | None) per record) and how `fmt="auto"` recognises its files: a rule on the file name
(`by_name`) and a rule on the content (`sniff`), each given a `FileHead` that reads only what
it is asked for (the csv header, the first record, the top-level JSON object).

Formats register in `branchpoint.registry` under kind ``question_format`` (one module per
built-in format in `branchpoint.datasets.formats`; a plug-in adds its own with
`register_format`). `detect_format` asks every format's file-name rule first, in `name_rank`
order, then every content rule, in `sniff_rank` order: the first that says yes names the format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from branchpoint import registry
from branchpoint.datasets.reading import (
    Parsed,
    csv_header,
    csv_rows,
    iter_jsonl,
    read_json,
    read_json_list,
)
from branchpoint.errors import InputError
from branchpoint.registry_kinds import Kind

KIND = "question_format"

#: Rank of a format that does not give one: asked after every built-in rule.
LAST = 1000


class FileHead:
    """A question file as detection sees it: its name, and its content read lazily, once."""

    def __init__(self, path: Path):
        self.path = path
        self.name = path.name.lower()
        self.suffix = path.suffix.lower()
        self.is_json = self.suffix == ".json"
        self.is_csv = self.suffix == ".csv"

    @cached_property
    def head_bytes(self) -> bytes:
        """The first 4 KiB, without leading whitespace or a UTF-8 byte order mark."""
        with self.path.open("rb") as fh:
            return fh.read(4096).lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()

    @cached_property
    def csv_columns(self) -> list[str]:
        """The lower-cased columns of a csv file's header row (InputError when it has none)."""
        _, header = csv_header(self.path, csv_rows(self.path))
        return header

    @cached_property
    def json_object(self) -> dict[str, Any] | None:
        """The file's top-level JSON object, when the whole file is one (None otherwise)."""
        if not self.head_bytes.startswith(b"{"):
            return None
        try:
            data = read_json(self.path)
        except InputError:  # e.g. JSON lines in a .json file: told apart by their records later
            return None
        return data if isinstance(data, dict) else None

    @cached_property
    def first(self) -> dict[str, Any]:
        """The first record of a JSON list or JSON lines file (InputError when it has none)."""
        first: dict[str, Any] | None = None
        if self.head_bytes.startswith(b"["):
            items = read_json_list(self.path)
            first = items[0][1] if items and isinstance(items[0][1], dict) else None
        else:
            for _, obj in iter_jsonl(self.path):
                first = obj
                break
        if first is None:
            raise InputError(f"{self.path}: no questions (the file is empty)")
        return first

    @property
    def keys(self) -> set[str]:
        """The keys of the first record (see `first`)."""
        return set(self.first)


@dataclass(frozen=True)
class QuestionFormat:
    """One question format: its name, its loader and how `fmt="auto"` recognises its files."""

    name: str
    parse: Callable[..., Parsed]
    """The loader (`parse(path)`, and `parse(path, split=...)` for a format with splits): one (where, Question | None, skip reason | None) per record of the file."""
    by_name: Callable[[FileHead], bool] | None = None
    """Whether the file name says it is this format (asked before any content is read)."""
    sniff: Callable[[FileHead], bool] | None = None
    """Whether the content says it is this format."""
    name_rank: int = LAST
    sniff_rank: int = LAST
    splits: tuple[str, ...] = ()
    """Splits a file of this format may be cut to (`load_questions(split=...)`); () for none."""
    label: str = ""
    """The data set's own spelling of its name, for messages (e.g. "FreshQA")."""


#: The typed handle of the registry kind: `registry.get(QUESTION_FORMAT, name).obj` is a `QuestionFormat`.
QUESTION_FORMAT: Kind[QuestionFormat] = Kind(KIND)


def register_format(fmt: QuestionFormat) -> QuestionFormat:
    """Register a question format by its name (a taken name is an error naming both places)."""
    parse = fmt.parse
    origin = f"{getattr(parse, '__module__', '?')}:{getattr(parse, '__qualname__', fmt.name)}"
    registry.add(KIND, fmt.name, fmt, origin=origin)
    return fmt


def format_names() -> list[str]:
    """The names of every registered question format (built-ins and plug-ins), sorted."""
    return registry.names(KIND)


def get_format(name: str) -> QuestionFormat:
    """The registered format called `name`, or the `QuestionFormat` that `package.module:attr`
    names (an unknown name lists the known ones)."""
    if ":" not in name and name not in format_names():
        raise InputError(f'unknown question format "{name}" (expected "auto" or one of {", ".join(format_names())})')
    fmt = registry.get(QUESTION_FORMAT, name).obj
    if not isinstance(fmt, QuestionFormat):
        raise InputError(f'question format "{name}": expected a QuestionFormat, got {type(fmt).__name__}')
    return fmt


def all_formats() -> list[QuestionFormat]:
    """Every registered question format, by name."""
    return [entry.obj for entry in registry.entries(QUESTION_FORMAT)]
