"""The one driver behind every executor: the backends give the same run folder (records and
checkpoint boundaries), leave no shard folder, fold what a killed shard left so a rerun does only
what is missing, and keep (and name) a shard folder whose fold fails."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.executors import run_spec
from branchpoint.experiments.planning import plan_executions, select_questions
from branchpoint.experiments.runner import RunSummary
from branchpoint.experiments.shard_fold import ShardFoldError
from branchpoint.experiments.shards import SHARDS_DIR, ShardTask, run_shard
from branchpoint.experiments.states import saved_states
from branchpoint.experiments.verify import verify_run
from branchpoint.experiments.work_driver import InProcess, Shard, ShardOutcome, drive, missing, named_error
from branchpoint.traces import read_records

SPEC = {
    "name": "drv",
    "questions": {"path": "demo", "limit": 3},
    "model": {
        "provider": "scripted",
        "script": ['search", "text": "capital of Australia"}', 'answer", "text": "Canberra"}'],
        "max_tokens": 32,
    },
    "agent": {"policy": "constrained", "search": True, "search_cap": 2, "top_k": 2},
    "sweep": {"agent.evidence_words": [40, 60]},
}


@pytest.fixture()
def spec_path(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    return path


def run_content(run_dir: Path) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """What a run folder holds, up to timings, checkpoint ids, which execution searched a query
    first (`cache_hit`: shards keep their own retrieval caches until folded) and which
    invocation wrote a record: its records (by id) and the legal boundaries saved for each
    execution."""
    records = []
    for rec in read_records(run_dir / "executions.jsonl"):
        data = rec.model_dump(mode="json", exclude={"wall_s", "checkpoint_ids", "invocation"})
        for step in data.get("steps") or []:
            step.pop("latency_s", None)
            step.pop("cache_hit", None)
        data["checkpoints"] = len(rec.checkpoint_ids or [])
        records.append(data)
    states = sorted(
        (s.execution_id, s.boundary.step, s.boundary.boundary, s.boundary.searches, s.boundary.pending_query)
        for s in saved_states(run_dir)
    )
    return sorted(records, key=lambda r: r["execution_id"]), states


def no_shards_left(run_dir: Path) -> bool:
    return not (run_dir / SHARDS_DIR).exists()


def leave_a_shard(spec_path: Path, run_dir: Path, name: str, count: int) -> list[str]:
    """What a killed run leaves: a shard folder with `count` finished executions; their ids."""
    spec = load_spec(spec_path)
    RunStore(run_dir).create(spec.model_dump(mode="json"))
    ids = [p.execution_id for p in plan_executions(spec, select_questions(spec))[:count]]
    run_shard(ShardTask(spec.model_dump(mode="json"), str(run_dir), name, ids, None, 1, os.getcwd()))
    return ids


def test_in_process_and_processes_give_the_same_run_folder(tmp_path, spec_path, isolated_cache):
    spec = load_spec(spec_path)
    here = run_spec(spec, tmp_path / "here", progress=False, concurrency=2)
    procs = run_spec(spec, tmp_path / "procs", processes=2, concurrency=2, progress=False)
    assert (here.ran, procs.ran, procs.statuses) == (6, 6, {"ok": 6})
    assert run_content(tmp_path / "procs") == run_content(tmp_path / "here")
    boundaries = {b[2] for b in run_content(tmp_path / "here")[1]}
    assert {"initial", "pending_query", "after_search_1"} <= boundaries
    assert no_shards_left(tmp_path / "procs") and no_shards_left(tmp_path / "here")
    for run_dir in (tmp_path / "here", tmp_path / "procs"):
        report = verify_run(run_dir, sample=0)
        assert report.ok, report.problems


def test_a_run_here_folds_what_a_killed_processes_run_left(tmp_path, spec_path, isolated_cache):
    """Whatever backend made a shard folder, the next run (here, in one process) folds it first."""
    run_dir = tmp_path / "run"
    left = leave_a_shard(spec_path, run_dir, "local-0", 2)
    summary = run_spec(load_spec(spec_path), run_dir, progress=False)
    assert (summary.planned, summary.skipped, summary.ran) == (6, 2, 4)
    assert no_shards_left(run_dir)
    ids = [r.execution_id for r in read_records(run_dir / "executions.jsonl")]
    assert ids[:2] == left and len(set(ids)) == len(ids) == 6
    run_experiment(load_spec(spec_path), tmp_path / "one", progress=False)
    assert run_content(run_dir) == run_content(tmp_path / "one")


def test_a_rerun_reads_the_run_s_records_once(tmp_path, spec_path, isolated_cache, monkeypatch):
    """The driver reads which executions are finished once, under its lock, and hands them to the
    runner (the trace file of a big run is not parsed twice before the first execution); with
    shards to fold (`--processes`), the merger's one read serves both."""
    run_dir, procs = tmp_path / "run", tmp_path / "procs"
    spec = load_spec(spec_path)
    first_two = [p.execution_id for p in plan_executions(spec, select_questions(spec))][:2]
    for folder in (run_dir, procs):
        run_experiment(spec, folder, progress=False, execution_ids=first_two)
    reads: list[str] = []
    real = RunStore.iter_records

    def counted(self: RunStore, file: str = "executions.jsonl") -> Any:
        reads.append(f"{self.run_dir.name}/{file}")
        return real(self, file)

    monkeypatch.setattr(RunStore, "iter_records", counted)
    summary = run_spec(load_spec(spec_path), run_dir, progress=False)
    assert (summary.skipped, summary.ran, reads) == (2, 4, ["run/executions.jsonl"])
    reads.clear()
    assert run_spec(load_spec(spec_path), run_dir, progress=False).ran == 0 and reads == ["run/executions.jsonl"]
    reads.clear()
    summary = run_spec(load_spec(spec_path), procs, processes=2, progress=False)
    assert (summary.ran, [r for r in reads if r.startswith("procs/")]) == (
        4,
        ["procs/executions.jsonl"],
    )  # the merger's


def test_a_run_here_plans_once(tmp_path, spec_path, isolated_cache, monkeypatch):
    """The in-process backend runs the driver's plan (`run_planned`): the runner does not plan again."""
    import branchpoint.experiments.driver as driver
    import branchpoint.experiments.runner as runner

    calls = []

    def counted(*args: Any) -> Any:
        calls.append(args)
        return plan_executions(*args)

    run_dir = tmp_path / "run"
    leave_a_shard(spec_path, run_dir, "local-0", 2)
    monkeypatch.setattr(runner, "plan_executions", counted)
    monkeypatch.setattr(driver, "plan_executions", counted)
    summary = run_spec(load_spec(spec_path), run_dir, progress=False)
    assert (summary.planned, summary.skipped, summary.ran, len(calls)) == (6, 2, 4, 1)
    run_experiment(load_spec(spec_path), tmp_path / "one", progress=False)
    assert run_content(run_dir) == run_content(tmp_path / "one")


def _kill_one_shard(task: ShardTask) -> Any:
    """A shard process that dies (SIGKILL) after recording two of its executions (shard local-1)."""
    if task.shard != "local-1":
        return run_shard(task)
    run_shard(ShardTask(**{**task.__dict__, "execution_ids": task.execution_ids[:2]}))
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_rerun_after_a_killed_shard_does_only_what_is_missing(tmp_path, spec_path, isolated_cache, monkeypatch):
    import branchpoint.experiments.process_executor as pe

    monkeypatch.setattr(pe, "run_shard", _kill_one_shard)  # forked workers inherit the patch
    monkeypatch.setattr(pe, "_context", lambda: pe.multiprocessing.get_context("fork"))
    run_dir = tmp_path / "run"
    spec = load_spec(spec_path)
    with pytest.raises(RuntimeError, match=r"the process running shard local-1 died \(exit code -9\)"):
        run_spec(spec, run_dir, processes=2, progress=False)
    assert no_shards_left(run_dir)  # what the killed shard had recorded was folded
    recorded = {r.execution_id for r in read_records(run_dir / "executions.jsonl")}
    assert len(recorded) >= 2

    monkeypatch.undo()
    again = run_spec(spec, run_dir, processes=2, progress=False)
    assert (again.planned, again.skipped, again.ran) == (6, len(recorded), 6 - len(recorded))
    run_experiment(spec, tmp_path / "one", progress=False)
    assert run_content(run_dir) == run_content(tmp_path / "one")
    report = verify_run(run_dir, sample=0)
    assert report.ok, report.problems


@pytest.mark.parametrize("processes", [1, 2])
def test_a_shard_folder_whose_fold_fails_is_kept_and_named(tmp_path, spec_path, isolated_cache, processes):
    run_dir = tmp_path / "run"
    leave_a_shard(spec_path, run_dir, "local-0", 2)
    trace = run_dir / SHARDS_DIR / "local-0" / "executions.jsonl"
    good = trace.read_text()
    with trace.open("a") as fh:
        fh.write('{"execution_id": 3}\n')  # a complete line that is no record
    with pytest.raises(ShardFoldError, match=r"shard local-0: folding .*shards/local-0 into the run failed"):
        run_spec(load_spec(spec_path), run_dir, processes=processes, progress=False)
    assert trace.read_text().startswith(good)  # the folder is kept, with everything it recorded
    trace.write_text(good)  # the cause fixed: the next run folds it and runs the rest
    summary = run_spec(load_spec(spec_path), run_dir, processes=processes, progress=False)
    assert (summary.skipped, summary.ran) == (2, 4) and no_shards_left(run_dir)


def test_the_driver_names_a_failed_shard_and_stops_the_rest():
    stopped = []

    class Failing(InProcess[str]):
        def shards(self, todo):
            return [Shard("cond-abc", todo, where="condition base")]

        def stop(self):
            stopped.append(True)

    def run(items: list[str]) -> ShardOutcome:
        raise InputError("questions.jsonl line 1: not JSON")

    shard = Shard("cond-abc", ["a"], where="condition base")
    assert str(named_error(shard, InputError("x"))) == "shard cond-abc (condition base): x"
    bug = KeyError("k")
    assert named_error(shard, bug) is bug  # a bug keeps its own type and traceback
    assert missing(["a", "b", "c"], {"b"}, str) == ["a", "c"]
    with pytest.raises(InputError, match="questions.jsonl line 1"):
        drive(["a"], Failing(run), RunSummary(run_dir=Path()), progress=False)
    assert stopped == [True]
    summary = RunSummary(run_dir=Path())
    drive(["a", "b"], InProcess(lambda items: ShardOutcome(ran=len(items), statuses={"ok": 2})), summary)
    assert (summary.ran, summary.statuses) == (2, {"ok": 2})
