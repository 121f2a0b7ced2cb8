"""`branchpoint runs verify RUN_DIR`: an integrity check of a run directory.

It reads, and never writes: `spec.yaml`, `executions.jsonl`, `forks.jsonl`, `replays.jsonl`,
the checkpoint database and the retrieval cache. A *problem* makes the check fail (exit 1):

* `schema` — a line that is not UTF-8, not JSON, not an object, too long, or not a valid
  `ExecutionRecord` (file, line and field named), in the traces or the passage store;
  `checksum` — a line whose `line_crc32` does not match its bytes (changed after it was written);
  `torn_tail` — a last line without its newline (a crash mid-append; the next `run` / `fork` cuts
  it). `branchpoint runs repair` moves all of these into `quarantine.jsonl`;
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

This module plans what the spec expects (`missing`, `plan`), runs the checks and prints the
report; the trace-file scan and the report types are in `verify_records`, the database checks in
`verify_stores`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from branchpoint.errors import BranchpointError, InputError
from branchpoint.experiments.verify_records import (
    Finding,
    TraceEntry,
    Verification,
    finished_in,
    scan_passages,
    scan_trace,
)
from branchpoint.experiments.verify_stores import (
    UNREADABLE_STATE,
    check_checkpoints,
    check_retrieval_cache,
    read_only_checkpointer,
)
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    FORKS_FILE,
    PASSAGES_FILE,
    REPLAYS_FILE,
    RETRIEVAL_CACHE_FILE,
    SPEC_FILE,
    TraceError,
)

#: Problems that `runs repair` mends (by moving the lines into the quarantine).
DAMAGE_KINDS = ("schema", "checksum", "torn_tail")


def _check_plan(spec: Any, executions: dict[str, TraceEntry], report: Verification) -> None:
    from branchpoint.experiments.planning import plan_executions, select_questions

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
                "missing",
                f"execution {p.execution_id[:12]}",
                f"question {p.question.id}{f' epoch {p.epoch}' if p.epoch else ''} under {cond}: {how}",
            )
    report.counts["missing"] = missing
    unplanned = sorted(finished_in(executions) - planned)
    for eid in unplanned:
        report.warn(
            "unplanned",
            f"{EXECUTIONS_FILE} line {executions[eid].line}",
            f"execution {eid[:12]} is not planned by spec.yaml (an older version of the spec, or --limit)",
        )


def _check_fork_plan(saver: Any, run_dir: Path, spec: Any, forks: dict[str, TraceEntry], report: Verification) -> None:
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
    done = finished_in(forks)
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
    spec = load_spec(run_dir / SPEC_FILE, check_policy=False, recorded=True)
    report = Verification(run_dir=run_dir)
    passages = scan_passages(run_dir / PASSAGES_FILE, report)
    executions = scan_trace(run_dir / EXECUTIONS_FILE, spec.name, report, forks=False, passages=passages)
    forks = scan_trace(run_dir / FORKS_FILE, spec.name, report, forks=True, passages=passages)
    replays = scan_trace(run_dir / REPLAYS_FILE, spec.name, report, forks=True, passages=passages)
    finished = finished_in(executions)
    finished_forks = finished_in(forks)
    report.counts.update(
        executions=len(finished),
        incomplete_only=sum(1 for e in executions.values() if not e.finished),
        forks=len(finished_forks),
        replays=len(finished_in(replays)),
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
                check_checkpoints(saver, executions, forks, sample, seed, report, replays)
                clean = not any(f.kind in DAMAGE_KINDS for f in report.problems)
                if spec.fork is not None and clean:
                    _check_fork_plan(saver, run_dir, spec, forks, report)
        except (sqlite3.Error, BranchpointError, *UNREADABLE_STATE) as exc:
            report.problem(
                "checkpoints", str((checkpoints and "--checkpoints") or CHECKPOINTS_FILE), f"cannot read: {exc}"
            )
    check_retrieval_cache(run_dir / RETRIEVAL_CACHE_FILE, sample, report)
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
    if any(f.kind in DAMAGE_KINDS for f in report.problems):
        console.print(
            f"damaged lines: `branchpoint runs repair {escape(str(report.run_dir))}` moves them to "
            "quarantine.jsonl (nothing is lost); the next run redoes what they held",
            soft_wrap=True,
            highlight=False,
        )
    if report.ok:
        console.print(
            "[bold green]ok[/]: no problems found" + (f" ({len(report.warnings)} warnings)" if report.warnings else "")
        )
    else:
        console.print(f"[bold red]{len(report.problems)} problems found[/]")
