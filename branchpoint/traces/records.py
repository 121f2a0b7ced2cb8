"""Reading and writing trace files: validated records one at a time, atomic rewrites, durable
checksummed appends, and the size limit every line is held to."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from branchpoint.traces.files import PASSAGES_FILE
from branchpoint.traces.jsonl import (
    MAX_LINE_BYTES,
    TraceError,
    describe_validation_error,
    iter_json_lines,
    repair_hint,
    with_checksum,
)
from branchpoint.traces.passages import PassageResolver
from branchpoint.traces.schema import ExecutionRecord


def iter_records(path: str | Path) -> Iterator[ExecutionRecord]:
    """Validated records one at a time (a large file is never held whole); errors as `read_records`.

    Passages stored once in the run's passage store (`passages.jsonl` beside the file) are put
    back into the records; inline passages are read as they are.
    """
    resolver = PassageResolver(Path(path).parent / PASSAGES_FILE)
    for lineno, obj in iter_json_lines(path):
        try:
            yield ExecutionRecord.model_validate(resolver.resolve(obj, f"{path} line {lineno}"))
        except ValidationError as exc:
            raise TraceError(f"{path} line {lineno}: {describe_validation_error(exc)}{repair_hint(path)}") from None


def read_records(path: str | Path) -> list[ExecutionRecord]:
    """Read and validate every line of a trace file; errors name the file, line and field."""
    return list(iter_records(path))


def dump_record(record: ExecutionRecord) -> str:
    """One JSON line (no trailing newline) for a record."""
    return record.model_dump_json(exclude_none=False)


def write_files_atomically(files: dict[Path, str]) -> None:
    """Write every file to a temporary sibling first, then rename each over its target."""
    tmps: dict[Path, Path] = {}
    try:
        for target, text in files.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp.{os.getpid()}")
            tmps[target] = tmp
            with tmp.open("w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for target, tmp in tmps.items():
            os.replace(tmp, target)
    finally:
        for tmp in tmps.values():
            if tmp.exists():
                tmp.unlink()


class RecordTooLargeError(TraceError):
    """A record whose line would be longer than the readers accept (MAX_LINE_BYTES)."""


def check_line_size(line: str, execution_id: str, where: str | Path) -> int:
    """The line's size in bytes; RecordTooLargeError when readers would refuse it."""
    size = len(line.encode("utf-8"))
    if size > MAX_LINE_BYTES:
        raise RecordTooLargeError(
            f"{where}: the record of execution {execution_id[:12]} is {size} bytes, more than the "
            f"{MAX_LINE_BYTES} bytes one trace line may have (readers would refuse the file)"
        )
    return size


def write_records(path: str | Path, records: list[ExecutionRecord]) -> None:
    """Write records atomically: to a temporary file beside `path`, then rename over it.

    A record longer than MAX_LINE_BYTES is a RecordTooLargeError (nothing is written).
    """
    lines = [with_checksum(dump_record(ExecutionRecord.model_validate(rec.model_dump()))) for rec in records]
    for rec, line in zip(records, lines):
        check_line_size(line, rec.execution_id, path)
    write_files_atomically({Path(path): "".join(lines)})


def append_record(path: str | Path, record: ExecutionRecord) -> None:
    """Append one validated, checksummed record durably (flush + fsync): a crash loses at most this line."""
    line = with_checksum(dump_record(ExecutionRecord.model_validate(record.model_dump())))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
