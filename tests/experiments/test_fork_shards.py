"""Fork studies over processes and Ray: the same branches as a local study (ids, seeds, outcomes,
saved states), folded into the run folder exactly once, a killed driver's shards recovered.

Every study runs on the simulated model (one server the processes share, reached as
`provider: openai`), whose replies are a seeded function of the request: a branch sharded
elsewhere draws what it draws here only if its request (seed included) is the same.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.shards import FORK_SHARDS_DIR
from branchpoint.experiments.states import saved_states
from branchpoint.experiments.verify import verify_run
from branchpoint.models.spec import SimServerSpec
from branchpoint.provenance import read_invocations
from branchpoint.sim import SimServer
from branchpoint.traces import FORKS_FILE

PLAN = {"actions": ["THINK", "SEARCH", "STOP"], "repeats": 2, "search_budget": 1, "concurrency": 4}

#: (policy, model style): a completion-style policy (few-shot JSON) and a chat-style one (tool calls).
POLICIES = [("constrained", "completion"), ("native", "chat")]


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """One simulated model server for the module (no latency), shared by every process."""
    with SimServer(SimServerSpec(latency_scale=0.0), "branchpoint-sim-instruct") as server:
        yield server.base_url


def write_spec(tmp_path: Path, url: str, policy: str, style: str, name: str = "fshard", n: int = 2) -> Path:
    data = {
        "name": name,
        "questions": {"path": "demo", "sample": {"answerable": n, "unanswerable": n}},
        "model": {
            "provider": "openai",
            "base_url": url,
            "name": "branchpoint-sim-instruct",
            "style": style,
            "max_tokens": 256,
            "seed": 3,
        },
        "agent": {"policy": policy, "search_cap": 2, "top_k": 2},
        "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
    }
    path = tmp_path / f"{name}-{policy}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def fork_content(run_dir: Path) -> tuple[dict[str, dict[str, Any]], list[tuple[Any, ...]]]:
    """A study's branches up to order and timings (and which invocation wrote them, and which
    branch searched a query first): each record by id, and the saved states of every branch."""
    records = {}
    for rec in fork_records(run_dir):
        data = rec.model_dump(mode="json", exclude={"wall_s", "checkpoint_ids", "invocation"})
        for step in data.get("steps") or []:
            step.pop("latency_s", None)
            step.pop("cache_hit", None)
        data["checkpoints"] = len(rec.checkpoint_ids or [])
        assert rec.execution_id not in records, f"branch {rec.execution_id} recorded twice"
        records[rec.execution_id] = data
    states = sorted(
        (s.execution_id, s.boundary.step, s.boundary.boundary, s.boundary.searches, s.boundary.pending_query)
        for s in saved_states(run_dir, branches=True)
        if s.execution_id in records
    )
    return records, states


def study_pair(tmp_path: Path, url: str, policy: str, style: str) -> tuple[Path, Path]:
    """A run on the simulated model, and two copies of it to fork."""
    base = tmp_path / f"run-{policy}"
    run_experiment(load_spec(write_spec(tmp_path, url, policy, style)), base, progress=False, concurrency=4)
    local, sharded = tmp_path / f"local-{policy}", tmp_path / f"sharded-{policy}"
    shutil.copytree(base, local)
    shutil.copytree(base, sharded)
    return local, sharded


def check_same_study(local: Path, sharded: Path) -> None:
    """The sharded study's branches are the local one's: same ids, seeds, outcomes, saved states;
    every action ran; stored once; no shard folder left; one invocation names them all."""
    mine, theirs = fork_content(sharded), fork_content(local)
    assert sorted(mine[0]) == sorted(theirs[0])
    assert mine == theirs
    branches = fork_records(sharded)
    assert {r.branch for r in branches} == {"THINK", "SEARCH", "STOP"}
    assert {r.repeat for r in branches} == {0, 1}
    assert len({r.sampling["seed"] for r in branches}) == len(branches)  # one draw each, as locally
    assert any(s.execution_id == r.execution_id for r in branches for s in saved_states(sharded, branches=True))
    assert not (sharded / FORK_SHARDS_DIR).exists()
    invocations = {i.invocation_id: i for i in read_invocations(sharded) if i.file == FORKS_FILE}
    assert {r.invocation for r in branches} <= set(invocations) and len({r.invocation for r in branches}) == 1
    assert invocations[branches[0].invocation].provenance.command == "fork"
    report = verify_run(sharded, sample=0)
    assert report.ok, report.problems


@pytest.mark.parametrize(("policy", "style"), POLICIES)
def test_a_study_over_two_processes_equals_the_local_study(tmp_path, sim_url, isolated_cache, policy, style):
    local, sharded = study_pair(tmp_path, sim_url, policy, style)
    here = fork_run(local, ForkPlan(**PLAN), progress=False)
    there = fork_run(sharded, ForkPlan(**PLAN), progress=False, processes=2)
    assert here.ran == here.planned > 8 and "incomplete" not in here.statuses and here.statuses["ok"] > 8
    assert (there.planned, there.ran, there.statuses, there.illegal_skipped) == (
        here.planned,
        here.ran,
        here.statuses,
        here.illegal_skipped,
    )
    check_same_study(local, sharded)
    again = fork_run(sharded, ForkPlan(**PLAN), progress=False, processes=2)
    assert (again.ran, again.skipped_done) == (0, here.planned)
    # forks of forks: a branch's saved states fork again over processes, as locally
    branch = next(r for r in fork_records(local) if r.branch == "SEARCH" and r.checkpoint_ids)
    deeper = ForkPlan(actions=["THINK"], repeats=2, executions=[branch.execution_id], concurrency=4)
    assert fork_run(local, deeper, progress=False).ran == fork_run(sharded, deeper, progress=False, processes=2).ran > 0
    assert second_level(sharded) == second_level(local)


def second_level(run_dir: Path) -> list[tuple[Any, ...]]:
    """The branches of branches, by what they are (their parents' saved states have new checkpoint
    ids in each study, and so do their own ids; their seeds, drawn from the parent's id and the
    state's step, do not)."""
    out = []
    for data in fork_content(run_dir)[0].values():
        if data["condition"].get("fork.depth") == 2:
            parent = data["parent"]
            out.append(
                (
                    parent["execution_id"],
                    parent["boundary"],
                    data["repeat"],
                    data["sampling"],
                    data["status"],
                    data["final_answer"],
                    data["search_calls"],
                    data["checkpoints"],
                )
            )
    assert out
    return sorted(out, key=repr)


def test_the_cli_forks_over_processes_and_refuses_what_runs_refuse(tmp_path, sim_url, isolated_cache):
    local, sharded = study_pair(tmp_path, sim_url, "constrained", "completion")
    args = ["--actions", "THINK,SEARCH,STOP", "--repeats", "2", "--search-budget", "1", "--concurrency", "4"]
    args.append("--no-progress")
    cli = CliRunner()
    first = cli.invoke(app, ["fork", str(local), *args])
    second = cli.invoke(app, ["fork", str(sharded), *args, "--processes", "2"])
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert fork_content(sharded)[0] == fork_content(local)[0]
    # the invocation's command line says how it ran
    line = [i for i in read_invocations(sharded) if i.file == FORKS_FILE][-1]
    assert "--processes" in line.provenance.argv
    # the fork settings line is a local study's (the executor is no fork setting)
    assert _settings_lines(sharded) == _settings_lines(local)
    for bad, message in (
        (["--executor", "ray", "--processes", "2"], "--processes applies to --executor local only"),
        (["--ray-address", "auto"], "--ray-address applies to --executor ray only"),
        (["--processes", "2", "--log-requests"], "--log-requests applies to a single local process"),
        (["--executor", "dask"], "expected local or ray"),
    ):
        result = cli.invoke(app, ["fork", str(sharded), *args, *bad])
        assert result.exit_code == 2 and message in result.output, result.output


def _settings_lines(run_dir: Path) -> list[dict[str, Any]]:
    """RUN_DIR/fork_settings.jsonl but for the time and the run folder's own path."""
    out = []
    for line in (run_dir / "fork_settings.jsonl").read_text().splitlines():
        data = json.loads(line)
        data.pop("time")
        data["settings"].pop("spec")
        out.append(data)
    return out


def test_a_model_each_process_would_start_is_refused(tmp_path, isolated_cache):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "simfork",
                "questions": {"path": "demo", "limit": 2},
                "model": {"provider": "sim", "style": "chat", "max_tokens": 128, "sim": {"latency_scale": 0.0}},
                "agent": {"policy": "native", "search_cap": 1},
                "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
            }
        )
    )
    run_experiment(load_spec(spec), tmp_path / "run", progress=False)
    before = sorted(p.name for p in (tmp_path / "run").iterdir())
    with pytest.raises(InputError, match="--processes 2 needs a model server the processes share"):
        fork_run(tmp_path / "run", ForkPlan(actions=["THINK"], repeats=1), progress=False, processes=2)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before  # nothing written


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
def test_sigkill_of_the_fork_driver_then_a_rerun_records_every_branch_exactly_once(tmp_path, isolated_cache):
    from tests.conftest import REPO, wait_gone

    with SimServer(SimServerSpec(latency_scale=10.0), "branchpoint-sim-instruct") as server:
        spec = write_spec(tmp_path, server.base_url, "constrained", "completion", name="forkkill", n=3)
        base = tmp_path / "run"
        run_experiment(load_spec(spec), base, progress=False, concurrency=6)
        local = tmp_path / "local"
        shutil.copytree(base, local)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "branchpoint.cli",
                "fork",
                str(base),
                "--actions",
                "THINK,SEARCH,STOP",
                "--repeats",
                "2",
                "--search-budget",
                "1",
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
        part = base / FORK_SHARDS_DIR / "local-0" / FORKS_FILE
        deadline = time.monotonic() + 120
        while not (part.is_file() and part.read_bytes().count(b"\n") >= 3):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "no fork shard made progress"
            time.sleep(0.01)
        workers = _children(proc.pid)
        assert len(workers) >= 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert all(wait_gone(w, 10.0) for w in workers), "worker processes outlived their killed driver"
        assert (base / FORK_SHARDS_DIR).is_dir()  # what the shards recorded is still in their folders
        plan = ForkPlan(**{**PLAN, "concurrency": 2})
        summary = fork_run(base, plan, progress=False, processes=2)
        here = fork_run(local, ForkPlan(**PLAN), progress=False)
    assert summary.planned == here.planned and summary.skipped_done >= 3
    assert summary.ran == summary.planned - summary.skipped_done
    assert fork_content(base) == fork_content(local)
    assert not (base / FORK_SHARDS_DIR).exists()
    report = verify_run(base, sample=0)
    assert report.ok, report.problems


def test_a_study_on_ray_equals_the_local_study(tmp_path, sim_url, isolated_cache):
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    from branchpoint.experiments.ray_executor import ray_session

    local, sharded = study_pair(tmp_path, sim_url, "constrained", "completion")
    here = fork_run(local, ForkPlan(**PLAN), progress=False)
    with ray_session(num_cpus=2):  # workers inherit this environment (the test's index cache)
        there = fork_run(sharded, ForkPlan(**PLAN), progress=False, executor="ray")
    assert (there.planned, there.ran, there.statuses) == (here.planned, here.ran, here.statuses)
    check_same_study(local, sharded)
