"""The run store: one folder per run with the spec, `executions.jsonl` and the checkpoints.

Records are appended durably one line at a time, keyed by a deterministic `execution_id`, so a
rerun skips what is finished. A torn last line (a crash mid-write) is cut off on open; every
complete line is kept.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import yaml

from branchpoint.traces import (
    EXECUTIONS_FILE,
    ExecutionRecord,
    dump_record,
    iter_records,
    read_records,
    write_files_atomically,
)


class RunStore:
    """A run directory: `spec.yaml`, `executions.jsonl`, `checkpoints.sqlite`, logs, metrics."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self._append_lock = threading.Lock()

    @property
    def executions_path(self) -> Path:
        """The append-only trace file of this run."""
        return self.run_dir / EXECUTIONS_FILE

    @property
    def checkpoints_path(self) -> Path:
        """The run's SQLite checkpoint database (one per run)."""
        return self.run_dir / "checkpoints.sqlite"

    def checkpoint_target(self, override: str | None = None) -> str:
        """Where the run's checkpoints live: a `postgresql://` URL if given, else the run's SQLite file.

        A URL is never written into the run folder (it may hold a password): pass it to every
        command, or set BRANCHPOINT_CHECKPOINTS.
        """
        return override or str(self.checkpoints_path)

    def create(self, spec_data: dict) -> None:
        """Make the folder and write the resolved spec beside the traces (atomically)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_files_atomically({self.run_dir / "spec.yaml": yaml.safe_dump(spec_data, sort_keys=False)})
        self.repair_torn_tail()

    def repair_torn_tail(self, file: str = EXECUTIONS_FILE) -> int:
        """Cut a last line that has no newline (a crash mid-append); returns the bytes removed."""
        path = self.run_dir / file
        if not path.is_file() or path.stat().st_size == 0:
            return 0
        with path.open("rb") as fh:  # read backwards from the end, never the whole file
            size = fh.seek(0, os.SEEK_END)
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return 0
            keep, pos = 0, size
            while pos > 0:
                start = max(0, pos - 65536)
                fh.seek(start)
                chunk = fh.read(pos - start)
                cut = chunk.rfind(b"\n")
                if cut >= 0:
                    keep = start + cut + 1
                    break
                pos = start
        os.truncate(path, keep)
        return size - keep

    def records(self) -> list[ExecutionRecord]:
        """All records in the store, in the order they were written."""
        if not self.executions_path.is_file():
            return []
        return read_records(self.executions_path)

    def finished_ids(self) -> set[str]:
        """Execution ids already recorded with a final status (`incomplete` ones are redone)."""
        latest: dict[str, str] = {}
        if not self.executions_path.is_file():
            return set()
        for rec in iter_records(self.executions_path):  # streamed: memory stays flat on big runs
            latest[rec.execution_id] = rec.status
        return {eid for eid, status in latest.items() if status != "incomplete"}

    def append(self, record: ExecutionRecord, file: str = EXECUTIONS_FILE) -> None:
        """Append one record durably: whole lines, one writer at a time within this process.

        The line is validated and serialised before taking the lock, and fsync'ed after
        releasing it, so concurrent executions overlap their disk flushes (the record is
        durable when this returns).
        """
        line = dump_record(ExecutionRecord.model_validate(record.model_dump())) + "\n"
        path = self.run_dir / file
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            with self._append_lock:
                fh.write(line)
                fh.flush()
            os.fsync(fh.fileno())
