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

Outcomes and costs are the evaluation's (`tally.record_outcome`, `tally.execution_cost`): the
judge is `--judge`, else the judge of metrics.json, else `rule`; a record without that judge's
label gets the offline `rule` judge's, computed here (its row says so).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from branchpoint.errors import InputError
from branchpoint.evaluation.evaluate import JUDGED_FILE, METRICS_FILE
from branchpoint.evaluation.judges import UNPARSEABLE, build_judge
from branchpoint.evaluation.tally import (
    MetricsConfig,
    category_key,
    condition_label,
    evidence_counts,
    execution_cost,
    judgment_label,
    record_outcome,
)
from branchpoint.evaluation.value.study import VALUE_FILE
from branchpoint.traces import (
    EXECUTIONS_FILE,
    FORKS_FILE,
    MAX_LINE_BYTES,
    PASSAGES_FILE,
    REPLAYS_FILE,
    ExecutionRecord,
    PassageResolver,
    TraceError,
    describe_validation_error,
    iter_raw_lines,
    parse_json_line,
)

TRACE_FILES: tuple[str, ...] = (EXECUTIONS_FILE, JUDGED_FILE, FORKS_FILE, REPLAYS_FILE)
DEFAULT_JUDGE = "rule"
#: Outcomes a row can have: the evaluation's four, plus records it never scores.
ROW_OUTCOMES: tuple[str, ...] = (
    "correct_answer", "wrong_answer", "correct_abstention", "failed_abstention", "incomplete", "unparseable",
)  # fmt: skip
#: Columns of a row as the page receives them (one list per row, in this order).
COLUMNS: tuple[str, ...] = (
    "id", "kind", "file", "line", "condition", "question_id", "question", "answerable", "category", "status",
    "outcome", "judge", "labels", "evidence", "searches", "input_tokens", "output_tokens", "cost", "wall_s",
    "parent", "checkpoint", "boundary", "branch", "repeat", "checkpoints", "answer", "error",
)  # fmt: skip
_ROW_FIELDS = (
    "execution_id", "run_id", "condition", "question_id", "question", "answerable", "category", "gold_answers",
    "parent", "branch", "repeat", "status", "final_answer", "search_calls", "input_tokens", "output_tokens",
    "reasoning_tokens", "wall_s", "checkpoint_ids", "judgments", "error", "kind",
)  # fmt: skip

#: The table fields of an ExecutionRecord, with the contract's own types (the rest is skipped, so
#: phase 1 does not build steps and passages; the full record is validated later).
RowFields: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "RowFields",
    __config__=ConfigDict(extra="ignore"),
    **{
        name: (ExecutionRecord.model_fields[name].annotation, ExecutionRecord.model_fields[name])
        for name in _ROW_FIELDS
    },
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
class LineError:
    """A line that could not be read: file, line number and what was wrong."""

    file: str
    line: int
    message: str

    def row(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


@dataclass
class Progress:
    """What the background phases have done (the page shows it while the index fills)."""

    phase: str = "starting"
    done: bool = False
    version: int = 0  # bumped whenever existing rows change (the page then reloads them)
    superseded: int = 0  # lines replaced by a later line with the same execution_id


def _read_json(path: Path) -> dict[str, Any] | None:
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


def iter_lines(path: Path) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """(line number, byte offset, bytes, error) for each line; an over-long line gives its error."""
    too_long: list[int] = []
    with path.open("rb") as fh:
        lines = iter_raw_lines(fh, path, MAX_LINE_BYTES, on_too_long=too_long.append)
        while True:
            try:
                lineno, raw = next(lines)
            except StopIteration:
                break
            while too_long:
                yield too_long.pop(0), -1, None, f"longer than {MAX_LINE_BYTES} bytes"
            yield lineno, fh.tell() - len(raw), raw, None
        while too_long:
            yield too_long.pop(0), -1, None, f"longer than {MAX_LINE_BYTES} bytes"


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


def _rule_labels(rec: Any, cache: dict[tuple[Any, ...], list[Any]] | None = None) -> list[Any]:
    """The `rule` judge's answer and abstention labels of a record (or table row), judged on a
    copy without its steps: the rule judge reads steps only for evidence labels, not needed here.
    Identical answers to the same question share one judgment (`cache`), as in the value study."""
    key = (rec.question, rec.answerable, rec.category, tuple(rec.gold_answers), rec.status, rec.final_answer)
    if cache is not None and key in cache:
        return cache[key]
    record = ExecutionRecord.model_construct(**{name: getattr(rec, name) for name in _ROW_FIELDS}, steps=[])
    labels = [j for j in build_judge(DEFAULT_JUDGE).judge_many([record])[0] if j.kind in ("answer", "abstention")]
    if cache is not None:
        cache[key] = labels
    return labels


def _labels_text(judgments: list[Any]) -> list[str]:
    """`judge:kind=LABEL` for each judge's last answer / abstention label."""
    last: dict[tuple[str, str], str] = {}
    for j in judgments:
        if j.kind in ("answer", "abstention"):
            last[(j.judge, j.kind)] = j.label.strip().upper()
    return [f"{judge}:{kind}={label}" for (judge, kind), label in sorted(last.items())]


def _evidence(rec: Any, judge: str) -> str:
    """`P+/N-`: positive and negative documents (`tally.evidence_counts`) of `judge`, or of the
    last judge that gave evidence labels when `judge` gave none; "" without evidence labels."""
    judges = [j.judge for j in rec.judgments if j.kind == "evidence"]
    if not judges:
        return ""
    positive, negative, _ = evidence_counts(rec, judge if judge in judges else judges[-1])
    return f"{positive}+/{negative}-"


class _Judged:
    """A record's identity fields with other judgments (what `record_outcome` reads)."""

    def __init__(self, rec: Any, judgments: list[Any]) -> None:
        self.execution_id = rec.execution_id
        self.answerable = rec.answerable
        self.judgments = judgments


def _decide(rec: Any, judge: str) -> str | None:
    """The outcome under `judge`, "unparseable", or None when the judge gave no deciding label."""
    try:
        label = judgment_label(rec, judge, "answer" if rec.answerable else "abstention")
    except InputError:
        return None
    return "unparseable" if label == UNPARSEABLE else record_outcome(rec, judge)


def outcome_of(rec: Any, judge: str, cache: dict[tuple[Any, ...], list[Any]] | None = None) -> tuple[str, str]:
    """(outcome, who decided it) of a record: `incomplete` records are never scored; else the
    evaluation's outcome under `judge`, or under the rule judge (computed here, "rule (viewer)")
    when `judge` gave the record no deciding label."""
    if rec.status == "incomplete":
        return "incomplete", ""
    outcome = _decide(rec, judge)
    if outcome is not None:
        return outcome, judge
    return _decide(_Judged(rec, _rule_labels(rec, cache)), DEFAULT_JUDGE) or "unparseable", f"{DEFAULT_JUDGE} (viewer)"


def record_kind(rec: Any, file: str) -> str:
    """`execution`, `fork` (a branch with THINK / SEARCH / STOP / SWITCH) or `replay`."""
    if file == REPLAYS_FILE or getattr(rec, "kind", None) == "replay":
        return "replay"
    if rec.parent is not None:
        return "fork"
    return "execution"


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

    def __post_init__(self) -> None:
        self.passages = PassageResolver(self.run_dir / PASSAGES_FILE)  # read on the first reference
    _failure: str | None = None

    @classmethod
    def open(cls, run_dir: Path, judge: str | None = None) -> RunIndex:
        """Check the folder and read metrics.json / value.json; no trace is read yet."""
        run_dir = check_run_dir(Path(run_dir))
        metrics = _read_json(run_dir / METRICS_FILE)
        value = _read_json(run_dir / VALUE_FILE)
        chosen = judge or (metrics or {}).get("judge") or ((value or {}).get("settings") or {}).get("judge")
        cfg = MetricsConfig(**{k: metrics[k] for k in ("lam", "mu") if metrics and isinstance(metrics.get(k), (int, float))})
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

    def _scan(self, file: str, model: type[BaseModel]) -> Iterator[tuple[int, int, Any]]:
        """(line, offset, validated object) for each readable line; errors are recorded."""
        path = self.path(file)
        if not path.is_file():
            return
        for lineno, offset, raw, problem in iter_lines(path):
            if raw is None:
                self._error(file, lineno, problem or "unreadable")
                continue
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
        """The table row of a record (light or full): identity, outcome, labels, cost."""
        outcome, decided_by = outcome_of(rec, self.judge or DEFAULT_JUDGE, self._rule_cache)
        parent = rec.parent
        kind = record_kind(rec, file)
        return {
            "id": rec.execution_id, "kind": kind, "file": file, "line": line,
            "condition": condition_label(rec.condition), "question_id": rec.question_id, "question": rec.question,
            "answerable": rec.answerable, "category": category_key(rec), "status": rec.status,
            "outcome": outcome, "judge": decided_by, "labels": _labels_text(rec.judgments),
            "evidence": _evidence(rec, self.judge or DEFAULT_JUDGE), "searches": rec.search_calls,
            "input_tokens": rec.input_tokens, "output_tokens": rec.output_tokens,
            "cost": float(execution_cost(rec.output_tokens, rec.input_tokens, rec.search_calls, self.cfg)),
            "wall_s": round(float(rec.wall_s), 3),
            "parent": parent.execution_id if parent else None, "checkpoint": parent.checkpoint_id if parent else None,
            "boundary": parent.boundary if parent else None,
            "branch": "replay" if kind == "replay" else rec.branch, "repeat": rec.repeat,
            "checkpoints": len(rec.checkpoint_ids or []), "answer": (rec.final_answer or "")[:300],
            "error": getattr(rec, "error", None),
        }  # fmt: skip

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
        for lineno, offset, rec in self._scan(JUDGED_FILE, RowFields):
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

    def rows(self, since: int = 0) -> dict[str, Any]:
        """Rows from position `since` on (lists in COLUMNS order), with progress and errors."""
        with self.lock:
            ids = self.order[since:]
            rows = [[self.entries[i].row[c] for c in COLUMNS] for i in ids]
            return {
                "columns": list(COLUMNS), "since": since, "rows": rows, "total": len(self.order),
                "done": self.progress.done, "phase": self.progress.phase, "version": self.progress.version,
                "superseded": self.progress.superseded, "errors": [e.row() for e in self.errors],
            }  # fmt: skip

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
            for name in (*TRACE_FILES, METRICS_FILE, VALUE_FILE)
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
            "run_dir": str(self.run_dir), "name": self.run_dir.name, "files": files, "judge": self.judge,
            "lam": self.cfg.lam, "mu": self.cfg.mu, "metrics": headline, "value": value_headline(self.value),
            "columns": list(COLUMNS), "outcomes": list(ROW_OUTCOMES),
        }  # fmt: skip


def value_headline(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """value.json's scores per forecaster (Brier, gain risk L, R²_Δ) and its state counts."""
    if not value:
        return None
    return {
        "settings": {k: (value.get("settings") or {}).get(k) for k in ("judge", "reward", "pending_roles", "roles")},
        "states": value.get("states"),
        "brier": {name: parts.get("brier") for name, parts in (value.get("brier") or {}).items()},
        "gain_risk": value.get("gain_risk"),
        "gain_r2": value.get("gain_r2"),
        "theta": value.get("theta"),
        "gain_variance": value.get("gain_variance"),
    }
