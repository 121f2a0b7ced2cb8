"""Fork studies with the scripted model: every action at every boundary kind, repeats sharing
cached evidence, no leaks from the original path, illegal actions, minimal searches, concurrency."""

from __future__ import annotations

import json

import pytest

from branchpoint.checkpoints import sqlite_checkpointer
from branchpoint.checkpoints.fork import IllegalActionError
from branchpoint.checkpoints.values import checkpoint_values
from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from tests.experiments.conftest import CountingOpener, search_until_told_responder


def opener() -> CountingOpener:
    """Scripted models that search whenever they may, so parents have every boundary kind."""
    return CountingOpener(responder=search_until_told_responder)


FORK_SPEC = {
    "agent": {"policy": "constrained", "search_cap": 2, "top_k": 2},
    "questions": {"path": "demo", "categories": ["answerable"], "limit": 3},
    "retrieval": {
        "default": "demo",
        "sources": {"demo": {"corpus": "demo"}, "demo_chunks": {"corpus": "demo", "chunk_words": 40}},
    },
    "sweep": {},
}


@pytest.fixture()
def base_run(tmp_path, write_spec, isolated_cache):
    run_dir = tmp_path / "run"
    run_experiment(load_spec(write_spec(FORK_SPEC)), run_dir, progress=False, model_opener=opener())
    return run_dir


def branches_by(records, **kw):
    return [r for r in records if all(getattr(r, k) == v for k, v in kw.items())]


def test_parent_runs_have_every_boundary_kind(base_run):
    for rec in RunStore(base_run).records():
        assert rec.search_calls == 2 and rec.status == "ok"
        assert len(rec.checkpoint_ids) == 5  # initial, pending, after_1, pending, after_2


def test_every_action_at_every_boundary(base_run):
    plan = ForkPlan(
        actions=["THINK", "SEARCH", "STOP", "SWITCH"], repeats=2, search_budget=1, switch_source="demo_chunks"
    )
    summary = fork_run(base_run, plan, progress=False, model_opener=opener())
    # per parent: 3 non-pending boundaries x {THINK, SEARCH} + 2 pending x {STOP, SEARCH, SWITCH}
    assert summary.planned == 3 * (3 * 2 + 2 * 3) * 2 == summary.ran
    assert summary.illegal_skipped == {
        "STOP@initial": 3,
        "SWITCH@initial": 3,
        "STOP@after_search_k": 6,
        "SWITCH@after_search_k": 6,
        "THINK@pending_query": 6,
    }
    records = fork_records(base_run)
    assert all(r.status == "ok" and r.parent is not None for r in records)
    parents = {r.execution_id: r for r in RunStore(base_run).records()}

    for r in branches_by(records, branch="THINK"):
        # no original step leaks into the branch: it answers at once from the evidence in hand
        assert [s.kind for s in r.steps] == ["forced_answer"] and r.search_calls == 0
        assert r.prefix["search_calls"] in (0, 1, 2)
        assert r.directive == {"action": "THINK"}
    for r in branches_by(records, branch="STOP"):
        assert r.parent.boundary == "pending_query"
        assert [s.kind for s in r.steps] == ["forced_answer"] and r.search_calls == 0
    for r in branches_by(records, branch="SEARCH"):
        assert r.search_calls <= 1  # the budget
        if r.parent.boundary == "pending_query":  # SAME: the pending query runs first, from the cache
            parent = parents[r.parent.execution_id]
            first = r.steps[0]
            assert first.kind == "search" and first.source == "demo" and first.cache_hit is True
            assert first.query in [s.query for s in parent.steps if s.kind == "search"]
    for r in branches_by(records, branch="SWITCH"):
        assert r.steps[0].kind == "search" and r.steps[0].source == "demo_chunks"
        assert r.condition["fork.switch_source"] == "demo_chunks" and r.condition["fork.action"] == "SWITCH"
        assert all("#" in d.doc_id or d.doc_id.startswith("demo-") for d in r.steps[0].retrieved)
    # token costs are the continuation's own; the prefix is recorded beside them
    for r in records:
        assert r.input_tokens == sum(s.usage.input_tokens for s in r.steps if s.usage)
        assert set(r.prefix) == {"steps", "search_calls", "input_tokens", "output_tokens"}


def test_repeats_share_evidence_and_rerun_is_a_no_op(base_run):
    plan = ForkPlan(boundaries=["pending_query"], actions=["SEARCH"], repeats=3, search_budget=1)
    fork_run(base_run, plan, progress=False, model_opener=opener())
    records = fork_records(base_run)
    by_parent: dict = {}
    for r in records:
        by_parent.setdefault((r.parent.execution_id, r.parent.checkpoint_id), []).append(r)
    for group in by_parent.values():
        assert sorted(r.repeat for r in group) == [0, 1, 2]
        evidence = [[d.doc_id for d in r.steps[0].retrieved] for r in group]
        assert all(e == evidence[0] for e in evidence)
        assert all(r.steps[0].cache_hit for r in group)
    again = opener()
    summary = fork_run(base_run, plan, progress=False, model_opener=again)
    assert summary.ran == 0 and summary.skipped_done == len(records) and again.opened == 0


def test_illegal_action_at_a_single_boundary_is_refused(base_run):
    eid = RunStore(base_run).records()[0].execution_id
    plan = ForkPlan(boundaries=["after_search_k"], actions=["STOP"], executions=[eid[:10]])
    with pytest.raises(IllegalActionError, match="STOP is not legal at after_search_1 .no query is pending"):
        fork_run(base_run, plan, progress=False, model_opener=opener())
    assert not (base_run / "forks.jsonl").exists()


def test_bad_fork_requests(base_run):
    with pytest.raises(InputError, match="--actions: unknown action 'JUMP'"):
        fork_run(base_run, ForkPlan(actions=["JUMP"]), progress=False)
    with pytest.raises(InputError, match="SWITCH needs a source"):
        fork_run(base_run, ForkPlan(actions=["SWITCH"]), progress=False)
    with pytest.raises(InputError, match="--switch-source: unknown source 'wiki'"):
        fork_run(base_run, ForkPlan(actions=["SWITCH"], switch_source="wiki"), progress=False)
    with pytest.raises(InputError, match="--execution zzz: no finished executions"):
        fork_run(base_run, ForkPlan(executions=["zzz"]), progress=False)
    with sqlite_checkpointer(base_run / "checkpoints.sqlite") as saver:
        eid = RunStore(base_run).records()[0].execution_id
        with pytest.raises(InputError, match="checkpoint nope of execution .* does not exist"):
            checkpoint_values(saver, eid, "nope")


def test_minimal_search_from_real_counterfactuals(base_run):
    summary = fork_run(
        base_run, ForkPlan(actions=[], repeats=1, minimal_search=True), progress=False, model_opener=opener()
    )
    rows = [json.loads(line) for line in (base_run / "minimal_search.jsonl").read_text().splitlines()]
    assert rows == summary.minimal
    correct = [r for r in rows]
    assert correct, "the scripted parents answer with the first passage's title: some are correct"
    for row in rows:
        assert row["searches"] == 2
        # THINK at `initial` answers "I do not know" (wrong); after one search the title is there
        assert row["minimal_searches"] == 1
    assert summary.over_search_pct == pytest.approx(100.0)
    think = fork_records(base_run)
    assert {r.parent.boundary for r in think} == {"initial", "after_search_1"}


def test_64_branches_at_once_into_one_sqlite_store(base_run):
    eid = RunStore(base_run).records()[0].execution_id
    plan = ForkPlan(
        actions=["THINK", "SEARCH"],
        boundaries=["after_search_k", "initial"],
        repeats=11,
        executions=[eid],
        concurrency=16,
        search_budget=1,
    )
    summary = fork_run(base_run, plan, progress=False, model_opener=opener())
    assert summary.ran == 66 and summary.statuses == {"ok": 66}
    records = fork_records(base_run)
    assert len({r.execution_id for r in records}) == 66
    with sqlite_checkpointer(base_run / "checkpoints.sqlite") as saver:
        for r in records:
            assert checkpoint_values(saver, r.execution_id, r.checkpoint_ids[0])["directive"]["action"] == r.branch
