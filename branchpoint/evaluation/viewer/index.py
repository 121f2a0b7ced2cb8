"""The viewer's index of a run directory: one small row per execution, read from the traces only.

The index reads the files of the trace contract (`branchpoint.traces`) and the evaluation's
outputs beside them, never the checkpoint database:

- `executions.jsonl` (the spec's executions), `judged.jsonl` (the same records with the judges'
  labels, from `branchpoint evaluate`), `forks.jsonl` (fork-study branches) and `replays.jsonl`
  (replays: records with a `parent` and kind `replay`), with passage texts from the run's
  passage store (`passages.jsonl`) where steps refer to it by `text_ref`;
- `metrics.json` (the judge and the TPC weights λ, μ) and `value.json` (the fork study's judge,
  reward and roles; forecasts files it scored).

It loads lazily, so a 10,000-execution run shows its first table at once: when the viewer
serves, the phases run in a background thread and rows appear as they are read. Phase 1 reads
the executions' table fields only (the judged copy when it is at least as new as the traces, so
the outcomes are right from the start); then the other executions file, every branch and replay
(fully validated), and last a full schema check of the phase-1 lines. A record's steps are read
from its file offset when it is opened. A line that breaks the schema becomes an error row
(file, line, message); every other line is still shown. When one `execution_id` appears on several lines (an append-only run
store after a retry) the last one wins, as in the metrics.

Outcomes and costs are the evaluation's (`tally.record_outcome`, `cost.execution_cost`): the
judge is `--judge`, else the judge of metrics.json, else `rule`; a record without that judge's
label gets the offline `rule` judge's, computed here (its row says so).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.evaluation.viewer.files import (
    TRACE_FILES,
    LineError,
    check_run_dir,
    iter_lines,
    read_json_object,
    read_record_at,
)
from branchpoint.evaluation.viewer.requests import RequestIndex
from branchpoint.evaluation.viewer.rows import (
    COLUMNS,
    ROW_OUTCOMES,
    RowFields,
    table_row,
    value_headline,
)
from branchpoint.traces import (
    EXECUTIONS_FILE,
    FORKS_FILE,
    JUDGED_FILE,
    METRICS_FILE,
    PASSAGES_FILE,
    REBUILT_REQUESTS_FILE,
    REPLAYS_FILE,
    REQUESTS_FILE,
    VALUE_FILE,
    ExecutionRecord,
    PassageResolver,
    TraceError,
    describe_validation_error,
    parse_json_line,
)


@dataclass
class Entry:
    """Where a record lives and its table row."""

    row: dict[str, Any]
    file: str
    offset: int
    line: int
    judged_offset: int | None = None  # its line in judged.jsonl, when its labels come from there
    answer: tuple[str, str | None] = ("ok", None)  # (status, final answer): labels hold while unchanged


@dataclass
class Progress:
    """What the background phases have done (the page shows it while the index fills)."""

    phase: str = "starting"
    done: bool = False
    version: int = 0  # bumped whenever existing rows change (the page then reloads them)
    superseded: int = 0  # lines replaced by a later line with the same execution_id


@dataclass
class RunIndex:
    """Rows of every record of a run directory, filled in phases (see the module docstring)."""

    run_dir: Path
    judge: str | None = None
    metrics: dict[str, Any] | None = None
    value: dict[str, Any] | None = None
    cfg: MetricsConfig = field(default_factory=MetricsConfig)
    entries: dict[str, Entry] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # row order: first appearance
    kids: dict[str, list[str]] = field(default_factory=dict)  # parent id -> branch / replay ids
    errors: list[LineError] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    _rule_cache: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    passages: PassageResolver = field(init=False)
    #: file -> (byte offset, line number) after the last whole line read: where `refresh` goes on
    read_to: dict[str, tuple[int, int]] = field(default_factory=dict)
    _refresh_lock: threading.Lock = field(default_factory=threading.Lock)
    _refreshed_at: float = 0.0

    requests: RequestIndex = field(init=False)
    rebuilt_requests: RequestIndex = field(init=False)

    def __post_init__(self) -> None:
        self.passages = PassageResolver(self.run_dir / PASSAGES_FILE)  # read on the first reference
        self.requests = RequestIndex(self.run_dir)  # requests.jsonl, indexed on the first open
        self.rebuilt_requests = RequestIndex(self.run_dir, REBUILT_REQUESTS_FILE)  # `requests rebuild`

    _failure: str | None = None

    @classmethod
    def open(cls, run_dir: Path, judge: str | None = None) -> RunIndex:
        """Check the folder and read metrics.json / value.json; no trace is read yet."""
        run_dir = check_run_dir(Path(run_dir))
        metrics = read_json_object(run_dir / METRICS_FILE)
        value = read_json_object(run_dir / VALUE_FILE)
        chosen = judge or (metrics or {}).get("judge") or ((value or {}).get("settings") or {}).get("judge")
        cfg = MetricsConfig(
            **{k: metrics[k] for k in ("lam", "mu") if metrics and isinstance(metrics.get(k), (int, float))}
        )
        return cls(run_dir=run_dir, judge=str(chosen or DEFAULT_JUDGE), metrics=metrics, value=value, cfg=cfg)

    # ---- reading ---------------------------------------------------------------------------

    def path(self, file: str) -> Path:
        return self.run_dir / file

    def _primary(self) -> str | None:
        """The file phase 1 reads: judged.jsonl when at least as new as executions.jsonl."""
        execs, judged = self.path(EXECUTIONS_FILE), self.path(JUDGED_FILE)
        if judged.is_file() and (not execs.is_file() or judged.stat().st_mtime >= execs.stat().st_mtime):
            return JUDGED_FILE
        return EXECUTIONS_FILE if execs.is_file() else None

    def _scan(
        self, file: str, model: type[BaseModel], start: tuple[int, int] = (0, 1), whole_only: bool = False
    ) -> Iterator[tuple[int, int, Any]]:
        """(line, offset, validated object) for each readable line from `start` (byte offset,
        line number; `whole_only`: not a last line without its newline); errors are recorded,
        and where the whole lines end (`read_to`, where `refresh` goes on)."""
        path = self.path(file)
        if not path.is_file():
            return
        for lineno, offset, raw, problem in iter_lines(path, start[0], start[1], whole_only=whole_only):
            if raw is None:
                self._error(file, lineno, problem or "unreadable")
                continue
            if raw.endswith(b"\n"):
                with self.lock:
                    self.read_to[file] = (offset + len(raw), lineno + 1)
            try:
                obj = parse_json_line(raw, path, lineno)
            except TraceError as exc:
                self._error(file, lineno, str(exc).removeprefix(f"{path} line {lineno}: "))
                continue
            if obj is None:
                continue
            try:
                if model is ExecutionRecord:  # the table's fields need no passage texts
                    self.passages.resolve(obj, f"{path} line {lineno}")
                yield lineno, offset, model.model_validate(obj)
            except TraceError as exc:
                self._error(file, lineno, str(exc).removeprefix(f"{path} line {lineno}: "))
            except ValidationError as exc:
                self._error(file, lineno, describe_validation_error(exc))

    def _error(self, file: str, line: int, message: str) -> None:
        with self.lock:
            if not any(e.file == file and e.line == line for e in self.errors):
                self.errors.append(LineError(file, line, message))
                self.errors.sort(key=lambda e: (TRACE_FILES.index(e.file) if e.file in TRACE_FILES else 9, e.line))

    def make_row(self, rec: Any, file: str, line: int) -> dict[str, Any]:
        """The table row of a record under this index's judge and weights (`rows.table_row`)."""
        return table_row(rec, file, line, self.judge or DEFAULT_JUDGE, self.cfg, self._rule_cache)

    def _put(self, rec: Any, file: str, line: int, offset: int, judged_offset: int | None = None) -> None:
        entry = Entry(self.make_row(rec, file, line), file, offset, line, judged_offset, (rec.status, rec.final_answer))
        self._store(rec.execution_id, entry, superseding=True)

    def _store(self, execution_id: str, entry: Entry, *, superseding: bool) -> None:
        """Add or replace a row; `superseding`: a replacement counts as a later line for the same
        id. The page reloads its rows when one changes beyond its file and line."""
        with self.lock:
            old = self.entries.get(execution_id)
            if old is None:
                self.order.append(execution_id)
                if entry.row["parent"] is not None:
                    self.kids.setdefault(entry.row["parent"], []).append(execution_id)
            else:
                if superseding:
                    self.progress.superseded += 1
                moved = ("file", "line")
                if any(old.row[k] != entry.row[k] for k in entry.row if k not in moved):
                    self.progress.version += 1
            self.entries[execution_id] = entry

    def _phase(self, name: str) -> None:
        with self.lock:
            self.progress.phase = name

    def read_primary(self) -> None:
        """Phase 1: the table fields of the executions (judged copy when current)."""
        primary = self._primary()
        if primary is None:
            return
        self._phase(f"reading {primary}")
        for lineno, offset, rec in self._scan(primary, RowFields):
            self._put(rec, primary, lineno, offset, offset if primary == JUDGED_FILE else None)

    def read_rest(self) -> None:
        """Phases 2-4: the other executions file, branches and replays, then a full check."""
        primary = self._primary()
        if primary == JUDGED_FILE and self.path(EXECUTIONS_FILE).is_file():
            self._phase(f"checking {EXECUTIONS_FILE} against {JUDGED_FILE}")
            self._reconcile_executions()
        elif primary == EXECUTIONS_FILE and self.path(JUDGED_FILE).is_file():
            self._phase(f"carrying labels from {JUDGED_FILE} (older than {EXECUTIONS_FILE})")
            self._carry_labels()
        for file in (FORKS_FILE, REPLAYS_FILE):
            if self.path(file).is_file():
                self._phase(f"reading {file}")
                for lineno, offset, rec in self._scan(file, ExecutionRecord):
                    self._put(rec, file, lineno, offset)
        if primary is not None:
            self._phase(f"checking every line of {primary} against the trace schema")
            for _ in self._scan(primary, ExecutionRecord):
                pass
        with self.lock:
            self.progress.phase = "done"
            self.progress.done = True
            self.progress.version += 1

    def _reconcile_executions(self) -> None:
        """Rows point at executions.jsonl (the record of truth; its last line per id wins); labels
        stay from judged.jsonl where the status and final answer are unchanged (as
        `evaluate.carry_judgments`), else they are dropped."""
        with self.lock:
            judged = dict(self.entries)
            self.progress.superseded = 0  # judged.jsonl mirrors the traces' repeated lines
        seen: set[str] = set()
        for lineno, offset, rec in self._scan(EXECUTIONS_FILE, RowFields):
            key = (rec.status, rec.final_answer)
            was = judged.get(rec.execution_id)
            if was is not None and was.answer == key:
                row = {**was.row, "file": EXECUTIONS_FILE, "line": lineno}
                entry = Entry(row, EXECUTIONS_FILE, offset, lineno, was.judged_offset, key)
            else:
                entry = Entry(self.make_row(rec, EXECUTIONS_FILE, lineno), EXECUTIONS_FILE, offset, lineno, None, key)
            self._store(rec.execution_id, entry, superseding=rec.execution_id in seen)
            seen.add(rec.execution_id)

    def _carry_labels(self) -> None:
        """Labels from an older judged.jsonl, for executions whose status and answer are unchanged."""
        for _lineno, offset, rec in self._scan(JUDGED_FILE, RowFields):
            with self.lock:
                old = self.entries.get(rec.execution_id)
            if old is None or old.answer != (rec.status, rec.final_answer):
                continue
            row = self.make_row(rec, old.file, old.line)
            with self.lock:  # the page reloads its rows when the index is done
                old.row, old.judged_offset = row, offset

    def build(self) -> RunIndex:
        """Every phase, in this thread (exports and tests)."""
        self.read_primary()
        self.read_rest()
        return self

    def start(self) -> RunIndex:
        """Every phase in a background thread (the server): rows appear as they are read, so the
        page draws its first rows at once and fills in while the rest is read."""

        def run() -> None:
            try:
                self.read_primary()
                self.read_rest()
            except Exception as exc:  # shown on the page; the rows read so far stay usable
                with self.lock:
                    self._failure = f"{type(exc).__name__}: {exc}"
                    self.progress.phase = f"stopped: {self._failure}"
                    self.progress.done = True

        self._thread = threading.Thread(target=run, name="branchpoint-viewer-index", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    # ---- answers -----------------------------------------------------------------------------

    def refresh(self, every_s: float = 0.5) -> int:
        """Read the whole lines appended to the trace files since they were read (a running run
        or fork study); at most once per `every_s`, and only once the index is done. Returns the
        number of records added or replaced."""
        if not self.progress.done or self._failure is not None:
            return 0
        now = time.monotonic()
        if now - self._refreshed_at < every_s or not self._refresh_lock.acquire(blocking=False):
            return 0
        try:
            self._refreshed_at = now
            n = 0
            for file in (EXECUTIONS_FILE, FORKS_FILE, REPLAYS_FILE):
                path = self.path(file)
                start = self.read_to.get(file, (0, 1))
                if not path.is_file() or path.stat().st_size <= start[0]:
                    continue
                with self.lock:  # a line read while it was being written is read again now
                    self.errors = [e for e in self.errors if e.file != file or e.line < start[1]]
                for lineno, offset, rec in self._scan(file, ExecutionRecord, start, whole_only=True):
                    self._put(rec, file, lineno, offset)
                    n += 1
            return n
        finally:
            self._refresh_lock.release()

    def rows(self, since: int = 0, limit: int | None = None) -> dict[str, Any]:
        """Rows from position `since` on, at most `limit` of them (lists in COLUMNS order), with
        progress and errors."""
        with self.lock:
            ids = self.order[since:] if limit is None else self.order[since : since + limit]
            rows = [[self.entries[i].row[c] for c in COLUMNS] for i in ids]
            return {
                "columns": list(COLUMNS),
                "since": since,
                "rows": rows,
                "total": len(self.order),
                "done": self.progress.done,
                "phase": self.progress.phase,
                "version": self.progress.version,
                "superseded": self.progress.superseded,
                "errors": [e.row() for e in self.errors],
            }

    def entry(self, execution_id: str) -> Entry | None:
        with self.lock:
            return self.entries.get(execution_id)

    def record(self, execution_id: str) -> ExecutionRecord:
        """The full record of an execution with its judged labels; KeyError if unknown."""
        entry = self.entry(execution_id)
        if entry is None:
            raise KeyError(execution_id)
        record = read_record_at(self.path(entry.file), entry.offset, entry.line, self.passages)
        if entry.judged_offset is not None and entry.file != JUDGED_FILE:
            try:
                judged = read_record_at(self.path(JUDGED_FILE), entry.judged_offset, 0, self.passages)
                record.judgments = judged.judgments + [j for j in record.judgments if j not in judged.judgments]
            except TraceError:
                pass
        return record

    def children(self, execution_id: str) -> list[dict[str, Any]]:
        """Rows of the branches and replays whose parent is `execution_id`."""
        with self.lock:
            return [self.entries[i].row for i in self.kids.get(execution_id, [])]

    def summary(self) -> dict[str, Any]:
        """What the page's header shows: the folder, files, judge, weights, headline metrics."""
        files = {
            name: os.path.getsize(self.path(name))
            for name in (*TRACE_FILES, METRICS_FILE, VALUE_FILE, REQUESTS_FILE)
            if self.path(name).is_file()
        }
        m = self.metrics or {}
        headline = None
        if m:
            headline = {k: m.get(k) for k in ("n", "answer_accuracy", "abstention_accuracy", "tpc", "n_incomplete")}
            headline["by_condition"] = {
                label: {k: c.get(k) for k in ("n", "answer_accuracy", "abstention_accuracy", "tpc")}
                for label, c in (m.get("by_condition") or {}).items()
            }
        return {
            "run_dir": str(self.run_dir),
            "name": self.run_dir.name,
            "files": files,
            "judge": self.judge,
            "lam": self.cfg.lam,
            "mu": self.cfg.mu,
            "metrics": headline,
            "value": value_headline(self.value),
            "columns": list(COLUMNS),
            "outcomes": list(ROW_OUTCOMES),
        }
