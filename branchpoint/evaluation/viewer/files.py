"""Reading a run directory's files for the viewer: the folder check, lines with their byte
offsets (so a record can be read again from its offset when it is opened), and small JSON files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.errors import InputError
from branchpoint.traces import (
    EXECUTIONS_FILE,
    FORKS_FILE,
    JUDGED_FILE,
    MAX_LINE_BYTES,
    REPLAYS_FILE,
    ExecutionRecord,
    PassageResolver,
    TraceError,
    describe_validation_error,
    iter_raw_lines,
    parse_json_line,
)

#: The trace files the viewer shows, in the order errors are listed.
TRACE_FILES: tuple[str, ...] = (EXECUTIONS_FILE, JUDGED_FILE, FORKS_FILE, REPLAYS_FILE)


@dataclass
class LineError:
    """A line that could not be read: file, line number and what was wrong."""

    file: str
    line: int
    message: str

    def row(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, None when there is no such file; InputError when it is not one."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def check_run_dir(run_dir: Path) -> Path:
    """The run directory, or InputError saying why it is not one."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise InputError(f"{run_dir}: not found (expected a run directory from `branchpoint run`)")
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a directory (expected a run directory holding {EXECUTIONS_FILE})")
    if not any((run_dir / name).is_file() for name in TRACE_FILES):
        raise InputError(
            f"{run_dir}: not a run directory (none of {', '.join(TRACE_FILES)} is in it; "
            "`branchpoint run SPEC.yaml --out DIR` writes one)"
        )
    return run_dir


def iter_lines(
    path: Path, start: int = 0, first_line: int = 1, whole_only: bool = False
) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """(line number, byte offset, bytes, error) for each line from byte `start` (line number
    `first_line`); an over-long line gives its error. `whole_only`: stop before a last line
    without its newline (a line still being written by a running run)."""
    too_long: list[int] = []
    with path.open("rb") as fh:
        fh.seek(start)
        lines = iter_raw_lines(fh, path, MAX_LINE_BYTES, on_too_long=too_long.append)
        while True:
            try:
                lineno, raw = next(lines)
            except StopIteration:
                break
            while too_long:
                yield too_long.pop(0) + first_line - 1, -1, None, f"longer than {MAX_LINE_BYTES} bytes"
            if whole_only and not raw.endswith(b"\n"):
                return
            yield lineno + first_line - 1, fh.tell() - len(raw), raw, None
        while too_long:
            yield too_long.pop(0) + first_line - 1, -1, None, f"longer than {MAX_LINE_BYTES} bytes"


def read_record_at(path: Path, offset: int, lineno: int, passages: PassageResolver | None = None) -> ExecutionRecord:
    """The validated record on the line at `offset`, its passages put back from the run's passage
    store (`passages`); TraceError naming file and line otherwise."""
    with path.open("rb") as fh:
        fh.seek(offset)
        raw = fh.readline(MAX_LINE_BYTES + 1)
    obj = parse_json_line(raw, path, lineno)
    if obj is None:
        raise TraceError(f"{path} line {lineno}: blank line")
    if passages is not None:
        passages.resolve(obj, f"{path} line {lineno}")
    try:
        return ExecutionRecord.model_validate(obj)
    except ValidationError as exc:
        raise TraceError(f"{path} line {lineno}: {describe_validation_error(exc)}") from None
