"""Replay is its own operation (new threads, replays.jsonl), and a replay done by hand on the
original thread (`graph.ainvoke(None, past_config)`) leaves boundary discovery, forks and
`runs verify` unchanged."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from branchpoint.agents import build_graph, recursion_limit, resolve_policy
from branchpoint.checkpoints import sqlite_checkpointer
from branchpoint.cli import app
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.branch_planning import parent_records, plan_study
from branchpoint.experiments.forking import ForkPlan, replay_run
from branchpoint.experiments.runner import agent_context
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.states import saved_states
from branchpoint.experiments.verify import verify_run
from branchpoint.models import ScriptedModel
from branchpoint.traces import REPLAYS_FILE, read_records
from tests.experiments.conftest import CountingOpener, search_until_told_responder
from tests.graphs import invoke

SPEC = {
    "name": "replays",
    "agent": {"policy": "constrained", "search_cap": 2, "top_k": 2},
    "questions": {"path": "demo", "categories": ["answerable"], "limit": 2},
    "model": {"provider": "scripted", "script": ["unused"], "max_tokens": 32},
    "sweep": {},
}


def make_run(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "run"
    run_experiment(
        load_spec(spec), out, progress=False, model_opener=CountingOpener(responder=search_until_told_responder)
    )
    return out


def thread_checkpoints(run_dir, thread_id):
    with sqlite_checkpointer(run_dir / "checkpoints.sqlite") as saver:
        return [
            c.config["configurable"]["checkpoint_id"] for c in saver.list({"configurable": {"thread_id": thread_id}})
        ]


def test_replay_runs_on_new_threads_and_never_writes_the_original(tmp_path, isolated_cache):
    run_dir = make_run(tmp_path)
    parent = RunStore(run_dir).records()[0]
    before = thread_checkpoints(run_dir, parent.execution_id)
    listing = [s.model_dump() for s in saved_states(run_dir)]
    after1 = next(s for s in saved_states(run_dir, parent.execution_id) if s.boundary.boundary == "after_search_1")
    opener = CountingOpener(responder=search_until_told_responder)
    summary = replay_run(
        run_dir,
        parent.execution_id[:10],
        ForkPlan(repeats=3, checkpoints=[after1.boundary.checkpoint_id[-8:]]),
        progress=False,
        model_opener=opener,
    )
    assert summary.ran == summary.planned == 3
    replays = read_records(run_dir / REPLAYS_FILE)
    assert len(replays) == 3 and len({r.execution_id for r in replays}) == 3
    for rec in replays:
        assert rec.kind == "replay" and rec.branch is None and rec.directive is None
        assert rec.parent.execution_id == parent.execution_id
        assert rec.parent.checkpoint_id == after1.boundary.checkpoint_id and rec.parent.boundary == "after_search_1"
        assert rec.condition["fork.action"] == "replay" and rec.sampling["seed"] is not None
        # the policy decided again: one more search (cap 2), then the forced answer
        assert [s.kind for s in rec.steps] == ["decide", "search", "forced_answer"] and rec.search_calls == 1
        assert thread_checkpoints(run_dir, rec.execution_id)  # its own thread
    assert thread_checkpoints(run_dir, parent.execution_id) == before
    assert [s.model_dump() for s in saved_states(run_dir)] == listing
    assert verify_run(run_dir, sample=0).ok
    # rerun: nothing to do; the default state is the execution's initial one
    assert (
        replay_run(
            run_dir,
            parent.execution_id,
            ForkPlan(repeats=3, checkpoints=[after1.boundary.checkpoint_id]),
            progress=False,
            model_opener=opener,
        ).ran
        == 0
    )
    result = CliRunner().invoke(
        app, ["replay", str(run_dir), "--execution", parent.execution_id[:12], "--temperature", "0", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    initial = read_records(run_dir / REPLAYS_FILE)[-1]
    assert initial.parent.boundary == "initial" and initial.sampling["temperature"] == 0


def test_replay_refuses_copies_and_unknown_states(tmp_path, isolated_cache):
    run_dir = make_run(tmp_path)
    parent = RunStore(run_dir).records()[0]
    runner = CliRunner()
    result = runner.invoke(
        app, ["replay", str(run_dir), "--execution", parent.execution_id, "--repeats", "3", "--temperature", "0"]
    )
    assert result.exit_code == 2 and "copy of the first draw" in result.output
    result = runner.invoke(app, ["replay", str(run_dir), "--execution", parent.execution_id, "--checkpoint", "nope"])
    assert result.exit_code == 2 and "--checkpoint nope: no saved states" in result.output
    assert not (run_dir / REPLAYS_FILE).exists()


def test_a_replay_on_the_original_thread_leaves_listing_forks_and_verify_unchanged(tmp_path, isolated_cache):
    """What `graph.ainvoke(None, past_config)` on a recorded thread does: LangGraph writes a second
    path into that thread. Boundary discovery reads only the original path, so nothing changes."""
    run_dir = make_run(tmp_path)
    store = RunStore(run_dir)
    spec = load_spec(run_dir / "spec.yaml")
    parent = store.records()[0]
    listing = [s.model_dump() for s in saved_states(run_dir)]
    with sqlite_checkpointer(run_dir / "checkpoints.sqlite") as saver:
        before_tasks = [
            t.execution_id for t in plan_study(saver, store, spec, ForkPlan(), parent_records(store, None))[0]
        ]
    n_before = len(thread_checkpoints(run_dir, parent.execution_id))
    after1 = next(s for s in saved_states(run_dir, parent.execution_id) if s.boundary.boundary == "after_search_1")

    pool = SourcePool(progress=False)
    try:
        with sqlite_checkpointer(run_dir / "checkpoints.sqlite") as saver:
            graph = build_graph(resolve_policy("constrained"), saver)
            ctx = agent_context(spec, ScriptedModel(responder=search_until_told_responder), pool)
            config = {
                "configurable": {"thread_id": parent.execution_id, "checkpoint_id": after1.boundary.checkpoint_id},
                "recursion_limit": recursion_limit(2),
            }
            out = invoke(graph, None, config, context=ctx, durability="sync")
    finally:
        pool.close()
    assert out["final_answer"] and len(thread_checkpoints(run_dir, parent.execution_id)) > n_before  # written

    assert [s.model_dump() for s in saved_states(run_dir)] == listing
    with sqlite_checkpointer(run_dir / "checkpoints.sqlite") as saver:
        after_tasks = [
            t.execution_id for t in plan_study(saver, store, spec, ForkPlan(), parent_records(store, None))[0]
        ]
    assert after_tasks == before_tasks
    report = verify_run(run_dir, sample=0)
    assert report.ok, report.to_json()
