"""Reading JSONL input line by line: bounded line reads, per-line checksums, and errors that name
the file, line and field (every reader of traces, passages and studies' outputs goes through here)."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from branchpoint.traces.files import QUARANTINE_FILE, RUN_TRACE_FILES


class TraceError(ValueError):
    """A trace (or any JSONL input) that does not follow its schema; the message names file and line."""


#: Longest line (bytes, newline included) `iter_json_lines` reads: a longer one is an error naming
#: the line, not a memory spike (a 50 MB line of garbage must not be slurped and parsed).
MAX_LINE_BYTES = 16 * 1024 * 1024


def iter_raw_lines(
    fh: BinaryIO,
    path: str | Path,
    max_line_bytes: int = MAX_LINE_BYTES,
    on_too_long: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, bytes) of an open binary file, reading at most `max_line_bytes` per line.

    A longer line raises TraceError naming the file and line; with `on_too_long`, its rest is
    skipped in bounded chunks, `on_too_long(line number)` is called, and reading goes on.
    """
    lineno = 0
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > max_line_bytes:
            if on_too_long is None:
                raise TraceError(
                    f"{path} line {lineno}: longer than {max_line_bytes} bytes (the most one JSON line may have; "
                    "is this a JSONL file?)"
                )
            while raw and not raw.endswith(b"\n"):
                raw = fh.readline(max_line_bytes)
            on_too_long(lineno)
            continue
        yield lineno, raw


def json_error(exc: json.JSONDecodeError) -> str:
    """A JSON parse error as people read it (`Unterminated string starting at column 3`, once)."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


#: The last field of each line the run store writes: the CRC-32 of the line's bytes without it; lines
#: without it, or re-serialised by others, are read unchecked (docs/trace-contract.md).
LINE_CHECKSUM_FIELD = "line_crc32"
_CHECKSUM_TAIL = re.compile(rb'(,|\{)"line_crc32":"([0-9a-f]{8})"\}\r?\n?$')


class ChecksumError(TraceError):
    """A trace line whose `line_crc32` does not match its bytes (changed or damaged after writing)."""


def with_checksum(body: str) -> str:
    """A JSON object's text (`{...}`) as a line: `line_crc32` put last, then a newline."""
    sep = "" if body == "{}" else ","
    return f'{body[:-1]}{sep}"{LINE_CHECKSUM_FIELD}":"{zlib.crc32(body.encode("utf-8")):08x}"}}\n'


def _checksum_problem(raw: bytes, obj: dict[str, Any]) -> str | None:
    """Why a line's `line_crc32` (popped from `obj`) does not match its bytes; None if it does or cannot tell."""
    claimed = obj.pop(LINE_CHECKSUM_FIELD)
    tail = _CHECKSUM_TAIL.search(raw[-40:])
    if tail is None:
        return None
    body = raw[: max(0, len(raw) - 40) + tail.start()] + (b"}" if tail.group(1) == b"," else b"{}")
    if (crc := f"{zlib.crc32(body):08x}") == claimed == tail.group(2).decode():
        return None
    return f"checksum mismatch ({claimed}, its bytes give {crc}): the line changed after it was written"


def repair_hint(path: str | Path) -> str:
    """What to do about a damaged line of a run's trace file (`runs repair`); "" for other files."""
    path = Path(path)
    if path.name not in RUN_TRACE_FILES or path.parent == Path():
        return ""
    return f" (the run's trace file is damaged: `branchpoint runs repair {path.parent}` moves its damaged lines to {QUARANTINE_FILE}, losing nothing, and the next run redoes what they held)"


def parse_json_line(raw: bytes, path: str | Path, lineno: int) -> dict[str, Any] | None:
    """The JSON object on one line, or None for a blank line.

    Raises TraceError naming the file and line for bytes that are not UTF-8, text that is not JSON
    (or nested too deeply), a value that is not an object, and ChecksumError for a line whose
    `line_crc32` (dropped) does not match its bytes; for a run's trace files, with `repair_hint`.
    """
    where = f"{path} line {lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{where}: not UTF-8 text ({exc.reason}){repair_hint(path)}") from None
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}: invalid JSON ({json_error(exc)}){repair_hint(path)}") from None
    except RecursionError:
        raise TraceError(f"{where}: JSON nested too deeply to read{repair_hint(path)}") from None
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(obj).__name__}{repair_hint(path)}")
    if LINE_CHECKSUM_FIELD in obj and (problem := _checksum_problem(raw, obj)):
        raise ChecksumError(f"{where}: {problem}{repair_hint(path)}")
    return obj


def iter_json_lines(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line of a JSONL file.

    Raises TraceError naming the file and line for bytes that are not UTF-8, lines that are not
    JSON, JSON values that are not objects, and lines longer than `max_line_bytes`.
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: file not found")
    with path.open("rb") as fh:
        for lineno, raw in iter_raw_lines(fh, path, max_line_bytes):
            obj = parse_json_line(raw, path, lineno)
            if obj is not None:
                yield lineno, obj


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem: `field "a.b": message`."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(record)"
        parts.append(f'field "{loc}": {err["msg"]}')
    return "; ".join(parts)
