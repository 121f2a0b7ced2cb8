"""Recovery from faults: the model server killed and restarted mid-run, a fork study killed with
SIGKILL mid-way. Afterwards every planned execution exists exactly once, no finished record
carries a transport error, and `runs verify` passes (checkpoints included: a redone execution's
thread holds only its own saved states)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.verify import verify_run
from tests.conftest import REPO
from tests.experiments.test_faults import spec_file
from tests.servers.openai_fault_server import FaultConfig, FaultServer, ServerProcess


def wait_for_lines(path, n: int, proc=None, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and path.read_bytes().count(b"\n") >= n:
            return
        if proc is not None:
            assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.01)
    raise AssertionError(f"{path}: fewer than {n} lines after {timeout} s")


def test_model_server_killed_and_restarted_mid_run(tmp_path, monkeypatch):
    monkeypatch.setattr("branchpoint.models.openai_compat.wait_exponential", lambda **kw: lambda rs: 0.2)
    run_dir = tmp_path / "run"
    with ServerProcess("--latency-s", "0.05") as server:
        spec = load_spec(spec_file(tmp_path, server.base_url, n=40, name="restarted"))
        done = {}
        worker = threading.Thread(
            target=lambda: done.update(first=run_experiment(spec, run_dir, progress=False, concurrency=2))
        )
        worker.start()
        wait_for_lines(run_dir / "executions.jsonl", 4)
        server.kill()  # mid-request for the executions in flight
        time.sleep(1.5)  # down longer than an execution's retries last (3 attempts, 0.2 s apart)
        server.restart()  # on the same port
        worker.join(timeout=120)
        assert not worker.is_alive()
        records = RunStore(run_dir).records()
        statuses = [r.status for r in records]
        assert done["first"].ran == 40 and "incomplete" in statuses
        assert "ok" in statuses[statuses.index("incomplete") :], "the restarted server served the same run"
        assert not verify_run(run_dir).ok  # the incomplete ones are missing
        second = run_experiment(spec, run_dir, progress=False, concurrency=2)
    assert second.ran == statuses.count("incomplete") and second.statuses == {"ok": second.ran}
    report = verify_run(run_dir, sample=0)
    assert report.ok, report.problems
    assert report.counts["executions"] == 40 and report.counts["checkpoints_checked"] == 40


def test_sigkill_mid_fork_study_then_resume_exactly_once(tmp_path):
    config = FaultConfig()
    with FaultServer(config) as server:
        spec = spec_file(tmp_path, server.base_url, n=8, name="forkkill")
        run_dir = tmp_path / "run"
        run_experiment(load_spec(spec), run_dir, progress=False, concurrency=4)
        config.latency_s = 0.05  # slow enough that the kill lands mid-study
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "branchpoint.cli",
                "fork",
                str(run_dir),
                "--actions",
                "THINK",
                "--boundaries",
                "initial",
                "--repeats",
                "8",
                "--concurrency",
                "2",
                "--no-progress",
            ],
            cwd=REPO,
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        forks = run_dir / "forks.jsonl"
        wait_for_lines(forks, 6, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        before = forks.read_bytes().count(b"\n")
        assert 6 <= before < 64, "the kill landed mid-study"
        with forks.open("ab") as fh:  # as if the kill had torn an append in half
            fh.write(b'{"execution_id": "torn-by-the-kill", "run_id": "fork')
        plan = ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=8, concurrency=2)
        summary = fork_run(run_dir, plan, progress=False)
    assert summary.planned == 64 and summary.skipped_done >= 6 and summary.ran == 64 - summary.skipped_done
    ids = [r.execution_id for r in fork_records(run_dir)]
    assert len(ids) == len(set(ids)) == 64
    report = verify_run(run_dir, sample=0)
    assert report.ok, report.problems
