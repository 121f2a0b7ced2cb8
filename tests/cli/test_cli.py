"""The command line: exit codes, one clear error line, no partial output."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app

runner = CliRunner()

SCRIPTED = {
    "name": "cli",
    "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
    "model": {"provider": "scripted", "script": ['answer", "text": "I don\'t know"}']},
    "agent": {"policy": "constrained", "search": False},
}


def write(tmp_path, data, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for cmd in ("run", "evaluate", "quickstart", "checkpoints"):
        assert cmd in result.output


def test_run_then_evaluate_then_checkpoints(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(write(tmp_path, SCRIPTED)), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "4 planned" in result.output and "4 run" in result.output
    result = runner.invoke(app, ["evaluate", str(out)])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"answer_accuracy", "abstention_accuracy", "overall_accuracy", "tpc", "n", "by_category"} <= set(metrics)
    assert metrics["n"] == 4
    assert metrics["abstention_accuracy"] == 1.0 and metrics["answer_accuracy"] == 0.0
    result = runner.invoke(app, ["checkpoints", "ls", str(out), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert len(rows) == 4 and {r["boundary"] for r in rows} == {"initial"}
    # rerun: nothing to do
    result = runner.invoke(app, ["run", str(write(tmp_path, SCRIPTED)), "--out", str(out), "--no-progress"])
    assert "4 already recorded, 0 run" in result.output


def test_checkpoints_ls_writes_each_executions_verdict_under_outcome(tmp_path):
    """`checkpoints ls --json` keeps its `outcome` key, holding the judge's verdict on the response
    (correct / abstained / wrong), not the evaluation's outcome: an abstention on an answerable
    question is `abstained` there and a `wrong_answer` in the metrics."""
    from branchpoint.evaluation.judges import judge_records
    from branchpoint.evaluation.metrics import record_outcome
    from branchpoint.traces import read_records

    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(write(tmp_path, SCRIPTED)), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["checkpoints", "ls", str(out), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["execution_id"]: r for r in map(json.loads, result.output.splitlines())}
    records = judge_records(read_records(out / "executions.jsonl"), "rule")
    assert set(rows) == {r.execution_id for r in records}
    for rec in records:
        assert rows[rec.execution_id]["outcome"] == "abstained"  # every reply is "I don't know"
        assert record_outcome(rec, "rule") == ("wrong_answer" if rec.answerable else "correct_abstention")


def test_unknown_policy_is_one_clear_line_and_no_output(tmp_path):
    spec = write(tmp_path, {**SCRIPTED, "agent": {"policy": "clever"}})
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 2
    assert 'agent.policy: unknown policy "clever"' in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_invalid_spec_field_names_file_and_field(tmp_path):
    spec = write(tmp_path, {**SCRIPTED, "agent": {"search_cap": -3}})
    result = runner.invoke(app, ["run", str(spec)])
    assert result.exit_code == 2
    assert "spec.yaml" in result.output and '"agent.search_cap"' in result.output


def test_evaluate_broken_trace_names_line_and_field_and_writes_nothing(tmp_path):
    good = {
        "execution_id": "a",
        "run_id": "r",
        "question_id": "q",
        "question": "Q?",
        "answerable": True,
        "gold_answers": ["x"],
        "final_answer": "x",
    }
    bad = {**good, "execution_id": "b", "search_calls": "three"}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["evaluate", str(path)])
    assert result.exit_code == 2
    assert "t.jsonl line 2" in result.output and '"search_calls"' in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def test_evaluate_with_given_judge(tmp_path):
    rec = {
        "execution_id": "a",
        "run_id": "r",
        "question_id": "q",
        "question": "Q?",
        "answerable": False,
        "category": "FP",
        "final_answer": "x",
        "judgments": [{"judge": "human", "kind": "abstention", "label": "ABSTAINED"}],
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["evaluate", str(path), "--judge", "given", "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert metrics["abstention_accuracy"] == 1.0 and metrics["by_category"]["FP"]["n"] == 1


def test_fork_command_end_to_end(tmp_path):
    spec = {
        **SCRIPTED,
        "model": {"provider": "scripted", "script": ['search", "text": "x"}', 'answer", "text": "Canberra"}']},
        "agent": {"policy": "constrained", "search_cap": 1},
    }
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(write(tmp_path, spec)), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app,
        ["fork", str(out), "--actions", "THINK,SEARCH,STOP", "--repeats", "2", "--search-budget", "1", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    # per execution: THINK, SEARCH at initial and after_search_1; STOP, SEARCH at pending_query
    assert "48 branches planned" in result.output and "48 run" in result.output  # 4 executions x 6 x 2
    assert "skipped actions illegal at their boundary" in result.output
    result = runner.invoke(app, ["evaluate", str(out / "forks.jsonl"), "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["fork", str(out), "--actions", "SWITCH", "--no-progress"])
    assert result.exit_code == 2 and "SWITCH needs a source" in result.output


def test_run_fork_and_list_with_postgres_checkpoints(tmp_path, postgres_url):
    """The same commands with `--checkpoints postgresql://…`: nothing goes to SQLite."""
    import uuid

    spec = {
        **SCRIPTED,
        "name": f"pg-{uuid.uuid4().hex[:8]}",
        "model": {"provider": "scripted", "script": ['search", "text": "x"}', 'answer", "text": "Canberra"}']},
        "agent": {"policy": "constrained", "search_cap": 1},
    }
    out = tmp_path / "run"
    args = ["--checkpoints", postgres_url, "--no-progress"]
    result = runner.invoke(app, ["run", str(write(tmp_path, spec)), "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    assert not (out / "checkpoints.sqlite").exists()
    result = runner.invoke(app, ["fork", str(out), "--actions", "THINK", "--repeats", "1", *args])
    assert result.exit_code == 0, result.output
    assert "8 run (ok: 8)" in result.output  # 4 executions x THINK at initial and after_search_1
    result = runner.invoke(app, ["checkpoints", "ls", str(out), "--json", "--checkpoints", postgres_url])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert {r["kind"] for r in rows} == {"initial", "pending_query", "after_search_k"}
