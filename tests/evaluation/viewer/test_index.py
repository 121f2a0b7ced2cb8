"""The viewer's index: rows, outcomes and costs as the evaluation defines them, bad lines as error
rows, lazy phases."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.cost import execution_cost
from branchpoint.evaluation.metrics import MetricsConfig, record_outcome
from branchpoint.evaluation.tally import evidence_counts
from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, JUDGED_FILE, read_records


def _copy(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return out


def test_rows_carry_the_evaluations_outcome_and_cost(study_run: Path) -> None:
    index = RunIndex.open(study_run).build()
    judged = {r.execution_id: r for r in read_records(study_run / JUDGED_FILE)}
    assert index.judge == "rule"  # from metrics.json
    assert index.progress.done and not index.errors
    cfg = MetricsConfig()
    for eid, rec in judged.items():
        row = index.entry(eid).row
        assert row["kind"] == "execution" and row["file"] == EXECUTIONS_FILE
        assert row["cost"] == execution_cost(rec.output_tokens, rec.input_tokens, rec.search_calls, cfg)
        if rec.status == "incomplete":
            assert row["outcome"] == "incomplete"
        else:
            assert row["outcome"] == record_outcome(rec, "rule") and row["judge"] == "rule"
    outcomes = {index.entry(e).row["outcome"] for e in judged}
    assert {"correct_answer", "wrong_answer", "correct_abstention", "incomplete"} <= outcomes
    for eid, rec in judged.items():
        if not rec.answerable and rec.search_calls:
            pos, neg, _ = evidence_counts(rec, "rule")  # the run's judge's evidence labels, P+/N-
            assert index.entry(eid).row["evidence"] == f"{pos}+/{neg}-" and neg > 0


def test_forks_and_replays_get_rows_with_their_parent_and_a_rule_outcome(study_run: Path) -> None:
    index = RunIndex.open(study_run).build()
    forks = read_records(study_run / FORKS_FILE)
    row = index.entry(forks[0].execution_id).row
    assert row["kind"] == "fork" and row["parent"] == forks[0].parent.execution_id
    assert row["branch"] == forks[0].branch and row["boundary"] == forks[0].parent.boundary
    assert row["judge"] == "rule (viewer)"  # forks carry no labels: the rule judge decides, and says so
    replays = [index.entry(e).row for e in index.order if index.entry(e).row["kind"] == "replay"]
    assert replays and all(r["branch"] == "replay" and r["parent"] for r in replays)
    assert len(index.children(forks[0].parent.execution_id)) > 4


def test_a_line_that_breaks_the_schema_is_an_error_row_and_the_rest_is_shown(study_run: Path, tmp_path: Path) -> None:
    run = _copy(study_run, tmp_path)
    lines = (run / FORKS_FILE).read_text().splitlines()
    broken = json.loads(lines[3])
    broken["steps"][0]["kind"] = 42  # breaks the Step schema deep inside the record
    lines[3] = json.dumps(broken)
    lines[5] = "{not json"
    (run / FORKS_FILE).write_text("\n".join(lines) + "\n")
    exec_lines = (run / JUDGED_FILE).read_text().splitlines()
    exec_lines[1] = json.dumps({**json.loads(exec_lines[1]), "answerable": "perhaps"})
    (run / JUDGED_FILE).write_text("\n".join(exec_lines) + "\n")
    os.utime(run / JUDGED_FILE)
    index = RunIndex.open(run).build()
    errors = {(e.file, e.line): e.message for e in index.errors}
    assert 'field "steps.0.kind' in errors[(FORKS_FILE, 4)]
    assert "invalid JSON" in errors[(FORKS_FILE, 6)]
    assert 'field "answerable"' in errors[(JUDGED_FILE, 2)]
    assert len([e for e in index.order if index.entry(e).row["kind"] == "fork"]) == len(lines) - 2
    # the execution whose judged line broke is still shown, from executions.jsonl
    second = read_records(run / EXECUTIONS_FILE)[1]
    assert index.entry(second.execution_id).row["file"] == EXECUTIONS_FILE


def test_phase_one_reads_the_judged_copy_then_points_rows_at_the_traces(study_run: Path) -> None:
    index = RunIndex.open(study_run)
    index.read_primary()
    first = index.entry(index.order[0]).row
    assert first["file"] == JUDGED_FILE and first["labels"] and not index.progress.done
    assert all(index.entry(e).row["kind"] == "execution" for e in index.order)  # branches come later
    index.read_rest()
    assert index.entry(index.order[0]).row["file"] == EXECUTIONS_FILE and index.progress.done


def test_labels_are_dropped_where_the_traces_changed_since_judging(study_run: Path, tmp_path: Path) -> None:
    run = _copy(study_run, tmp_path)
    lines = (run / EXECUTIONS_FILE).read_text().splitlines()
    rec = json.loads(lines[0])
    rec["final_answer"] = "something else entirely"
    lines.append(json.dumps(rec))  # a later line for the same execution (a rerun) wins
    (run / EXECUTIONS_FILE).write_text("\n".join(lines) + "\n")
    os.utime(run / JUDGED_FILE, (1, 1))  # judged before the rerun
    index = RunIndex.open(run).build()
    row = index.entry(rec["execution_id"]).row
    assert row["answer"] == "something else entirely" and row["judge"] == "rule (viewer)"
    assert row["line"] == len(lines) and index.progress.superseded == 1


def test_a_folder_that_is_not_a_run_says_so(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a run directory"):
        RunIndex.open(tmp_path)
    with pytest.raises(InputError, match="not found"):
        RunIndex.open(tmp_path / "missing")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        RunIndex.open(tmp_path / "f.txt")


def test_a_retried_execution_keeps_its_labels_from_evaluate(study_run: Path, tmp_path: Path) -> None:
    from branchpoint.evaluation import evaluate

    run = _copy(study_run, tmp_path)
    lines = (run / EXECUTIONS_FILE).read_text().splitlines()
    first = json.loads(lines[0])
    failed = {**first, "status": "incomplete", "final_answer": None, "steps": [], "error": "timeout"}
    (run / EXECUTIONS_FILE).write_text("\n".join([json.dumps(failed), *lines]) + "\n")  # failure, then the retry
    evaluate(run, "rule", cfg=MetricsConfig(bootstrap=0))
    index = RunIndex.open(run).build()
    row = index.entry(first["execution_id"]).row
    assert (row["status"], row["judge"], row["line"]) == ("ok", "rule", 2) and row["labels"]
    assert index.progress.superseded == 1 and len(
        [e for e in index.order if index.entry(e).row["kind"] == "execution"]
    ) == len(lines)


def test_passages_held_once_per_run_are_put_back(study_run: Path, tmp_path: Path) -> None:
    from branchpoint.traces import PASSAGES_FILE, passage_ref

    run = _copy(study_run, tmp_path)
    store: dict[str, str] = {}
    for name in (EXECUTIONS_FILE, FORKS_FILE):
        out = []
        for line in (run / name).read_text().splitlines():
            rec = json.loads(line)
            for step in rec["steps"]:
                for doc in step.get("retrieved") or []:
                    text = doc.pop("text")
                    doc["text_ref"] = passage_ref(text)
                    store[doc["text_ref"]] = text
            out.append(json.dumps(rec))
        (run / name).write_text("\n".join(out) + "\n")
    (run / PASSAGES_FILE).write_text("".join(json.dumps({"ref": r, "text": t}) + "\n" for r, t in store.items()))
    os.utime(run / JUDGED_FILE, (1, 1))  # read the traces (with refs) first
    index = RunIndex.open(run).build()
    assert not index.errors
    fork = read_records(study_run / FORKS_FILE)[0]
    searched = next(f for f in read_records(study_run / FORKS_FILE) if f.search_calls)
    record = index.record(searched.execution_id)
    assert [d.text for s in record.steps for d in s.retrieved] == [d.text for s in searched.steps for d in s.retrieved]
    assert index.entry(fork.execution_id).row["kind"] == "fork"
