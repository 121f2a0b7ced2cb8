"""Choosing states to fork: by checkpoint id, forks of forks, conditions without search, SWITCH
to the current source, and what `checkpoints ls` shows."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.states import saved_states
from branchpoint.experiments.verify import verify_run
from tests.experiments.conftest import CountingOpener, search_until_told_responder

SPEC = {
    "name": "select",
    "agent": {"policy": "constrained", "search_cap": 2, "top_k": 2},
    "questions": {"path": "demo", "categories": ["answerable"], "limit": 2},
    "model": {"provider": "scripted", "script": ["unused"], "max_tokens": 32},
    "retrieval": {
        "default": "demo",
        "sources": {"demo": {"corpus": "demo"}, "demo_chunks": {"corpus": "demo", "chunk_words": 12}},
    },
    "sweep": {"agent.search": [True, False]},
}


def opener() -> CountingOpener:
    return CountingOpener(responder=search_until_told_responder)


@pytest.fixture()
def run_dir(tmp_path, isolated_cache):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "run"
    run_experiment(load_spec(spec), out, progress=False, model_opener=opener())
    return out


def test_no_search_or_switch_branches_where_the_condition_offers_no_search(run_dir):
    summary = fork_run(
        run_dir,
        ForkPlan(actions=["THINK", "SEARCH"], boundaries=["initial"], repeats=1),
        progress=False,
        model_opener=opener(),
    )
    assert summary.illegal_skipped == {"SEARCH@no-search": 2}  # the two agent.search=false executions
    branches = fork_records(run_dir)
    assert {(b.condition["agent.search"], b.branch) for b in branches} == {
        (True, "THINK"),
        (True, "SEARCH"),
        (False, "THINK"),
    }
    result = CliRunner().invoke(
        app, ["fork", str(run_dir), "--boundaries", "initial", "--repeats", "1", "--no-progress"]
    )
    assert result.exit_code == 0 and "skipped where the condition offers no search tool: SEARCH: 2" in result.output


def test_switch_to_the_current_source_is_refused(run_dir):
    with pytest.raises(InputError, match="that is the current source of the state"):
        fork_run(
            run_dir,
            ForkPlan(actions=["SWITCH"], boundaries=["pending_query"], repeats=1, switch_source="demo"),
            progress=False,
            model_opener=opener(),
        )
    assert not (run_dir / "forks.jsonl").exists()


def test_fork_one_saved_state_by_id_and_then_fork_the_branch(run_dir):
    states = [s for s in saved_states(run_dir) if s.condition["agent.search"]]
    target = next(s for s in states if s.boundary.boundary == "after_search_1")
    summary = fork_run(
        run_dir,
        ForkPlan(checkpoints=[target.boundary.checkpoint_id[-12:]], repeats=2, search_budget=2),
        progress=False,
        model_opener=opener(),
    )
    branches = fork_records(run_dir)
    assert summary.ran == 4 and {b.parent.checkpoint_id for b in branches} == {target.boundary.checkpoint_id}
    assert {b.branch for b in branches} == {"THINK", "SEARCH"}
    with pytest.raises(InputError, match="--checkpoint zzz: no saved state"):
        fork_run(run_dir, ForkPlan(checkpoints=["zzz"]), progress=False, model_opener=opener())

    # a branch's own saved states are legal boundaries: fork a SEARCH branch at its first state after a search
    child = next(b for b in branches if b.branch == "SEARCH" and b.search_calls >= 1)
    child_states = saved_states(run_dir, child.execution_id)
    assert child_states and all(
        s.branch == "SEARCH" and s.parent_execution_id == target.execution_id for s in child_states
    )
    grand_state = next(s for s in child_states if s.boundary.boundary == "after_search_2")
    fork_run(
        run_dir,
        ForkPlan(checkpoints=[grand_state.boundary.checkpoint_id], actions=["THINK"], repeats=1),
        progress=False,
        model_opener=opener(),
    )
    [grand] = [b for b in fork_records(run_dir) if b.parent.execution_id == child.execution_id]
    assert grand.condition["fork.depth"] == 2 and grand.condition["fork.action"] == "THINK"
    # the parent chain leads back to the original execution
    by_id = {r.execution_id: r for r in [*RunStore(run_dir).records(), *fork_records(run_dir)]}
    chain = [grand.execution_id]
    while by_id[chain[-1]].parent is not None:
        chain.append(by_id[chain[-1]].parent.execution_id)
    assert chain == [grand.execution_id, child.execution_id, target.execution_id]
    # what was spent before the grandchild's state: the original's prefix plus the child's own steps
    assert grand.prefix["search_calls"] == 2
    assert grand.prefix["steps"] == child.prefix["steps"] + 2  # the child's decide + search before that state
    assert verify_run(run_dir, sample=0).ok  # branches of branches are not orphans


def test_checkpoints_ls_shows_question_condition_outcome_and_hides_branches(run_dir):
    runner = CliRunner()
    fork_run(
        run_dir, ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=1), progress=False, model_opener=opener()
    )
    rows = [
        json.loads(line)
        for line in runner.invoke(app, ["checkpoints", "ls", str(run_dir), "--json"]).output.splitlines()
    ]
    assert rows and all(r["branch"] is None for r in rows)  # branch threads hidden by default
    assert {r["outcome"] for r in rows} <= {"correct", "abstained", "wrong"}
    assert all(len(r["checkpoint_id"]) > 20 and r["question"] and "agent.search" in r["condition"] for r in rows)
    with_branches = runner.invoke(app, ["checkpoints", "ls", str(run_dir), "--json", "--branches"]).output.splitlines()
    assert len(with_branches) > len(rows)
    wide = runner.invoke(app, ["checkpoints", "ls", str(run_dir), "--wide"])
    assert (
        wide.exit_code == 0 and rows[0]["checkpoint_id"] in wide.output.replace("\n", "")
    ) or "condition" in wide.output
    short = runner.invoke(app, ["checkpoints", "ls", str(run_dir)])
    assert "outcome" in short.output and "ids shortened" in short.output
