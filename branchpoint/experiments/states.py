"""The saved states of a run, with what a researcher needs to choose which to fork or replay.

`branchpoint checkpoints ls` lists, for each execution (and, on request, each fork branch), every
checkpoint at a legal boundary with the execution's question, condition and verdict, and the
searches and tokens spent by that state. Verdicts come from the judgments in the records when a
judge's labels are there, else from the offline rule judge.

A verdict is what the judge said of the response (correct / abstained / wrong), whether or not
the question could be answered; it is not the evaluation's outcome (`evaluation.tally.outcome_of`:
correct or wrong answer, correct or failed abstention, which counts an abstention on an
answerable question as a wrong answer). The listing still heads its column, and its JSON key,
`outcome`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from branchpoint.checkpoints.boundaries import BoundaryInfo, list_boundaries
from branchpoint.checkpoints.store import open_checkpointer
from branchpoint.checkpoints.values import state_reader
from branchpoint.defaults import DEFAULT_JUDGE, RULE_JUDGE
from branchpoint.errors import InputError
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    FORKS_FILE,
    ExecutionRecord,
    read_records,
)

#: The verdicts an execution can have in the listing.
VERDICTS = ("correct", "abstained", "wrong", "incomplete")


class SavedState(BaseModel):
    """One saved state at a legal boundary of one execution, with the execution's context."""

    execution_id: str
    question: str
    condition: dict[str, Any]
    verdict: str = Field(description="correct / abstained / wrong / incomplete (`execution_verdict`)")
    branch: str | None = None
    parent_execution_id: str | None = None
    boundary: BoundaryInfo


def execution_verdict(record: ExecutionRecord, judge: str = DEFAULT_JUDGE) -> str:
    """correct / abstained / wrong (or incomplete) for one record, by `judge`'s labels in the
    record, or by the offline rule judge when the record has none of that judge."""
    from branchpoint.evaluation.judges import judge_records

    if record.status == "incomplete":
        return "incomplete"
    labels = {j.kind: j.label.strip().upper() for j in record.judgments if j.judge == judge}
    if not labels:
        labels = {j.kind: j.label.strip().upper() for j in judge_records([record], RULE_JUDGE)[0].judgments}
    if labels.get("abstention") == "ABSTAINED":
        return "abstained"
    return "correct" if labels.get("answer") == "CORRECT" else "wrong"


def saved_states(
    run_dir: Path,
    execution: str | None = None,
    checkpoints: str | None = None,
    *,
    branches: bool = False,
    judge: str = DEFAULT_JUDGE,
) -> list[SavedState]:
    """Every saved state at a legal boundary of a run's executions (and of its fork branches when
    `branches` is set, or when `execution` names a branch), oldest first per execution."""
    run_dir = Path(run_dir)
    db = run_dir / CHECKPOINTS_FILE
    traces = run_dir / EXECUTIONS_FILE
    if (checkpoints is None and not db.is_file()) or not traces.is_file():
        raise InputError(f"{run_dir}: not a run directory (expected executions.jsonl and checkpoints.sqlite)")
    records = read_records(traces)
    forks = run_dir / FORKS_FILE
    if forks.is_file() and (branches or execution is not None):
        records += read_records(forks)  # branches are executions too: their states fork again
    latest: dict[str, ExecutionRecord] = {}
    for rec in records:
        latest[rec.execution_id] = rec
    if execution is not None:
        matches = [i for i in latest if i.startswith(execution)]
        if len(matches) != 1:
            what = "no" if not matches else f"{len(matches)}"
            raise InputError(f"--execution {execution}: {what} executions of {run_dir} match")
        latest = {matches[0]: latest[matches[0]]}
    rows = []
    with open_checkpointer(checkpoints or db) as saver:
        reader = state_reader(saver)
        for eid, rec in latest.items():
            verdict = execution_verdict(rec, judge)
            for b in list_boundaries(saver, eid, reader):
                rows.append(
                    SavedState(
                        execution_id=eid,
                        question=rec.question,
                        condition=rec.condition,
                        verdict=verdict,
                        branch=rec.branch or rec.kind,
                        boundary=b,
                        parent_execution_id=rec.parent.execution_id if rec.parent else None,
                    )
                )
    return rows
