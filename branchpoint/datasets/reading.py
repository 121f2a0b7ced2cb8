"""Reading question files: JSON, JSON lines and csv, with errors that name file, line and field.

Every question format (`branchpoint.datasets.formats`) reads its records through these helpers,
so that a bad file gets the same kind of message whatever its format: the file, the line
(jsonl and csv, 1-based; a csv row's first line) or item (JSON list, ``item [i]`` 0-based),
the field or column and what was expected.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.traces import TraceError, iter_json_lines, json_error

Parsed = Iterator[tuple[str, Question | None, str | None]]
"""What a format's parser yields for every record: (where, Question or None, skip reason or None)."""


def fmt_keys(keys: Iterable[str]) -> str:
    """Field names as they are shown in messages: `{"a", "b"}`."""
    return "{" + ", ".join(f'"{k}"' for k in keys) + "}"


def type_name(value: Any) -> str:
    """A JSON value's type as a person calls it (object, list, string, null ...)."""
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(type(value), type(value).__name__)


class Record:
    """One raw record and where it came from, with field getters that raise clear errors."""

    def __init__(self, where: str, obj: dict[str, Any], expected: tuple[str, ...]):
        self.where = where
        self.obj = obj
        self.expected = expected

    def error(self, name: str, what: str) -> InputError:
        return InputError(f'{self.where}: field "{name}" {what}')

    def has(self, name: str) -> bool:
        return name in self.obj and self.obj[name] is not None

    def raw(self, name: str) -> Any:
        if name not in self.obj:
            raise self.error(name, f"missing (expected {fmt_keys(self.expected)})")
        return self.obj[name]

    def text(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str) or not value.strip():
            got = f"{type_name(value)} {value!r:.60}"
            raise self.error(name, f"expected a non-empty string, got {got}")
        return value

    def ident(self, name: str) -> str:
        value = self.raw(name)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise self.error(name, f"expected a non-empty string or integer id, got {value!r:.60}")
        return str(value)

    def answers(self, name: str, *, optional: bool = False) -> list[str]:
        """A string or a list of strings (gold answers); empty strings are dropped."""
        if optional and not self.has(name):
            return []
        value = self.raw(name)
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise self.error(name, f"expected a string or a list of strings, got {value!r:.80}")
        return dedup(v for v in items if v.strip())

    def boolean(self, name: str, default: bool) -> bool:
        if not self.has(name):
            return default
        value = self.obj[name]
        if not isinstance(value, bool):
            raise self.error(name, f"expected true or false, got {value!r:.40}")
        return value


def dedup(items: Iterable[str]) -> list[str]:
    """The items without repeats, in first-seen order."""
    return list(dict.fromkeys(items))


def iter_jsonl_numbered(path: Path) -> Iterator[tuple[int, tuple[str, dict[str, Any]]]]:
    """(line number, (where, object)) for every record of a JSON lines file."""
    try:
        for lineno, obj in iter_json_lines(path):
            yield lineno, (f"{path} line {lineno}", obj)
    except TraceError as exc:
        raise InputError(str(exc)) from None


def iter_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, object) for every record of a JSON lines file."""
    for _, item in iter_jsonl_numbered(path):
        yield item


def read_text(path: Path) -> str:
    """The file as UTF-8 text (a byte order mark dropped); an empty file is an InputError."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{path}: no questions (the file is empty)")
    return text


def read_json(path: Path) -> Any:
    """The file parsed as one JSON document (bad JSON names its line and column)."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} line {exc.lineno}: invalid JSON ({json_error(exc)})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read (is this a question file?)") from None


def read_json_list(path: Path) -> list[tuple[str, Any]]:
    """(where, item) for every item of a file that holds one JSON list."""
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of question objects at the top level, got {type_name(data)}")
    return [(f"{path} item [{i}]", obj) for i, obj in enumerate(data)]


def objects(items: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The items, each checked to be a JSON object."""
    for where, obj in items:
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object, got {type_name(obj)}")
        yield where, obj


CSV_HEADER_LINES = 10
"""How far down a csv file the header row (the first row with a "question" cell) may be."""


def csv_header(path: Path, rows: Iterator[tuple[int, list[str]]]) -> tuple[int, list[str]]:
    """(line, lower-cased column names) of the first row with a "question" cell."""
    for line, row in rows:
        cells = [c.strip().lower() for c in row]
        if "question" in cells:
            return line, cells
        if line >= CSV_HEADER_LINES:
            break
    raise InputError(
        f'{path}: no header row with a "question" column in the first {CSV_HEADER_LINES} lines '
        "(expected a csv file whose header names its columns)"
    )


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line of the row, cells) for every row of a csv file, blank rows included."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""), strict=True)
    end = 0
    try:
        for row in reader:
            start, end = end + 1, reader.line_num
            yield start, row
    except csv.Error as exc:
        raise InputError(f"{path} line {reader.line_num}: invalid CSV ({exc})") from None


def read_csv(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, str, dict[str, str]]]:
    """(line, where, {column: cell}) for each non-blank row below the header.

    Rows above the header (a release's preamble) are skipped. A short row's missing cells read
    as ""; non-empty cells beyond the header's columns are an error (usually broken quoting).
    """
    rows = csv_rows(path)
    header_line, header = csv_header(path, rows)
    missing = [c for c in required if c not in header]
    if missing:
        names = ", ".join(f'"{c}"' for c in missing)
        raise InputError(
            f"{path} line {header_line}: column {names} "
            f"missing from the header (expected columns {fmt_keys(required)}; "
            f"found {fmt_keys(c for c in header if c)})"
        )
    for line, row in rows:
        if not any(c.strip() for c in row):
            continue
        if len(row) > len(header) and any(c.strip() for c in row[len(header) :]):
            raise InputError(
                f"{path} line {line}: {len(row)} cells but the header on line {header_line} "
                f"has {len(header)} columns (check the quoting of this row)"
            )
        values = dict(zip(header, row))
        yield line, f"{path} line {line}", {c: values.get(c, "").strip() for c in header if c}


def check_file(path: Path) -> None:
    """An InputError unless `path` is an existing file."""
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if not path.is_file():
        raise InputError(f"{path}: not a file (expected a question file)")
