"""`branchpoint runs verify`: one test per problem kind, exit codes, and a check that reads only."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.agents import AgentContext, build_graph, initial_state, resolve_policy
from branchpoint.checkpoints import sqlite_checkpointer
from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.verify import verify_run
from branchpoint.models import ScriptedModel
from tests.graphs import invoke

runner = CliRunner()

SPEC = {
    "name": "verify",
    "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
    "model": {"provider": "scripted", "script": ['search", "text": "capital"}', 'answer", "text": "Canberra"}']},
    "agent": {"policy": "constrained", "search_cap": 1, "top_k": 2},
}


def snapshot(run_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory, index_cache):
    """A finished run of 4 executions with THINK and STOP forks (scripted model, demo retrieval)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRANCHPOINT_CACHE", str(index_cache))
        root = tmp_path_factory.mktemp("verify")
        spec_path = root / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
        run_dir = root / "run"
        run_experiment(load_spec(spec_path), run_dir, progress=False)
        fork_run(run_dir, ForkPlan(actions=["THINK"], repeats=1, boundaries=["initial"]), progress=False)
        # STOP branches end with no legal boundary of their own: no checkpoint ids, and that is fine
        fork_run(run_dir, ForkPlan(actions=["STOP"], repeats=1, boundaries=["pending_query"]), progress=False)
    return run_dir


@pytest.fixture()
def run(base_run, tmp_path, index_cache, monkeypatch):
    """A private copy of the base run to damage."""
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(index_cache))
    copy = tmp_path / "run"
    shutil.copytree(base_run, copy)
    return copy


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path, objs) -> None:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")


def kinds(report) -> list[str]:
    return sorted({f.kind for f in report.problems})


def test_clean_run_passes_and_is_left_byte_identical(run):
    before = snapshot(run)
    result = runner.invoke(app, ["runs", "verify", str(run), "--sample", "0"])
    assert result.exit_code == 0, result.output
    assert "no problems found" in result.output
    assert snapshot(run) == before
    report = verify_run(run, sample=0)
    assert report.ok and report.counts["planned"] == 4 and report.counts["forks"] == 8
    assert report.counts["checkpoints_checked"] == 12 and report.counts["cache_entries"] >= 1


def test_schema_errors_name_file_line_and_field_and_exit_1(run):
    path = run / "executions.jsonl"
    raw = path.read_text().splitlines()
    bad = json.loads(raw[2])
    bad["search_calls"] = "three"
    raw[1] = raw[1][:40]  # truncated JSON
    raw[2] = json.dumps(bad)
    path.write_bytes(("\n".join(raw) + "\n").encode() + b'{"a": "\xff"}\n')
    report = verify_run(run)
    where = {f.where: f.message for f in report.problems if f.kind == "schema"}
    assert "invalid JSON" in where["executions.jsonl line 2"]
    assert 'field "search_calls"' in where["executions.jsonl line 3"]
    assert "not UTF-8" in where["executions.jsonl line 5"]
    result = runner.invoke(app, ["runs", "verify", str(run)])
    assert result.exit_code == 1
    assert "executions.jsonl line 3" in result.output and "problems found" in result.output


def test_torn_tail_is_reported(run):
    path = run / "forks.jsonl"
    path.write_bytes(path.read_bytes() + b'{"execution_id": "x", "run')
    report = verify_run(run)
    assert kinds(report) == ["torn_tail"]
    assert report.problems[0].where == "forks.jsonl line 9"


def test_duplicates_but_a_redo_after_incomplete_is_fine(run):
    path = run / "executions.jsonl"
    recs = lines(path)
    redo = {**recs[0], "status": "incomplete", "final_answer": None, "steps": [], "error": "server down"}
    write_lines(path, [redo, *recs])  # incomplete, then finished: how a redo looks
    assert verify_run(run).ok
    write_lines(path, [*recs, recs[1]])  # finished twice
    report = verify_run(run)
    assert kinds(report) == ["duplicate"] and "finished again" in report.problems[0].message
    write_lines(path, [*recs, redo])  # incomplete after finished: the next run would redo it
    assert kinds(verify_run(run)) == ["duplicate"]


def test_finished_record_with_a_transport_error(run):
    path = run / "executions.jsonl"
    recs = lines(path)
    recs[2]["error"] = "model server http://127.0.0.1:1/v1: Connection refused"
    write_lines(path, recs)
    report = verify_run(run)
    assert kinds(report) == ["transport"] and report.problems[0].where == "executions.jsonl line 3"


def test_orphans_other_run_id_and_fork_without_parent(run):
    path = run / "executions.jsonl"
    recs = lines(path)
    recs[0]["run_id"] = "someone-else"
    write_lines(path, recs)
    forks = lines(run / "forks.jsonl")
    forks[1]["parent"]["execution_id"] = "0" * 24
    write_lines(run / "forks.jsonl", forks)
    report = verify_run(run)
    assert kinds(report) == ["orphan"]
    messages = " ".join(f.message for f in report.problems)
    assert "run_id 'someone-else'" in messages and "is not a finished execution" in messages


def test_missing_and_only_incomplete_executions(run):
    path = run / "executions.jsonl"
    recs = lines(path)
    recs[1] = {**recs[1], "status": "incomplete", "final_answer": None, "steps": [], "error": "timeout"}
    write_lines(path, recs[1:])  # the first is gone, the second only incomplete
    report = verify_run(run)
    missing = [f for f in report.problems if f.kind == "missing"]
    assert len(missing) == 2 and report.counts["missing"] == 2
    assert sorted(f.message.rsplit(": ", 1)[1] for f in missing) == ["not recorded", "only incomplete (1 records)"]
    assert {f.kind for f in report.problems} <= {"missing", "orphan"}  # the first's forks lost their parent


def test_missing_branches_of_the_specs_fork_study(run):
    spec = yaml.safe_load((run / "spec.yaml").read_text())
    spec["fork"] = {"actions": ["THINK"], "repeats": 1, "boundaries": ["initial"]}
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert verify_run(run).ok
    write_lines(run / "forks.jsonl", lines(run / "forks.jsonl")[:3])
    report = verify_run(run)
    assert kinds(report) == ["missing"] and report.counts["fork_planned"] == 4
    assert report.problems[0].message.startswith("THINK #0 at initial")


def test_checkpoints_lost_extra_and_unreadable(run):
    recs = lines(run / "executions.jsonl")
    with sqlite3.connect(run / "checkpoints.sqlite") as conn:
        conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (recs[0]["execution_id"],))
    conn.close()
    recs[1]["checkpoint_ids"] = recs[1]["checkpoint_ids"][:1]  # the thread has boundaries the record lacks
    recs[2]["checkpoint_ids"] = [*recs[2]["checkpoint_ids"], "1f0-nope"]  # the record lists a lost one
    write_lines(run / "executions.jsonl", recs)
    forks = lines(run / "forks.jsonl")
    forks[3]["parent"]["checkpoint_id"] = "1f0-gone"
    write_lines(run / "forks.jsonl", forks)
    with sqlite_checkpointer(run / "checkpoints.sqlite") as saver:  # a second start on one thread
        graph = build_graph(resolve_policy("constrained"), saver)
        ctx = AgentContext(model=ScriptedModel(['answer", "text": "x"}']), search=None, search_cap=0)
        state = initial_state(recs[3]["question_id"], recs[3]["question"], "demo")
        invoke(graph, state, {"configurable": {"thread_id": recs[3]["execution_id"]}}, context=ctx, durability="sync")
    report = verify_run(run, sample=0)
    assert kinds(report) == ["checkpoints"]
    messages = " ".join(f.message for f in report.problems)
    assert "its thread was started 2 times" in messages
    assert "no saved states at all" in messages and "saved boundaries that its record does not list" in messages
    assert "not in the database" in messages and "parent checkpoint 1f0-gone" in messages
    (run / "checkpoints.sqlite").write_bytes(b"not a database at all" * 100)
    report = verify_run(run)
    assert kinds(report) == ["checkpoints"] and "cannot read" in report.problems[0].message


def test_retrieval_cache_unreadable_or_damaged(run):
    path = run / "retrieval_cache.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute('UPDATE retrieval_cache SET result = \'{"not": "a list"}\'')
    conn.close()
    report = verify_run(run)
    assert report.ok and [w.kind for w in report.warnings] == ["retrieval_cache"]
    path.write_bytes(b"garbage" * 1000)
    report = verify_run(run)
    assert kinds(report) == ["retrieval_cache"]


def test_unplanned_records_warn_and_an_unplannable_spec_is_a_problem(run):
    spec = yaml.safe_load((run / "spec.yaml").read_text())
    spec["questions"]["limit"] = 2  # as `run --limit 2` would write it
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    report = verify_run(run)
    assert report.ok and {w.kind for w in report.warnings} == {"unplanned"}
    spec["questions"] = {"path": str(run / "gone.jsonl")}
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert kinds(verify_run(run)) == ["plan"]


def test_unusable_input_exits_2(tmp_path, run):
    result = runner.invoke(app, ["runs", "verify", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "not a directory" in result.output
    result = runner.invoke(app, ["runs", "verify", str(tmp_path)])
    assert result.exit_code == 2 and "no spec.yaml" in result.output
    (run / "spec.yaml").write_text("name: verify\nagent: {serach_cap: 1}\n")
    result = runner.invoke(app, ["runs", "verify", str(run)])
    assert result.exit_code == 2 and '"agent.serach_cap"' in result.output
    with pytest.raises(InputError):
        verify_run(run)


def test_json_output(run):
    result = runner.invoke(app, ["runs", "verify", str(run), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["ok"] is True and data["counts"]["executions"] == 4 and data["problems"] == []
