"""The runner end to end with the scripted model: records, resumption, faults, bad specs."""

from __future__ import annotations

import pytest

from branchpoint.agents import AgentContext, build_graph, initial_state, resolve_policy
from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.models import ScriptedModel
from branchpoint.traces import read_records
from tests.experiments.conftest import CountingOpener
from tests.graphs import invoke


def test_run_writes_one_record_per_condition_and_question(tmp_path, write_spec, isolated_cache):
    opener = CountingOpener()
    run_dir = tmp_path / "run"
    summary = run_experiment(load_spec(write_spec()), run_dir, progress=False, model_opener=opener)
    assert summary.planned == 12 and summary.ran == 12 and summary.skipped == 0
    records = read_records(run_dir / "executions.jsonl")
    assert len({r.execution_id for r in records}) == 12
    assert (run_dir / "spec.yaml").is_file() and (run_dir / "checkpoints.sqlite").is_file()
    with_search = [r for r in records if r.condition == {"agent.search": True}]
    without = [r for r in records if r.condition == {"agent.search": False}]
    assert len(with_search) == len(without) == 6
    assert all(r.search_calls == 1 for r in with_search)
    assert all(r.search_calls == 0 for r in without)
    for r in with_search:
        assert r.status == "ok" and r.final_answer
        assert [s.kind for s in r.steps] == ["decide", "search", "decide"]
        assert r.steps[1].retrieved and r.steps[1].source == "demo"
        assert r.input_tokens > 0 and r.output_tokens > 0
        # initial, pending_query and after_search_1 boundaries were checkpointed
        assert len(r.checkpoint_ids) == 3
    answerable = [r for r in records if r.answerable]
    assert answerable and all(r.gold_answers for r in answerable)
    assert {r.category for r in records if not r.answerable} <= {"AU", "FP", "UC"}


def test_rerun_of_finished_spec_makes_no_model_call(tmp_path, write_spec, isolated_cache):
    spec = load_spec(write_spec())
    run_experiment(spec, tmp_path / "run", progress=False, model_opener=CountingOpener())
    again = CountingOpener()
    summary = run_experiment(spec, tmp_path / "run", progress=False, model_opener=again)
    assert summary.ran == 0 and summary.skipped == 12
    assert again.opened == 0 and again.calls == 0


def test_interrupted_run_does_only_what_is_missing(tmp_path, write_spec, isolated_cache):
    spec = load_spec(write_spec())
    run_dir = tmp_path / "run"
    run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener())
    path = run_dir / "executions.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    # drop two records and leave a torn half line, as a crash mid-append would
    path.write_bytes(b"".join(lines[:-3]) + lines[-3][:40])
    summary = run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener())
    assert summary.ran == 3
    records = read_records(path)
    assert len(records) == 12 and len({r.execution_id for r in records}) == 12


def test_transport_fault_is_incomplete_and_redone(tmp_path, write_spec, isolated_cache):
    spec = load_spec(write_spec({"sweep": {}, "agent": {"policy": "constrained", "search": False}}))
    run_dir = tmp_path / "run"
    summary = run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener(fail_first=2))
    assert summary.statuses == {"incomplete": 2, "ok": 4}
    incomplete = [r for r in RunStore(run_dir).records() if r.status == "incomplete"]
    assert len(incomplete) == 2 and all("transport" in r.error for r in incomplete)
    summary = run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener())
    assert summary.ran == 2 and summary.statuses == {"ok": 2}
    assert len(RunStore(run_dir).finished_ids()) == 6


def test_changed_settings_get_new_execution_ids(tmp_path, write_spec, isolated_cache):
    run_dir = tmp_path / "run"
    run_experiment(load_spec(write_spec()), run_dir, progress=False, model_opener=CountingOpener())
    changed = load_spec(write_spec({"agent": {"policy": "constrained", "search_cap": 1}}))
    summary = run_experiment(changed, tmp_path / "other", progress=False, model_opener=CountingOpener())
    assert summary.ran == 12
    ids = {r.execution_id for r in RunStore(run_dir).records()}
    assert ids.isdisjoint(r.execution_id for r in RunStore(tmp_path / "other").records())


def test_unknown_policy_fails_naming_the_spec_file(tmp_path, write_spec):
    with pytest.raises(InputError, match=r'spec.yaml: agent.policy: unknown policy "does_not_exist"'):
        load_spec(write_spec({"agent": {"policy": "does_not_exist"}}))
    spec = load_spec(write_spec()).model_copy(
        update={"agent": load_spec(write_spec()).agent.model_copy(update={"policy": "does_not_exist"})}
    )
    with pytest.raises(InputError, match='agent.policy: unknown policy "does_not_exist"'):
        run_experiment(spec, tmp_path / "run", progress=False, model_opener=CountingOpener())
    assert not (tmp_path / "run").exists()


def test_unknown_default_source_fails_before_anything_is_written(tmp_path, write_spec):
    spec = load_spec(write_spec({"retrieval": {"default": "wiki"}}))
    with pytest.raises(InputError, match="retrieval.default: unknown source 'wiki'"):
        run_experiment(spec, tmp_path / "run", progress=False, model_opener=CountingOpener())
    assert not (tmp_path / "run").exists()


def test_concurrent_run_records_every_execution_once(tmp_path, write_spec, isolated_cache):
    spec = load_spec(write_spec({"questions": {"path": "demo", "sample": {"answerable": 10, "unanswerable": 10}}}))
    run_dir = tmp_path / "run"
    summary = run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener(), concurrency=8)
    assert summary.ran == 40 and summary.statuses == {"ok": 40}
    records = read_records(run_dir / "executions.jsonl")
    assert len(records) == len({r.execution_id for r in records}) == 40
    sequential = tmp_path / "seq"
    run_experiment(spec, sequential, progress=False, model_opener=CountingOpener())
    by_id = {r.execution_id: r for r in read_records(sequential / "executions.jsonl")}
    for r in records:  # the same outcomes as a sequential run
        assert r.final_answer == by_id[r.execution_id].final_answer
        assert [s.kind for s in r.steps] == [s.kind for s in by_id[r.execution_id].steps]


def test_delete_threads_clears_only_the_named_threads(tmp_path):
    from branchpoint.checkpoints.store import delete_threads, sqlite_checkpointer

    with sqlite_checkpointer(tmp_path / "c.sqlite") as saver:
        graph = build_graph(resolve_policy("no_search"), saver)
        ctx = AgentContext(
            model=ScriptedModel(replies=["Paris"], cycle=True),
            search=None,
            search_cap=0,
            max_tokens=8,
            answer_max_tokens=8,
        )
        for tid in ("a", "b", "c"):
            invoke(
                graph,
                initial_state("q", "Capital of France?", None, []),
                {"configurable": {"thread_id": tid}},
                context=ctx,
            )
        delete_threads(saver, ["a", "c"])
        left = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    assert left == {"b"}


def test_multi_turn_sweep_carries_history_into_records(tmp_path, write_spec, isolated_cache):
    spec = load_spec(
        write_spec(
            {
                "multi_turn": {"preceding": 0, "context": "mixed"},
                "agent": {"policy": "constrained", "search": False},
                "sweep": {"multi_turn.preceding": [0, 2], "multi_turn.context": ["answerable", "unanswerable"]},
            }
        )
    )
    run_dir = tmp_path / "run"
    run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener())
    records = read_records(run_dir / "executions.jsonl")
    assert len(records) == 6 * 4
    for r in records:
        n = r.condition["multi_turn.preceding"]
        history = r.model_dump().get("history", [])
        assert len(history) == n
        if n and r.condition["multi_turn.context"] == "answerable":
            assert all(h["answer"] and "know" not in h["answer"] for h in history)
        assert all(h["question"] != r.question for h in history)
    again = load_spec(write_spec({"multi_turn": {"preceding": 2, "context": "mixed"}, "sweep": {}}))
    from branchpoint.experiments.planning import plan_executions, select_questions

    first = plan_executions(again, select_questions(again))
    second = plan_executions(again, select_questions(again))
    assert [p.history for p in first] == [p.history for p in second]  # seeded


def test_cli_limit_runs_only_the_first_questions(tmp_path, write_spec, isolated_cache):
    from typer.testing import CliRunner

    from branchpoint.cli import app

    spec = write_spec(
        {
            "model": {"provider": "scripted", "script": ['answer", "text": "x"}']},
            "agent": {"policy": "constrained", "search": False},
            "sweep": {},
        }
    )
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "r"), "--limit", "2", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 planned" in result.output


def test_run_planned_runs_the_given_plan_without_planning_again(tmp_path, write_spec, isolated_cache, monkeypatch):
    """What the driver's in-process backend calls with the plan it made: only the executions
    the run folder lacks run, and the summary counts the given plan."""
    import branchpoint.experiments.runner as runner

    spec = load_spec(write_spec())
    plan = runner.plan_executions(spec, runner.select_questions(spec))
    run_dir = tmp_path / "run"
    run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener(), execution_ids=[plan[0].execution_id])

    def no_planning(*_args, **_kwargs):
        raise AssertionError("run_planned planned again")

    monkeypatch.setattr(runner, "plan_executions", no_planning)
    opener = CountingOpener()
    summary = runner.run_planned(spec, run_dir, plan[:4], progress=False, model_opener=opener)
    assert (summary.planned, summary.skipped, summary.ran, summary.statuses) == (4, 1, 3, {"ok": 3})
    ids = [r.execution_id for r in read_records(run_dir / "executions.jsonl")]
    assert ids == [p.execution_id for p in plan[:4]]
    with pytest.raises(InputError, match="--concurrency must be at least 1, got 0"):
        runner.run_planned(spec, run_dir, plan, progress=False, model_opener=opener, concurrency=0)


def test_a_seed_sweep_shares_one_client_and_sends_each_executions_seed(tmp_path, write_spec, isolated_cache):
    """One group for every seed (not one client and one wave of executions per seed, which
    kept a many-seed sweep from ever having `concurrency` executions in flight)."""
    spec = load_spec(write_spec({"sweep": {"model.seed": [0, 1, 2, 3]}}))
    opener = CountingOpener()
    summary = run_experiment(spec, tmp_path / "run", progress=False, model_opener=opener, concurrency=64)
    assert summary.ran == summary.planned and opener.opened == 1
    records = read_records(tmp_path / "run" / "executions.jsonl")
    assert {r.condition["model.seed"] for r in records} == {0, 1, 2, 3}
    assert {request["seed"] for request in opener.models[0].requests} == {0, 1, 2, 3}
