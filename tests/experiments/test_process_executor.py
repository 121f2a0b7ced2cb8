"""The local multi-process executor: the same executions as a one-process run, each recorded
once, checkpoints folded into the run's database, a killed run's leftovers recovered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.planning import plan_executions, select_questions
from branchpoint.experiments.process_executor import (
    SHARD_PREFIX,
    deal,
    run_experiment_processes,
)
from branchpoint.experiments.shards import SHARDS_DIR, ShardTask, run_shard
from branchpoint.experiments.states import saved_states
from branchpoint.traces import read_records

SPEC = {
    "name": "procs",
    "questions": {"path": "demo", "limit": 5},
    "model": {"provider": "scripted", "script": ['answer", "text": "Canberra"}'], "max_tokens": 32},
    "agent": {"policy": "constrained", "search": False},
    "sweep": {"agent.evidence_words": [40, 60]},
}


@pytest.fixture()
def spec_path(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    return path


def _records(run_dir: Path) -> dict[str, tuple[str, str | None]]:
    return {r.execution_id: (r.status, r.final_answer) for r in read_records(run_dir / "executions.jsonl")}


def test_deal_mixes_conditions_into_every_part(spec_path):
    spec = load_spec(spec_path)
    plan = plan_executions(spec, select_questions(spec))
    parts = deal(plan, 3)
    assert sorted(p.execution_id for part in parts for p in part) == sorted(p.execution_id for p in plan)
    assert [len(p) for p in parts] == [4, 3, 3]
    assert deal(plan[:2], 3) == [[plan[0]], [plan[1]]]  # never an empty part


def test_processes_run_matches_one_process_and_recovers_a_killed_run(tmp_path, spec_path, isolated_cache):
    spec = load_spec(spec_path)
    local = run_experiment(spec, tmp_path / "local", progress=False, concurrency=2)
    assert local.ran == 10

    # A killed run left one part's folder with 3 finished executions (and their checkpoints).
    run_dir = tmp_path / "procs"
    RunStore(run_dir).create(spec.model_dump(mode="json"))
    plan = plan_executions(spec, select_questions(spec))
    run_shard(
        ShardTask(
            spec.model_dump(mode="json"),
            str(run_dir),
            f"{SHARD_PREFIX}0",
            [p.execution_id for p in plan[:3]],
            None,
            1,
            os.getcwd(),
        )
    )

    summary = run_experiment_processes(spec, run_dir, processes=2, concurrency=4, progress=False)

    assert (summary.planned, summary.skipped, summary.ran, summary.statuses) == (10, 3, 7, {"ok": 7})
    ids = [r.execution_id for r in read_records(run_dir / "executions.jsonl")]
    assert len(ids) == len(set(ids)) == 10
    assert _records(run_dir) == _records(tmp_path / "local")
    assert not (run_dir / SHARDS_DIR).exists()  # every part folded, then its folder deleted
    # checkpoints were folded into the run's own database: the same boundaries as one process
    assert sorted(s.boundary.kind for s in saved_states(run_dir)) == sorted(
        s.boundary.kind for s in saved_states(tmp_path / "local")
    )
    assert {s.execution_id for s in saved_states(run_dir)} == set(ids)

    again = run_experiment_processes(spec, run_dir, processes=2, concurrency=4, progress=False)
    assert (again.ran, again.skipped) == (0, 10)


def test_a_redone_execution_keeps_only_its_new_checkpoints(tmp_path, spec_path, isolated_cache):
    spec = load_spec(spec_path)
    run_dir = tmp_path / "procs"
    run_experiment_processes(spec, run_dir, processes=2, concurrency=2, progress=False)
    before = {s.execution_id: s.boundary.checkpoint_id for s in saved_states(run_dir)}
    # forget one record (as if its attempt had been killed before appending): it is redone,
    # and its thread in the run's database holds the new attempt's checkpoints only
    lines = (run_dir / "executions.jsonl").read_text().splitlines(keepends=True)
    gone = read_records(run_dir / "executions.jsonl")[0].execution_id
    (run_dir / "executions.jsonl").write_text("".join(lines[1:]))
    summary = run_experiment_processes(spec, run_dir, processes=2, concurrency=2, progress=False)
    assert summary.ran == 1
    mine = [s.boundary for s in saved_states(run_dir) if s.execution_id == gone]
    assert len(mine) == len([eid for eid in before if eid == gone]) >= 1
    assert all(b.checkpoint_id != before[gone] for b in mine)


def test_embedded_model_is_refused_with_more_than_one_process(tmp_path, spec_path):
    spec = load_spec(spec_path).model_copy(deep=True)
    spec.model.provider = "embedded"
    with pytest.raises(InputError, match="--processes 2 needs a model server"):
        run_experiment_processes(spec, tmp_path / "run", processes=2, progress=False)
    assert not (tmp_path / "run").exists()


def test_a_failing_part_stops_the_run_with_its_error(tmp_path, spec_path, isolated_cache, monkeypatch):
    import branchpoint.experiments.process_executor as pe

    def broken(task: ShardTask) -> None:  # what a worker meets: e.g. a question file it cannot read
        raise InputError(f"part {task.shard}: questions.jsonl line 1: not JSON")

    monkeypatch.setattr(pe, "run_shard", broken)  # forked workers inherit the patch
    monkeypatch.setattr(pe, "_context", lambda: pe.multiprocessing.get_context("fork"))
    with pytest.raises(InputError, match=r"part local-\d: questions.jsonl line 1"):
        run_experiment_processes(load_spec(spec_path), tmp_path / "run", processes=2, progress=False)
    trace = tmp_path / "run" / "executions.jsonl"
    assert not trace.exists() or read_records(trace) == []
    assert not any((tmp_path / "run" / SHARDS_DIR).glob(f"{SHARD_PREFIX}*"))  # folded and removed


def test_cli_processes_option(tmp_path, spec_path, isolated_cache):
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(spec_path),
            "--out",
            str(tmp_path / "run"),
            "--processes",
            "2",
            "--concurrency",
            "2",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "10 run" in result.output
    bad = CliRunner().invoke(app, ["run", str(spec_path), "--executor", "ray", "--processes", "2"])
    assert bad.exit_code != 0 and "--processes applies to --executor local only" in bad.output


def _children(pid: int) -> set[int]:
    """Processes whose parent is `pid` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
def test_sigkill_of_the_driver_takes_its_processes_and_a_rerun_completes_exactly_once(tmp_path, isolated_cache):
    import signal
    import subprocess
    import sys
    import time

    from branchpoint.experiments.verify import verify_run
    from tests.conftest import REPO, wait_gone
    from tests.experiments.test_faults import spec_file
    from tests.servers.openai_fault_server import FaultConfig, FaultServer

    with FaultServer(FaultConfig(latency_s=0.05)) as server:
        spec = spec_file(tmp_path, server.base_url, n=40, name="prockill")
        run_dir = tmp_path / "run"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "branchpoint.cli",
                "run",
                str(spec),
                "--out",
                str(run_dir),
                "--processes",
                "2",
                "--concurrency",
                "2",
                "--no-progress",
            ],
            cwd=REPO,
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        part = run_dir / SHARDS_DIR / f"{SHARD_PREFIX}0" / "executions.jsonl"
        deadline = time.monotonic() + 90
        while not (part.is_file() and part.read_bytes().count(b"\n") >= 3):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no part made progress"
            time.sleep(0.01)
        workers = _children(proc.pid)
        assert len(workers) >= 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert all(wait_gone(w, 10.0) for w in workers), "worker processes outlived their killed driver"
        summary = run_experiment_processes(load_spec(spec), run_dir, processes=2, concurrency=2, progress=False)
    assert summary.planned == 40 and summary.skipped >= 3 and summary.ran == 40 - summary.skipped
    ids = [r.execution_id for r in read_records(run_dir / "executions.jsonl")]
    assert len(ids) == len(set(ids)) == 40
    report = verify_run(run_dir, sample=0)
    assert report.ok, report.problems


def test_a_leftover_part_does_not_overwrite_states_of_executions_redone_elsewhere(tmp_path, spec_path, isolated_cache):
    """A killed `--processes` run left a part folder; a one-process run redid its executions in
    the run folder; the next `--processes` run folds the part without replacing those states."""
    from branchpoint.experiments.verify import verify_run

    spec = load_spec(spec_path)
    run_dir = tmp_path / "procs"
    RunStore(run_dir).create(spec.model_dump(mode="json"))
    plan = plan_executions(spec, select_questions(spec))
    run_shard(
        ShardTask(
            spec.model_dump(mode="json"),
            str(run_dir),
            f"{SHARD_PREFIX}0",
            [p.execution_id for p in plan[:3]],
            None,
            1,
            os.getcwd(),
        )
    )
    run_experiment(spec, run_dir, progress=False)  # redoes all 10 here (it does not fold parts)
    summary = run_experiment_processes(spec, run_dir, processes=2, progress=False)
    assert summary.ran == 0
    report = verify_run(run_dir, sample=0)
    assert report.ok, report.problems
