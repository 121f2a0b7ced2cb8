"""`branchpoint runs repair RUN_DIR`: move a run's damaged trace lines into `quarantine.jsonl`.

A line of `passages.jsonl`, `executions.jsonl`, `forks.jsonl` or `replays.jsonl` is damaged when
it is not UTF-8, not JSON, not an object, longer than the readers accept, fails its checksum
(`line_crc32`), is not a valid record (or passage), refers to a passage whose line is damaged, or
is a last line without its newline (a crash mid-append). Such lines make every reader refuse the
folder; `repair` moves them out, the way a database cuts a torn WAL record, but keeps every byte:

* each moved line is appended to `RUN_DIR/quarantine.jsonl` as it was, byte for byte, after a
  JSON header line `{"quarantined": {"file", "line", "offset", "bytes", "reason", "newline_added", "at"}}`
  (`newline_added`: the line had none, one was put after it; `bytes` is its length as it was);
* the quarantine is fsync'ed before each trace file is rewritten without those lines (a temporary
  sibling, fsync'ed, renamed over it), so a repair killed midway loses nothing either;
* the executions the moved lines held are missing from the run now: the next `run` / `fork` redoes
  them (and clears their threads' saved states first, as for any redo).

Lines are read in bounded chunks and copied by offset, so a repair's memory does not grow with
the files (only the passage refs are held). It takes the run folder's lock (one writer).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from pydantic import ValidationError

from branchpoint.diskspace import reporting_no_space
from branchpoint.errors import InputError
from branchpoint.experiments.store import run_lock
from branchpoint.traces import (
    MAX_LINE_BYTES,
    PASSAGES_FILE,
    QUARANTINE_FILE,
    RUN_TRACE_FILES,
    ExecutionRecord,
    TraceError,
    describe_validation_error,
    parse_json_line,
)

#: The trace files in the order they are checked: the passage store first (records need it).
FILES = (PASSAGES_FILE, *(name for name in RUN_TRACE_FILES if name != PASSAGES_FILE))


@dataclass(frozen=True)
class DamagedLine:
    """One line that `repair` moves: its file, number, byte range and why it is damaged."""

    file: str
    line: int
    offset: int
    size: int
    reason: str


@dataclass
class Repair:
    """What a repair found (and, unless it was a dry run, moved)."""

    run_dir: Path
    damaged: list[DamagedLine] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)
    moved: bool = False

    def to_json(self) -> dict[str, object]:
        """A JSON-ready summary (what `--json` prints)."""
        return {
            "run_dir": str(self.run_dir),
            "moved": self.moved,
            "quarantine": str(self.run_dir / QUARANTINE_FILE),
            "lines": self.lines,
            "damaged": [d.__dict__ for d in self.damaged],
        }


def _lines(fh: BinaryIO) -> Iterator[tuple[int, int, int, bytes | None]]:
    """(line number, offset, length, bytes) of each line; bytes is None for a line longer than
    MAX_LINE_BYTES, whose rest is skipped in bounded chunks."""
    lineno = offset = 0
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        lineno += 1
        length = len(raw)
        if length > MAX_LINE_BYTES:
            while not raw.endswith(b"\n") and (raw := fh.readline(1 << 20)):
                length += len(raw)
            yield lineno, offset, length, None
        else:
            yield lineno, offset, length, raw
        offset += length


def _reason(name: str, lineno: int, raw: bytes | None, refs: set[str]) -> str | None:
    """Why a line of trace file `name` is damaged, or None when it is sound. A sound passage
    line adds its ref to `refs`; a record line needs the refs it names to be there."""
    if raw is None:
        return f"longer than {MAX_LINE_BYTES} bytes"
    if not raw.endswith(b"\n"):
        return f"the last line ({len(raw)} bytes) has no newline: a crash mid-append"
    try:
        obj = parse_json_line(raw, name, lineno)
    except TraceError as exc:
        return str(exc).removeprefix(f"{name} line {lineno}: ")
    if obj is None:
        return None
    if name == PASSAGES_FILE:
        if not isinstance(obj.get("ref"), str) or not isinstance(obj.get("text"), str):
            return 'expected {"ref": str, "text": str}'
        refs.add(obj["ref"])
        return None
    try:
        record = ExecutionRecord.model_validate(obj)
    except ValidationError as exc:
        return describe_validation_error(exc)
    for step in record.steps:
        for doc in step.retrieved:
            ref = (doc.model_extra or {}).get("text_ref")
            if ref is not None and ref not in refs:
                return f"passage {ref!r} is not in {PASSAGES_FILE} (its line is damaged or gone)"
    return None


def find_damage(run_dir: str | Path) -> Repair:
    """Every damaged line of a run's trace files (read only; passages first: records need them)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a directory (expected a run directory from `branchpoint run`)")
    found = Repair(run_dir)
    refs: set[str] = set()
    for name in FILES:
        path = run_dir / name
        if not path.is_file():
            continue
        count = 0
        with path.open("rb") as fh:
            for lineno, offset, length, raw in _lines(fh):
                count += 1
                reason = _reason(name, lineno, raw, refs)
                if reason is not None:
                    found.damaged.append(DamagedLine(name, lineno, offset, length, reason))
        found.lines[name] = count
    return found


def _copy_range(src: BinaryIO, dst: BinaryIO, offset: int, size: int) -> None:
    src.seek(offset)
    left = size
    while left > 0:
        chunk = src.read(min(left, 1 << 20))
        if not chunk:
            break
        dst.write(chunk)
        left -= len(chunk)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _quarantine(run_dir: Path, damaged: list[DamagedLine]) -> None:
    """Append every damaged line, as it was, after its header, to the quarantine; fsync it."""
    at = datetime.now(UTC).isoformat(timespec="seconds")
    with (run_dir / QUARANTINE_FILE).open("ab") as out:
        for name in FILES:
            lines = [d for d in damaged if d.file == name]
            if not lines:
                continue
            with (run_dir / name).open("rb") as src:
                for d in lines:
                    src.seek(d.offset + d.size - 1)
                    newline = src.read(1) == b"\n"
                    header = {
                        "quarantined": {
                            "file": d.file,
                            "line": d.line,
                            "offset": d.offset,
                            "bytes": d.size,
                            "reason": d.reason,
                            "newline_added": not newline,
                            "at": at,
                        }
                    }
                    out.write(json.dumps(header, ensure_ascii=False).encode("utf-8") + b"\n")
                    _copy_range(src, out, d.offset, d.size)
                    if not newline:
                        out.write(b"\n")
        out.flush()
        os.fsync(out.fileno())


def _rewrite_without(path: Path, damaged: list[DamagedLine]) -> None:
    """Rewrite `path` without the damaged lines: the sound bytes copied by range into a
    temporary sibling, fsync'ed, renamed over it."""
    tmp = path.with_name(f".{path.name}.repair.{os.getpid()}")
    try:
        with path.open("rb") as src, tmp.open("wb") as dst:
            pos = 0
            for d in sorted(damaged, key=lambda d: d.offset):
                _copy_range(src, dst, pos, d.offset - pos)
                pos = d.offset + d.size
            src.seek(pos)
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def repair_run(run_dir: str | Path, *, dry_run: bool = False) -> Repair:
    """Quarantine the damaged lines of a run's trace files (see the module docstring); with
    `dry_run`, only find them. Holds the run folder's lock while it looks and moves."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a directory (expected a run directory from `branchpoint run`)")
    if not any((run_dir / name).is_file() for name in RUN_TRACE_FILES):
        raise InputError(f"{run_dir}: no trace files ({', '.join(RUN_TRACE_FILES)}): not a run directory")
    with run_lock(run_dir, "runs repair") as lock:
        found = find_damage(run_dir)
        if dry_run or not found.damaged:
            return found
        lock.committed = True
        with reporting_no_space(run_dir / QUARANTINE_FILE):
            _quarantine(run_dir, found.damaged)
            for name in FILES:
                lines = [d for d in found.damaged if d.file == name]
                if lines:
                    _rewrite_without(run_dir / name, lines)
            _fsync_dir(run_dir)
        found.moved = True
    return found
