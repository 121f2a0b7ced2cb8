"""The run store: one folder per run with the spec, `executions.jsonl` and the checkpoints.

Records are appended durably one line at a time, keyed by a deterministic `execution_id`, so a
rerun skips what is finished. A torn last line (a crash mid-write) is cut off on open; every
complete line is kept.

One writer: every command that writes a run folder holds its lock (`run_lock`, in
`experiments.runlock`, re-exported here).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from branchpoint.diskspace import is_no_space, no_space, reporting_no_space
from branchpoint.errors import BranchpointError, InputError
from branchpoint.experiments.runlock import (
    LOCK_FILE,
    RunDirBusyError,
    RunLock,
    acquire_run_lock,
    lock_holder,
    run_lock,
)
from branchpoint.redact import redact
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    PASSAGES_FILE,
    SPEC_FILE,
    ExecutionRecord,
    PassageResolver,
    RecordTooLargeError,
    TraceError,
    check_line_size,
    describe_validation_error,
    dump_record,
    iter_raw_lines,
    parse_json_line,
    passage_ref,
    repair_hint,
    with_checksum,
    write_files_atomically,
)

log = logging.getLogger(__name__)

__all__ = [
    "LOCK_FILE",
    "RunDirBusyError",
    "RunLock",
    "RunStore",
    "acquire_run_lock",
    "append_lines",
    "lock_holder",
    "run_lock",
]


class RunStore:
    """A run directory: `spec.yaml`, `executions.jsonl`, `checkpoints.sqlite`, logs, metrics."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self._append_lock = threading.Lock()
        self._passage_refs: set[str] | None = None
        #: The invocation writing through this store: stamped on records that name none (see
        #: `experiments.invocations`).
        self.invocation_id: str | None = None

    @property
    def executions_path(self) -> Path:
        """The append-only trace file of this run."""
        return self.run_dir / EXECUTIONS_FILE

    @property
    def checkpoints_path(self) -> Path:
        """The run's SQLite checkpoint database (one per run)."""
        return self.run_dir / CHECKPOINTS_FILE

    def checkpoint_target(self, override: str | None = None) -> str:
        """Where the run's checkpoints live: a `postgresql://` URL if given, else the run's SQLite file.

        A URL is never written into the run folder (it may hold a password): pass it to every
        command, or set BRANCHPOINT_CHECKPOINTS. Anything but a `.sqlite` path or a
        `postgres://` / `postgresql://` URL is refused (InputError listing the accepted forms).
        """
        from branchpoint.checkpoints.store import check_target

        return check_target(override) if override else str(self.checkpoints_path)

    def check_saved_states(self, checkpoints: str | None = None, files: Sequence[str] = (EXECUTIONS_FILE,)) -> None:
        """Refuse (InputError) a run whose `checkpoints.sqlite` is gone or empty while records of
        `files` list saved states there (`checkpoint_ids`): those states cannot be rebuilt, and a
        run or fork that went on would leave the records pointing at nothing. A `--checkpoints`
        URL is not checked here (`runs verify --checkpoints` does)."""
        from branchpoint.dbfiles import CHECKPOINTS_HINT, has_rows

        if checkpoints is not None:
            return
        rows = has_rows(self.checkpoints_path, "checkpoints", "checkpoint database", CHECKPOINTS_HINT)
        if rows:
            return
        listed = sum(1 for f in files for r in self.iter_records(f) if r.status != "incomplete" and r.checkpoint_ids)
        if listed:
            state = "missing" if rows is None else "empty"
            raise InputError(
                f"{self.checkpoints_path}: {state}, but {listed} recorded executions have their saved states "
                f"there (their checkpoint_ids; a run made with --checkpoints needs it again); {CHECKPOINTS_HINT}"
            )

    def create(self, spec_data: dict[str, Any]) -> None:
        """Make the folder and write the resolved spec beside the traces (atomically)."""
        with reporting_no_space(self.run_dir / SPEC_FILE):
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_files_atomically({self.run_dir / SPEC_FILE: yaml.safe_dump(spec_data, sort_keys=False)})
            self.repair_torn_tail()
            self.repair_torn_tail(PASSAGES_FILE)

    def repair_torn_tail(self, file: str = EXECUTIONS_FILE) -> int:
        """Cut a last line that has no newline (a crash mid-append); returns the bytes removed."""
        path = self.run_dir / file
        if not path.is_file() or path.stat().st_size == 0:
            return 0
        fd = os.open(path, os.O_RDWR)
        try:  # read backwards from the end, never the whole file
            size = os.fstat(fd).st_size
            keep = _complete_size(fd, size)
            if keep != size:
                os.ftruncate(fd, keep)
        finally:
            os.close(fd)
        return size - keep

    def iter_records(self, file: str = EXECUTIONS_FILE) -> Iterator[ExecutionRecord]:
        """The records of one trace file of the store, streamed, in the order they were written.

        A torn last line (a crash mid-append, cut by the next writer) is left out, so reading
        never needs a write first; any other bad line is a TraceError naming file and line.
        """
        path = self.run_dir / file
        if not path.is_file():
            return
        resolver = PassageResolver(self.passages_path)
        with path.open("rb") as fh:
            for lineno, raw in iter_raw_lines(fh, path):
                if not raw.endswith(b"\n"):
                    return  # torn tail
                obj = parse_json_line(raw, path, lineno)
                if obj is None:
                    continue
                try:
                    yield ExecutionRecord.model_validate(resolver.resolve(obj, f"{path} line {lineno}"))
                except ValidationError as exc:
                    raise TraceError(
                        f"{path} line {lineno}: {describe_validation_error(exc)}{repair_hint(path)}"
                    ) from None

    def records(self, file: str = EXECUTIONS_FILE) -> list[ExecutionRecord]:
        """All records of a trace file of the store, in the order they were written."""
        return list(self.iter_records(file))

    def finished_ids(self) -> set[str]:
        """Execution ids already recorded with a final status (`incomplete` ones are redone)."""
        latest: dict[str, str] = {}
        for rec in self.iter_records():  # streamed: memory stays flat on big runs
            latest[rec.execution_id] = rec.status
        return {eid for eid, status in latest.items() if status != "incomplete"}

    @property
    def passages_path(self) -> Path:
        """The run's passage store: each retrieved passage's text once (see `traces.PASSAGES_FILE`)."""
        return self.run_dir / PASSAGES_FILE

    def _known_passages(self) -> set[str]:
        """The refs already in the passage store (read once; its torn tail cut first). Lock held."""
        if self._passage_refs is None:
            self.repair_torn_tail(PASSAGES_FILE)
            refs: set[str] = set()
            if self.passages_path.is_file():
                with self.passages_path.open("rb") as fh:
                    for lineno, raw in iter_raw_lines(fh, self.passages_path):
                        obj = parse_json_line(raw, self.passages_path, lineno)
                        if obj is not None and isinstance(obj.get("ref"), str):
                            refs.add(obj["ref"])
            self._passage_refs = refs
        return self._passage_refs

    def append(self, record: ExecutionRecord, file: str = EXECUTIONS_FILE) -> ExecutionRecord:
        """Append one record durably: whole lines, one writer at a time within this process;
        returns the record as written.

        Each retrieved passage's text goes to the run's passage store once (the record keeps a
        `text_ref`; readers put the text back). Error texts are redacted (`branchpoint.redact`).
        A record whose line would still be longer than readers accept (MAX_LINE_BYTES) is
        recorded as `incomplete` with an error saying so, and a warning is logged, so the run
        goes on and the file stays readable. The record line is written after its passages and
        fsync'ed after the lock is released, so concurrent executions overlap their disk flushes
        (the record is durable when this returns).
        """
        return self.append_many([record], file)[0]

    def append_many(self, records: Sequence[ExecutionRecord], file: str = EXECUTIONS_FILE) -> list[ExecutionRecord]:
        """Append records durably, in order, as `append` does each, with one fsync of the trace
        (and at most one of the passage store) for all of them: a group commit. Each is durable
        when this returns, as after `append`; the run's one writer hands over every record that
        waits, so a wave of executions finishing together costs one disk flush, not one each.

        The batch is atomic: written, then fsync'ed, and on any failure (a full disk) the file
        is cut back to where it was, so no partial line is left for later records to be glued
        onto; a full disk is a NoSpaceError naming the device and the file."""
        path = self.run_dir / file
        lines: list[str] = []
        texts: dict[str, str] = {}
        written: list[ExecutionRecord] = []
        for record in records:
            line, its_texts, as_written = self._line(record, path)
            lines.append(line)
            texts.update(its_texts)
            written.append(as_written)
        with reporting_no_space(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        with self._append_lock:
            known = self._known_passages() if texts else set()
            new = [
                with_checksum(json.dumps({"ref": r, "text": t}, ensure_ascii=False))
                for r, t in texts.items()
                if r not in known
            ]
            if new:  # durable before the records that refer to them
                append_lines(self.passages_path, "".join(new))
                known.update(texts)
            append_lines(path, "".join(lines))
        return written

    def _line(self, record: ExecutionRecord, path: Path) -> tuple[str, dict[str, str], ExecutionRecord]:
        """A record's trace line (passage texts replaced by refs, error redacted, an over-long
        record cut to an `incomplete` one), the passage texts it refers to, and the record as
        written."""
        data = record.model_dump()
        if self.invocation_id and not data.get("invocation"):
            data["invocation"] = record.invocation = self.invocation_id
        if data.get("error"):  # a server's error text may quote the API key (see branchpoint.redact)
            data["error"] = redact(data["error"])
        texts: dict[str, str] = {}
        for step in data.get("steps") or ():
            for doc in step.get("retrieved") or ():
                text = doc.pop("text")
                doc["text_ref"] = ref = passage_ref(text)
                texts[ref] = text
        line = with_checksum(dump_record(ExecutionRecord.model_validate({**data, "steps": _with_empty_texts(data)})))
        try:
            check_line_size(line, record.execution_id, path)
        except RecordTooLargeError as exc:
            log.warning("%s", exc)
            cut = ExecutionRecord.model_validate(
                {
                    **{k: v for k, v in data.items() if k in _IDENTITY_FIELDS},
                    "status": "incomplete",
                    "error": f"not recorded: {exc}",
                }
            )
            return with_checksum(dump_record(cut)), {}, cut
        return line, texts, record


#: What an over-long record keeps when it is recorded as `incomplete` (which execution it is).
_IDENTITY_FIELDS = (
    "execution_id",
    "run_id",
    "condition",
    "question_id",
    "question",
    "answerable",
    "category",
    "gold_answers",
    "stratum",
    "support_group",
    "parent",
    "branch",
    "repeat",
    "history",
    "wall_s",
)


def _with_empty_texts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps of a record dump whose passages refer to the store: `text` is "" beside `text_ref`
    (a reader that ignores references still sees valid documents)."""
    return [
        {**step, "retrieved": [{**doc, "text": ""} for doc in step.get("retrieved") or ()]}
        for step in data.get("steps") or ()
    ]


def _complete_size(fd: int, size: int) -> int:
    """The size of a file's complete lines: `size` if it ends with a newline, else the offset
    just past its last newline (0 if none), read backwards in chunks."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        cut = os.pread(fd, pos - start, start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0


def append_lines(path: Path, text: str) -> None:
    """Append whole lines to `path` and fsync, all or nothing: on any failure the file is cut back
    to its size before (a torn last line that a killed writer left is cut first), so a later
    append never continues a partial line. A full disk is `diskspace.no_space`, another failed
    write an InputError naming the file."""
    data = text.encode("utf-8")
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _write_error(path, exc) from None
    try:
        size = os.fstat(fd).st_size
        start = _complete_size(fd, size)
        try:
            if start != size:
                os.ftruncate(fd, start)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException as exc:
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError:
                log.warning("%s: could not cut a failed append back to %d bytes", path, start)
            if isinstance(exc, OSError):
                raise _write_error(path, exc) from None
            raise
    finally:
        os.close(fd)


def _write_error(path: Path, exc: OSError) -> BranchpointError:
    """A failed write as one line: no space (naming the device), or the file and the OS's reason."""
    if is_no_space(exc):
        return no_space(path)
    return InputError(f"{path}: cannot write ({exc.strerror or exc})")
