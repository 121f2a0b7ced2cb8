"""Fault injection: a failing model server, and sweeps and fork studies killed with SIGKILL.

1. Server faults during a sweep (`model.provider: openai` against the fault server running as
   its own process; completion endpoint, constrained policy, `agent.search: false`): the server
   killed and restarted mid-sweep, dropped connections, replies slower than the client's timeout,
   HTTP 500, truncated JSON. Each sweep is then rerun against a healthy server until complete.
2. `branchpoint run` killed with SIGKILL at a random moment, `--kills` times, each on a fresh
   sweep, then rerun to completion in this process.
3. `branchpoint fork` (scripted model, cycling script; demo retrieval) killed with SIGKILL at a
   random moment, `--fork-kills` times, each on a fresh copy of one parent run, then rerun.

After every repair it checks: every planned execution (branch) is recorded exactly once, no
finished record carries a transport error (none scored wrong for a fault), the checkpoints and
the retrieval cache are readable, and `runs verify` (every execution's checkpoints) passes.
It prints the counts; any failed check is printed and makes the exit code 1.

To keep the run short the client's retry back-off is patched to 0.1 s (the retry count is the
spec's), except in the first scenario, which shows the real back-off riding out a restart. The random kill moments are drawn from a seeded generator (--seed).

    .venv/bin/python benchmarks/faults.py [--kills 20] [--fork-kills 20] [--n 24] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import branchpoint.models.openai_compat as openai_compat  # noqa: E402
from branchpoint.experiments import RunStore, load_spec, run_experiment  # noqa: E402
from branchpoint.experiments.branch_planning import fork_records  # noqa: E402
from branchpoint.experiments.forking import ForkPlan, fork_run  # noqa: E402
from branchpoint.experiments.verify import verify_run  # noqa: E402
from tests.servers.openai_fault_server import ServerProcess  # noqa: E402

FAILURES: list[str] = []
REAL_WAIT = openai_compat.wait_exponential  # 0.5 s, 1 s, 2 s ... between retries


def SHORT_WAIT(**kw):
    """A 0.1 s back-off, to keep the benchmark short (the retry count stays the spec's)."""
    return lambda retry_state: 0.1


def sweep_spec(path: Path, base_url: str, n: int, name: str, retries: int = 1) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "questions": {"path": "demo", "limit": n},
                "model": {
                    "provider": "openai",
                    "base_url": base_url,
                    "name": "m",
                    "max_tokens": 16,
                    "timeout_s": 1.0,
                    "retries": retries,
                },
                "agent": {"policy": "constrained", "search": False},
            }
        ),
        encoding="utf-8",
    )
    return path


def check(run_dir: Path, label: str, expected: int, file: str = "executions.jsonl") -> bool:
    """Every planned execution exactly once, no transport error in a finished record, verify passes."""
    records = RunStore(run_dir).records() if file == "executions.jsonl" else fork_records(run_dir)
    finished = [r for r in records if r.status != "incomplete"]
    ids = Counter(r.execution_id for r in finished)
    problems = []
    if len(ids) != expected:
        problems.append(f"{len(ids)} distinct finished executions in {file}, expected {expected}")
    if any(c > 1 for c in ids.values()):
        problems.append(f"{sum(c > 1 for c in ids.values())} executions recorded more than once")
    if any(r.error for r in finished):
        problems.append(f"{sum(bool(r.error) for r in finished)} finished records carry a transport error")
    report = verify_run(run_dir, sample=0)
    problems += [f"verify: {p.kind} {p.where}: {p.message}" for p in report.problems[:5]]
    if problems:
        FAILURES.append(f"{label}: " + "; ".join(problems))
        print(f"  FAILED {label}: " + "; ".join(problems))
    return not problems


def run_until_complete(spec_path: Path, run_dir: Path, tries: int = 5) -> int:
    """Rerun until nothing is incomplete; the number of reruns it took."""
    for attempt in range(1, tries + 1):
        summary = run_experiment(load_spec(spec_path), run_dir, progress=False, concurrency=4)
        if not summary.statuses.get("incomplete"):
            return attempt
    return tries


def server_faults(root: Path, n: int) -> None:
    print(f"1. server faults during a sweep ({n} executions each, concurrency 4, timeout 1 s)")
    print(f"   {'fault':<36}{'injected':>14}{'incomplete':>11}{'ok':>5}{'reruns':>8}  check")
    scenarios = [  # (label, server arguments, spec retries, real back-off)
        ("killed + restarted, 3 retries", [], 3, True),
        ("killed + restarted, 1 retry", [], 1, False),
        ("dropped connections, 1 retry", ["--drop-rate", "0.3"], 1, False),
        ("slower than timeout, 1 retry", ["--stall-rate", "0.2", "--stall-s", "2.5"], 1, False),
        ("HTTP 500, 1 retry", ["--error-rate", "0.3"], 1, False),
        ("truncated JSON, 1 retry", ["--truncate-rate", "0.3"], 1, False),
    ]
    for i, (label, args, retries, real_backoff) in enumerate(scenarios):
        openai_compat.wait_exponential = REAL_WAIT if real_backoff else SHORT_WAIT
        run_dir = root / f"server-{i}"
        latency = "0.05" if args else "0.3"  # killed mid-sweep: slow enough to kill it mid-way
        with ServerProcess("--latency-s", latency, "--seed", str(i), *args) as server:
            spec_path = sweep_spec(root / f"server-{i}.yaml", server.base_url, n, f"server-{i}", retries)
            if args:
                first = run_experiment(load_spec(spec_path), run_dir, progress=False, concurrency=4)
            else:
                out: dict = {}
                worker = threading.Thread(
                    target=lambda: out.update(
                        s=run_experiment(load_spec(spec_path), run_dir, progress=False, concurrency=4)
                    )
                )
                worker.start()
                deadline = time.monotonic() + 60
                traces = run_dir / "executions.jsonl"
                while time.monotonic() < deadline and not (traces.is_file() and traces.read_bytes().count(b"\n") >= 3):
                    time.sleep(0.01)
                server.kill()
                time.sleep(1.0)
                server.restart()
                worker.join()
                first = out["s"]
        faulted = first.statuses.get("incomplete", 0)
        openai_compat.wait_exponential = SHORT_WAIT
        with ServerProcess() as healthy:
            spec_path = sweep_spec(root / f"server-{i}.yaml", healthy.base_url, n, f"server-{i}", retries)
            reruns = run_until_complete(spec_path, run_dir)
        ok = check(run_dir, label, n)
        seen = "down 1 s + start" if not args else f"{float(args[1]):.0%} of calls"
        print(
            f"   {label:<36}{seen:>14}{faulted:>11}{first.statuses.get('ok', 0):>5}{reruns:>8}  {'ok' if ok else 'FAILED'}"
        )


def wait_lines(path: Path, n: int, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if path.is_file() and path.read_bytes().count(b"\n") >= n:
            return time.monotonic() - start
        time.sleep(0.01)
    raise TimeoutError(f"{path}: fewer than {n} lines after {timeout} s")


def kill_at_random(cmd: list[str], traces: Path, total: int, first: float, rng: random.Random, env: dict) -> dict:
    """Start `cmd` and SIGKILL it at a random point of its work: after a random number of records
    (0 to total - 1) plus up to 50 ms, or, for 0, at a random moment before the first record."""
    target = rng.randrange(total)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start = time.monotonic()
    if target == 0:
        while time.monotonic() - start < rng.uniform(0, first) and proc.poll() is None:
            time.sleep(0.005)
    else:
        while proc.poll() is None and not (traces.is_file() and traces.read_bytes().count(b"\n") >= target):
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
    finished = proc.poll() is not None
    if not finished:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    data = traces.read_bytes() if traces.is_file() else b""
    return {
        "target": target,
        "at": time.monotonic() - start,
        "lines": data.count(b"\n"),
        "torn": bool(data) and not data.endswith(b"\n"),
        "finished": finished,
    }


def calibrate(cmd: list[str], traces: Path, env: dict, total: int) -> tuple[float, float]:
    """Seconds until the first record, and until the command ends, on one uninterrupted run."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = wait_lines(traces, 1, 300)
    proc.wait()
    assert traces.read_bytes().count(b"\n") == total, "the calibration run did not finish its work"
    return first, time.monotonic() - start


def describe(outcomes: list[dict], total: int) -> str:
    mid = sum(1 for o in outcomes if 0 < o["lines"] < total and not o["finished"])
    before = sum(1 for o in outcomes if o["lines"] == 0 and not o["finished"])
    after = sum(1 for o in outcomes if o["lines"] >= total or o["finished"])
    torn = sum(o["torn"] for o in outcomes)
    done = sorted(o["lines"] for o in outcomes)
    return (
        f"{len(outcomes)} kills: {mid} mid-way, {before} before the first record, {after} after the last "
        f"(records at the kill: min {done[0]}, median {done[len(done) // 2]}, max {done[-1]} of {total}); "
        f"{torn} torn last lines"
    )


def sigkill_sweeps(root: Path, n: int, kills: int, rng: random.Random, env: dict) -> None:
    print(f"\n2. `branchpoint run` killed with SIGKILL at random moments ({n} executions, concurrency 4)")
    with ServerProcess("--latency-s", "0.1") as server:
        spec_path = sweep_spec(root / "kill.yaml", server.base_url, n, "killed")
        cmd = [sys.executable, "-m", "branchpoint.cli", "run", str(spec_path), "--no-progress", "--concurrency", "4"]
        first, end = calibrate(
            [*cmd, "--out", str(root / "kill-calibrate")], root / "kill-calibrate" / "executions.jsonl", env, n
        )
        print(f"   an uninterrupted run: first record after {first:.1f} s, done after {end:.1f} s")
        outcomes, redone, checked = [], 0, 0
        for i in range(kills):
            run_dir = root / f"kill-{i}"
            outcomes.append(
                kill_at_random([*cmd, "--out", str(run_dir)], run_dir / "executions.jsonl", n, first, rng, env)
            )
            summary = run_experiment(load_spec(spec_path), run_dir, progress=False, concurrency=4)
            redone += summary.ran
            checked += check(run_dir, f"run kill {i} after {outcomes[-1]['lines']} records", n)
    print(f"   {describe(outcomes, n)}")
    print(f"   reruns redid {redone} executions; {checked}/{kills} run dirs pass every check")


def sigkill_forks(root: Path, kills: int, rng: random.Random, env: dict) -> None:
    print("\n3. `branchpoint fork` killed with SIGKILL at random moments (scripted model, demo retrieval)")
    spec_path = root / "fork.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": "forked",
                "questions": {"path": "demo", "categories": ["answerable"], "limit": 6},
                "model": {
                    "provider": "scripted",
                    "script": ['search", "text": "capital of Australia"}', 'answer", "text": "Canberra"}'],
                },
                "agent": {"policy": "constrained", "search_cap": 2, "top_k": 3},
            }
        ),
        encoding="utf-8",
    )
    parent = root / "fork-parent"
    run_experiment(load_spec(spec_path), parent, progress=False)
    args = ["--actions", "THINK,SEARCH,STOP", "--repeats", "2", "--search-budget", "1", "--concurrency", "4"]
    plan = ForkPlan(actions=["THINK", "SEARCH", "STOP"], repeats=2, search_budget=1, concurrency=4)
    cmd = [sys.executable, "-m", "branchpoint.cli", "fork", "--no-progress", *args]
    calib = root / "fork-calibrate"
    shutil.copytree(parent, calib)
    first, end = calibrate([*cmd, str(calib)], calib / "forks.jsonl", env, _count(calib, plan))
    total = len(fork_records(calib))
    print(
        f"   {total} branches per study; an uninterrupted study: first branch after {first:.1f} s, done after {end:.1f} s"
    )
    parent_bytes = (parent / "executions.jsonl").read_bytes()
    outcomes, redone, checked = [], 0, 0
    for i in range(kills):
        run_dir = root / f"fork-{i}"
        shutil.copytree(parent, run_dir)
        outcomes.append(kill_at_random([*cmd, str(run_dir)], run_dir / "forks.jsonl", total, first, rng, env))
        summary = fork_run(run_dir, plan, progress=False)
        redone += summary.ran
        ok = check(run_dir, f"fork kill {i} after {outcomes[-1]['lines']} branches", total, file="forks.jsonl")
        if (run_dir / "executions.jsonl").read_bytes() != parent_bytes:
            FAILURES.append(f"fork kill {i}: executions.jsonl changed")
            ok = False
        checked += ok
    print(f"   {describe(outcomes, total)}")
    print(
        f"   reruns ran {redone} branches; {checked}/{kills} run dirs pass every check "
        "(and their executions.jsonl is untouched)"
    )


def _count(run_dir: Path, plan: ForkPlan) -> int:
    """How many branches the study plans (from the checkpoints, without running any)."""
    from branchpoint.checkpoints import open_checkpointer
    from branchpoint.experiments.branch_planning import parent_records, plan_branches

    store = RunStore(run_dir)
    with open_checkpointer(store.checkpoints_path) as saver:
        tasks, _ = plan_branches(saver, store, load_spec(run_dir / "spec.yaml"), plan, parent_records(store, None))
    return len(tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=24, help="Executions per sweep.")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--fork-kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="Keep the run directories (printed).")
    parser.add_argument("--parts", default="123", help="Which parts to run, e.g. 1 or 23.")
    a = parser.parse_args()
    openai_compat.wait_exponential = SHORT_WAIT
    root = Path(tempfile.mkdtemp(prefix="bp-faults-"))
    env = {**os.environ, "BRANCHPOINT_CACHE": os.environ.get("BRANCHPOINT_CACHE", str(root / "cache"))}
    os.environ["BRANCHPOINT_CACHE"] = env["BRANCHPOINT_CACHE"]
    rng = random.Random(a.seed)
    start = time.perf_counter()
    if "1" in a.parts:
        server_faults(root, a.n)
    if "2" in a.parts:
        sigkill_sweeps(root, a.n, a.kills, rng, env)
    if "3" in a.parts:
        sigkill_forks(root, a.fork_kills, rng, env)
    print(
        f"\n{len(FAILURES)} failed checks in {time.perf_counter() - start:.0f} s"
        + (f"; run dirs in {root}" if a.keep else "")
    )
    for f in FAILURES:
        print(f"  {f}")
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
