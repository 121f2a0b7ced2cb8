"""Faults: a server that fails, drops, truncates and stalls; a run killed with SIGKILL mid-way.

Afterwards every planned execution exists exactly once, and none is scored wrong because of a
transport fault (those are `incomplete` and redone on the next run).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from branchpoint.evaluation import evaluate
from branchpoint.experiments import RunStore, load_spec, run_experiment
from tests.conftest import REPO
from tests.servers.openai_fault_server import FaultConfig, FaultServer


def spec_file(tmp_path, base_url: str, n: int = 12, name: str = "faults") -> object:
    data = {
        "name": name,
        "questions": {"path": "demo", "limit": n},
        "model": {
            "provider": "openai",
            "base_url": base_url,
            "name": "m",
            "max_tokens": 16,
            "timeout_s": 1.0,
            "retries": 2,
        },
        "agent": {"policy": "constrained", "search": False},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_transport_faults_become_incomplete_and_are_redone(tmp_path, monkeypatch):
    monkeypatch.setattr("branchpoint.models.openai_compat.wait_exponential", lambda **kw: lambda rs: 0.0)
    run_dir = tmp_path / "run"
    faulty = FaultConfig(error_rate=0.3, drop_rate=0.15, truncate_rate=0.15, stall_rate=0.1, stall_s=1.5, seed=3)
    with FaultServer(faulty) as server:
        spec = load_spec(spec_file(tmp_path, server.base_url, n=16))
        first = run_experiment(spec, run_dir, progress=False, concurrency=4)
    assert sum(first.statuses.values()) == 16
    assert sum(faulty.counts[k] for k in ("error", "drop", "truncate", "stall")) > 0
    store = RunStore(run_dir)
    incomplete = [r for r in store.records() if r.status == "incomplete"]
    assert all(r.final_answer is None and r.error for r in incomplete)
    metrics = evaluate(run_dir)
    assert metrics["n"] + metrics["n_incomplete"] == 16  # incomplete ones are never scored
    # the server recovers: the rerun does only what is missing, exactly once each
    with FaultServer(FaultConfig()) as server:
        spec = load_spec(spec_file(tmp_path, server.base_url, n=16))
        second = run_experiment(spec, run_dir, progress=False, concurrency=4)
    assert second.ran == len(incomplete) and second.statuses.get("incomplete", 0) == 0
    assert len(store.finished_ids()) == 16
    assert evaluate(run_dir)["n"] == 16


def kill_run_midway(spec: Path, run_dir: Path, cache: Path, concurrency: int, lines: int = 6) -> int:
    """`branchpoint run SPEC` in its own process, SIGKILLed once `lines` executions are recorded:
    the number of trace lines it left."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "branchpoint.cli",
            "run",
            str(spec),
            "--out",
            str(run_dir),
            "--no-progress",
            "--concurrency",
            str(concurrency),
        ],
        cwd=REPO,
        env={**os.environ, "BRANCHPOINT_CACHE": str(cache)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    traces = run_dir / "executions.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if traces.is_file() and traces.read_bytes().count(b"\n") >= lines:
            break
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return traces.read_bytes().count(b"\n")


def test_sigkill_mid_run_then_resume_exactly_once(tmp_path):
    with FaultServer(FaultConfig(latency_s=0.05)) as server:
        spec = spec_file(tmp_path, server.base_url, n=40, name="killed")
        run_dir = tmp_path / "run"
        before = kill_run_midway(spec, run_dir, tmp_path / "cache", concurrency=4)
        assert 6 <= before < 40, "the kill landed mid-run"
        summary = run_experiment(load_spec(spec), run_dir, progress=False, concurrency=4)
    store = RunStore(run_dir)
    ids = [r.execution_id for r in store.records()]
    assert len(ids) == len(set(ids)) == 40
    assert summary.ran == 40 - summary.skipped and summary.skipped >= 6
