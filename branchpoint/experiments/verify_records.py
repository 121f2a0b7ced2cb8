"""What `runs verify` finds, and its scan of a run's trace files.

`Finding` and `Verification` are the report (problems fail the check, warnings do not; the kinds
are listed in `verify`'s docstring). `scan_trace` validates every line of `executions.jsonl`,
`forks.jsonl` or `replays.jsonl` (`schema`, `checksum`, `torn_tail`, `duplicate`, `transport` and
`orphan` problems) and keeps a small `TraceEntry` per execution id, not the records, so that large runs are
checked in bounded memory; `verify` and `verify_stores` check the entries against the spec's plan
and the databases.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.traces import (
    FORKS_FILE,
    MAX_LINE_BYTES,
    PASSAGES_FILE,
    ChecksumError,
    ExecutionRecord,
    PassageResolver,
    TraceError,
    describe_validation_error,
    iter_raw_lines,
    parse_json_line,
)

PROBLEM_KINDS = (
    "schema",
    "checksum",
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
class TraceEntry:
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


def _parsed(path: Path, lineno: int, raw: bytes, report: Verification) -> dict[str, Any] | None:
    """A line's object, or None for a blank line or one that is reported as a problem."""
    where = f"{path.name} line {lineno}"
    try:
        return parse_json_line(raw, path.name, lineno)
    except ChecksumError as exc:
        report.problem("checksum", where, str(exc).removeprefix(f"{where}: "))
    except TraceError as exc:
        report.problem("schema", where, str(exc).removeprefix(f"{where}: "))
    return None


def scan_passages(path: Path, report: Verification) -> PassageResolver:
    """Check every line of a run's passage store (problems as for records); the resolver holds
    the texts of the sound lines, so a record whose passage line is damaged is named as such."""
    texts: dict[str, str] = {}
    if path.is_file():
        for lineno, raw in _raw_lines(path, report):
            obj = _parsed(path, lineno, raw, report)
            if obj is None:
                continue
            if isinstance(obj.get("ref"), str) and isinstance(obj.get("text"), str):
                texts[obj["ref"]] = obj["text"]
            else:
                report.problem("schema", f"{path.name} line {lineno}", 'expected {"ref": str, "text": str}')
    return PassageResolver(path, texts)


def scan_trace(
    path: Path, run_name: str, report: Verification, *, forks: bool, passages: PassageResolver | None = None
) -> dict[str, TraceEntry]:
    """Validate every line of a trace file (`executions.jsonl`, `forks.jsonl`, `replays.jsonl`:
    `forks` for the two whose records have a parent) and index its execution ids, each problem
    added to `report`; a missing file is an empty index."""
    entries: dict[str, TraceEntry] = {}
    if not path.is_file():
        return entries
    lines = 0
    passages = passages or PassageResolver(path.parent / PASSAGES_FILE)
    for lineno, raw in _raw_lines(path, report):
        where = f"{path.name} line {lineno}"
        obj = _parsed(path, lineno, raw, report)
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
        entry = entries.setdefault(eid, TraceEntry(line=lineno))
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


def finished_in(entries: dict[str, TraceEntry]) -> set[str]:
    """The execution ids of a scan that have a finished record."""
    return {eid for eid, e in entries.items() if e.finished}
