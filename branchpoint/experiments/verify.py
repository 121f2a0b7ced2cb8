"""`branchpoint runs verify RUN_DIR`: an integrity check of a run directory.

It reads, and never writes: `spec.yaml`, `executions.jsonl`, `forks.jsonl`, `replays.jsonl`,
the checkpoint database and the retrieval cache. A *problem* makes the check fail (exit 1):

* `schema` — a line that is not UTF-8, not JSON, not an object, too long, or not a valid
  `ExecutionRecord` (file, line and field named); `torn_tail` — a last line without its newline
  (a crash mid-append; the next `run` / `fork` cuts it);
* `duplicate` — an execution id with more than one finished record, or an `incomplete` record
  after a finished one (an `incomplete` followed by a finished record is how a redo looks: fine);
* `transport` — a finished record that carries a transport error (it would be scored as wrong);
* `orphan` — a record whose `run_id` is not the spec's name, or a fork (or replay) record whose
  parent is not a finished execution of `executions.jsonl` or a finished branch of `forks.jsonl`;
* `missing` — an execution that `spec.yaml` plans but that is absent or only `incomplete` (and,
  when the spec has a `fork:` section, a planned branch of that study); `plan` — the plan itself
  cannot be made (e.g. the question file is gone);
* `checkpoints` — the database cannot be read, or a sampled execution's saved boundaries differ
  from the `checkpoint_ids` of its record, or a fork's parent checkpoint is gone;
* `retrieval_cache` — `retrieval_cache.sqlite` cannot be opened or read.

*Warnings* are listed but do not fail the check: finished records that the current spec does not
plan (an older version of the spec, or `--limit`), and damaged retrieval-cache entries (the cache
treats them as misses and rewrites them).
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.errors import BranchpointError, InputError
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    FORKS_FILE,
    MAX_LINE_BYTES,
    PASSAGES_FILE,
    REPLAYS_FILE,
    RETRIEVAL_CACHE_FILE,
    SPEC_FILE,
    ExecutionRecord,
    PassageResolver,
    RetrievedDoc,
    TraceError,
    describe_validation_error,
    iter_raw_lines,
    parse_json_line,
)

PROBLEM_KINDS = (
    "schema",
    "torn_tail",
    "duplicate",
    "transport",
    "orphan",
    "missing",
    "plan",
    "checkpoints",
    "retrieval_cache",
)


@dataclass(frozen=True)
class Finding:
    """One problem or warning: its kind, where it is (file and line, or an execution) and what."""

    kind: str
    where: str
    message: str


@dataclass
class Verification:
    """The outcome of `verify_run`: problems (the check fails), warnings, and what was counted."""

    run_dir: Path
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no problem was found (warnings allowed)."""
        return not self.problems

    def problem(self, kind: str, where: str, message: str) -> None:
        self.problems.append(Finding(kind, where, message))

    def warn(self, kind: str, where: str, message: str) -> None:
        self.warnings.append(Finding(kind, where, message))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (what `--json` prints)."""
        return {
            "run_dir": str(self.run_dir),
            "ok": self.ok,
            "counts": self.counts,
            "problems": [f.__dict__ for f in self.problems],
            "warnings": [f.__dict__ for f in self.warnings],
        }


@dataclass
class _Entry:
    """What the scan keeps of one execution id (not the record: runs can be large)."""

    finished: int = 0
    incomplete: int = 0
    line: int = 0
    checkpoint_ids: list[str] | None = None
    parent: tuple[str, str] | None = None


def _raw_lines(path: Path, report: Verification) -> Iterator[tuple[int, bytes]]:
    """Complete lines of a file with bounded memory; over-long and torn lines become problems."""

    def too_long(lineno: int) -> None:
        report.problem("schema", f"{path.name} line {lineno}", f"longer than {MAX_LINE_BYTES} bytes")

    with path.open("rb") as fh:
        for lineno, raw in iter_raw_lines(fh, path, on_too_long=too_long):
            if not raw.endswith(b"\n"):
                report.problem(
                    "torn_tail",
                    f"{path.name} line {lineno}",
                    f"the last line ({len(raw)} bytes) has no newline: a crash mid-append (the next run cuts it)",
                )
                return
            yield lineno, raw


def _scan(path: Path, run_name: str, report: Verification, *, forks: bool) -> dict[str, _Entry]:
    """Validate every line of a trace file and index its execution ids."""
    entries: dict[str, _Entry] = {}
    if not path.is_file():
        return entries
    lines = 0
    passages = PassageResolver(path.parent / PASSAGES_FILE)
    for lineno, raw in _raw_lines(path, report):
        where = f"{path.name} line {lineno}"
        try:
            obj = parse_json_line(raw, path.name, lineno)
        except TraceError as exc:
            report.problem("schema", where, str(exc).removeprefix(f"{where}: "))
            continue
        if obj is None:
            continue
        lines += 1
        try:
            rec = ExecutionRecord.model_validate(passages.resolve(obj, where))
        except ValidationError as exc:
            report.problem("schema", where, describe_validation_error(exc))
            continue
        except TraceError as exc:  # a passage reference the run's passage store lacks
            report.problem("schema", where, str(exc).removeprefix(f"{where}: "))
            continue
        eid = rec.execution_id
        if rec.run_id != run_name:
            report.problem(
                "orphan", where, f"execution {eid[:12]}: run_id {rec.run_id!r} is not the spec's name {run_name!r}"
            )
        if forks and rec.parent is None:
            report.problem("orphan", where, f"execution {eid[:12]}: a record in {FORKS_FILE} without a parent")
        entry = entries.setdefault(eid, _Entry(line=lineno))
        if rec.status == "incomplete":
            if entry.finished:
                report.problem(
                    "duplicate",
                    where,
                    f"execution {eid[:12]}: an incomplete record after a finished one (line {entry.line}); "
                    "the next run would redo it",
                )
            entry.incomplete += 1
            continue
        entry.finished += 1
        if entry.finished > 1:
            report.problem(
                "duplicate", where, f"execution {eid[:12]}: finished again (first finished at line {entry.line})"
            )
            continue
        entry.line = lineno
        entry.checkpoint_ids = rec.checkpoint_ids
        entry.parent = (rec.parent.execution_id, rec.parent.checkpoint_id) if rec.parent else None
        if rec.error:
            report.problem("transport", where, f"execution {eid[:12]}: status {rec.status} but error {rec.error!r}")
    report.counts[f"{path.stem}_lines"] = lines
    return entries


def _finished(entries: dict[str, _Entry]) -> set[str]:
    return {eid for eid, e in entries.items() if e.finished}


def _reader(path: Path) -> sqlite3.Connection:
    """A connection that only reads an existing database.

    Not SQLite's `mode=ro`: a read-only connection to a WAL database leaves `-wal` and `-shm`
    files behind, while this one, the last to close, removes them, so the folder is left as found.
    """
    if not path.is_file():
        raise sqlite3.DatabaseError(f"{path}: file not found")
    return sqlite3.connect(path.resolve().as_uri(), uri=True, check_same_thread=False)


@contextmanager
def read_only_checkpointer(target: str | Path) -> Iterator[Any]:
    """A checkpoint saver that does not write (no table set-up); a URL opens PostgreSQL."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from branchpoint.checkpoints.postgres import is_postgres_url
    from branchpoint.checkpoints.serde import safe_serde
    from branchpoint.checkpoints.store import open_checkpointer

    if is_postgres_url(str(target)):
        with open_checkpointer(target) as saver:
            yield saver
        return
    conn = _reader(Path(target))
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"checkpoints", "writes"} <= tables:
            raise sqlite3.DatabaseError("no checkpoints table: not a checkpoint database")
        saver = SqliteSaver(conn, serde=safe_serde())
        saver.is_setup = True  # the tables exist; setup would try to write
        yield saver
    finally:
        conn.close()


def _thread(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _sample(ids: list[str], n: int, seed: int) -> list[str]:
    ids = sorted(ids)
    return ids if n <= 0 or n >= len(ids) else random.Random(seed).sample(ids, n)


def _check_checkpoints(
    saver: Any,
    executions: dict[str, _Entry],
    forks: dict[str, _Entry],
    sample: int,
    seed: int,
    report: Verification,
    replays: dict[str, _Entry] | None = None,
) -> None:
    from branchpoint.checkpoints import list_boundaries
    from branchpoint.checkpoints.values import state_reader

    boundaries: dict[str, set[str]] = {}
    reader = state_reader(saver)

    def listed(eid: str) -> set[str]:
        if eid not in boundaries:
            boundaries[eid] = {b.checkpoint_id for b in list_boundaries(saver, eid, reader)}
        return boundaries[eid]

    checked = 0
    for name, entries in ((EXECUTIONS_FILE, executions), (FORKS_FILE, forks), (REPLAYS_FILE, replays or {})):
        for eid in _sample(list(_finished(entries)), sample, seed):
            entry = entries[eid]
            where = f"{name} line {entry.line}"
            checked += 1
            try:
                _check_execution(saver, eid, entry, where, {**executions, **forks}, listed, report)
            except UNREADABLE_STATE as exc:  # e.g. a row whose serializer this LangGraph does not know
                report.problem(
                    "checkpoints",
                    where,
                    f"execution {eid[:12]}: a saved state cannot be read ({type(exc).__name__}: {exc})",
                )
    report.counts["checkpoints_checked"] = checked


#: What reading a damaged or foreign saved state raises (an unknown serializer type, bad bytes).
UNREADABLE_STATE = (NotImplementedError, ValueError, TypeError, KeyError, sqlite3.Error)


def _check_execution(
    saver: Any, eid: str, entry: _Entry, where: str, parents: dict[str, _Entry], listed: Any, report: Verification
) -> None:
    """The checkpoint checks of one sampled execution (see `_check_checkpoints`); `parents`: the
    executions and branches a record's parent may be (forks of forks)."""
    ids = listed(eid)
    if not ids and entry.checkpoint_ids is None and entry.parent is None:  # `initial` is always saved
        report.problem("checkpoints", where, f"execution {eid[:12]}: no saved states in the checkpoint database")
        return
    starts = sum(1 for _ in saver.list(_thread(eid), filter={"source": "input"}))
    if starts > 1:
        report.problem(
            "checkpoints",
            where,
            f"execution {eid[:12]}: its thread was started {starts} times: an abandoned attempt's saved "
            "states are still there, and forks would start from them",
        )
    if entry.checkpoint_ids is not None:
        lost = set(entry.checkpoint_ids) - ids
        extra = ids - set(entry.checkpoint_ids)
        if lost:
            report.problem(
                "checkpoints",
                where,
                f"execution {eid[:12]}: {len(lost)} of the {len(entry.checkpoint_ids)} checkpoints its record "
                "lists are not in the database" + (" (no saved states at all)" if not ids else ""),
            )
        if extra:
            report.problem(
                "checkpoints",
                where,
                f"execution {eid[:12]}: {len(extra)} saved boundaries that its record does not list",
            )
    if entry.parent is not None and entry.parent[0] in parents and entry.parent[1] not in listed(entry.parent[0]):
        report.problem(
            "checkpoints",
            where,
            f"execution {eid[:12]}: parent checkpoint {entry.parent[1]} of {entry.parent[0][:12]} does not exist",
        )


def _check_retrieval_cache(path: Path, sample: int, report: Verification) -> None:
    from branchpoint.retrieval.cache import RetrievalCache

    if not path.is_file():
        report.counts["cache_entries"] = 0
        return
    try:
        with RetrievalCache(path) as cache:
            report.counts["cache_entries"] = cache.stats().entries
        conn = _reader(path)
        try:
            query = "SELECT source, query, k, result FROM retrieval_cache ORDER BY rowid"
            rows = conn.execute(query + (f" LIMIT {int(sample)}" if sample > 0 else ""))
            checked = 0
            for source, text, k, result in rows:
                checked += 1
                try:
                    docs = json.loads(result)
                    if not isinstance(docs, list):
                        raise ValueError(f"expected a JSON list, got {type(docs).__name__}")
                    for doc in docs:
                        RetrievedDoc.model_validate(doc)
                except (ValueError, ValidationError) as exc:
                    report.warn(
                        "retrieval_cache",
                        f"{RETRIEVAL_CACHE_FILE} source {source!r} query {text!r} k={k}",
                        f"damaged entry (treated as a miss and rewritten): {str(exc).splitlines()[0]}",
                    )
            report.counts["cache_checked"] = checked
        finally:
            conn.close()
    except (sqlite3.Error, OSError, RuntimeError, BranchpointError) as exc:
        report.problem("retrieval_cache", RETRIEVAL_CACHE_FILE, f"cannot read the retrieval cache: {exc}")


def _check_plan(spec: Any, executions: dict[str, _Entry], report: Verification) -> None:
    from branchpoint.experiments.runner import plan_executions, select_questions

    try:
        plan = plan_executions(spec, select_questions(spec))
    except (BranchpointError, TraceError) as exc:
        report.problem("plan", SPEC_FILE, f"cannot plan the spec's executions, so completeness is unchecked: {exc}")
        return
    report.counts["planned"] = len(plan)
    planned = {p.execution_id for p in plan}
    missing = 0
    for p in plan:
        entry = executions.get(p.execution_id)
        if entry is None or not entry.finished:
            missing += 1
            how = f"only incomplete ({entry.incomplete} records)" if entry else "not recorded"
            cond = json.dumps(p.condition, sort_keys=True, default=str) if p.condition else "{}"
            report.problem(
                "missing", f"execution {p.execution_id[:12]}", f"question {p.question.id} under {cond}: {how}"
            )
    report.counts["missing"] = missing
    unplanned = sorted(_finished(executions) - planned)
    for eid in unplanned:
        report.warn(
            "unplanned",
            f"{EXECUTIONS_FILE} line {executions[eid].line}",
            f"execution {eid[:12]} is not planned by spec.yaml (an older version of the spec, or --limit)",
        )


def _check_fork_plan(saver: Any, run_dir: Path, spec: Any, forks: dict[str, _Entry], report: Verification) -> None:
    """With a `fork:` section in the spec, every branch that study plans must be recorded."""
    from branchpoint.experiments.branch_planning import parent_records, plan_study
    from branchpoint.experiments.store import RunStore

    store = RunStore(run_dir)
    plan = spec.fork
    try:
        parents = parent_records(store, plan.executions)
        tasks, _ = plan_study(saver, store, spec, plan, parents)
    except (BranchpointError, TraceError) as exc:
        report.problem("plan", "spec.yaml fork", f"cannot plan the spec's fork study: {exc}")
        return
    done = _finished(forks)
    report.counts["fork_planned"] = len(tasks)
    for t in tasks:
        if t.execution_id not in done:
            report.problem(
                "missing",
                f"branch {t.execution_id[:12]}",
                f"{t.action} #{t.repeat} at {t.boundary.boundary} of {t.parent.execution_id[:12]}: not recorded",
            )


def verify_run(run_dir: str | Path, *, sample: int = 20, checkpoints: str | None = None, seed: int = 0) -> Verification:
    """Check a run directory; problems and warnings are collected, never raised.

    `sample` executions of each trace file (0: all) have their checkpoints listed, and as many
    retrieval-cache entries are decoded. Raises InputError only for input that cannot be checked
    at all: a path that is not a directory, or a missing or invalid `spec.yaml`.
    """
    from branchpoint.checkpoints.store import check_target
    from branchpoint.experiments.spec import load_spec

    if checkpoints is not None:
        check_target(checkpoints)
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a directory (expected a run directory from `branchpoint run`)")
    if not (run_dir / SPEC_FILE).is_file():
        raise InputError(f"{run_dir}: no spec.yaml (not a run directory from `branchpoint run`)")
    spec = load_spec(run_dir / SPEC_FILE, check_policy=False)
    report = Verification(run_dir=run_dir)
    executions = _scan(run_dir / EXECUTIONS_FILE, spec.name, report, forks=False)
    forks = _scan(run_dir / FORKS_FILE, spec.name, report, forks=True)
    replays = _scan(run_dir / REPLAYS_FILE, spec.name, report, forks=True)
    finished = _finished(executions)
    finished_forks = _finished(forks)
    report.counts.update(
        executions=len(finished),
        incomplete_only=sum(1 for e in executions.values() if not e.finished),
        forks=len(finished_forks),
        replays=len(_finished(replays)),
    )
    for name, entries in ((FORKS_FILE, forks), (REPLAYS_FILE, replays)):
        for eid, entry in entries.items():  # a branch's parent: an execution, or a branch (forks of forks)
            if entry.parent is not None and entry.parent[0] not in finished and entry.parent[0] not in finished_forks:
                report.problem(
                    "orphan",
                    f"{name} line {entry.line}",
                    f"branch {eid[:12]}: its parent {entry.parent[0][:12]} is not a finished execution of "
                    f"{EXECUTIONS_FILE} or {FORKS_FILE}",
                )
    _check_plan(spec, executions, report)

    target = checkpoints or run_dir / CHECKPOINTS_FILE
    needs_checkpoints = bool(finished or forks)
    if checkpoints is None and not (run_dir / CHECKPOINTS_FILE).is_file():
        if needs_checkpoints:
            report.problem("checkpoints", CHECKPOINTS_FILE, "missing, but the run has recorded executions")
    elif needs_checkpoints:
        try:
            with read_only_checkpointer(target) as saver:
                _check_checkpoints(saver, executions, forks, sample, seed, report, replays)
                clean = not any(f.kind in ("schema", "torn_tail") for f in report.problems)
                if spec.fork is not None and clean:
                    _check_fork_plan(saver, run_dir, spec, forks, report)
        except (sqlite3.Error, BranchpointError, *UNREADABLE_STATE) as exc:
            report.problem(
                "checkpoints", str((checkpoints and "--checkpoints") or CHECKPOINTS_FILE), f"cannot read: {exc}"
            )
    _check_retrieval_cache(run_dir / RETRIEVAL_CACHE_FILE, sample, report)
    return report


def print_verification(report: Verification, console: Any, limit: int = 20) -> None:
    """A rich summary: the counts, then each problem and warning (the first `limit` of each kind)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table("checked", "count", title=f"runs verify {escape(str(report.run_dir))}")
    for key, value in report.counts.items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)
    for label, findings, style in (("problem", report.problems, "red"), ("warning", report.warnings, "yellow")):
        by_kind: dict[str, list[Finding]] = {}
        for f in findings:
            by_kind.setdefault(f.kind, []).append(f)
        for kind, items in by_kind.items():
            console.print(f"[bold {style}]{len(items)} {kind} {label}{'s' if len(items) > 1 else ''}[/]")
            for f in items[:limit]:
                console.print(f"  {escape(f.where)}: {escape(f.message)}", highlight=False, soft_wrap=True)
            if len(items) > limit:
                console.print(f"  … and {len(items) - limit} more")
    if report.ok:
        console.print(
            "[bold green]ok[/]: no problems found" + (f" ({len(report.warnings)} warnings)" if report.warnings else "")
        )
    else:
        console.print(f"[bold red]{len(report.problems)} problems found[/]")
