"""Runner throughput against a local OpenAI-compatible server with a fixed per-request latency.

The server runs in its own process. For each latency, the same no-search executions (one model
call each, SQLite checkpoints, durable appends) run at concurrency 1 (8 executions), 8 and 64
(`--n`, default 512 = 64 demo questions x 8 seeds), concurrency 64 also over `--processes`
local processes (`branchpoint run --processes`); prints executions/s and the ratio to the ideal
(concurrency x single-stream rate, per round of `concurrency` executions). Targets (issue 20): at
0.5 s and concurrency 64 >= 0.85 of ideal in one process, >= 0.9 with --processes 2; at 2 s >= 0.95;
at 256 >= 0.8 in one process. BENCHMARKS.md has the figures, and why 0.5 s is CPU-bound here.

    .venv/bin/python benchmarks/runner_throughput.py [--latency 0.5 2] [--n 512] [--concurrency 64 256] [--processes 2]

Every in-process row also prints the run's CPU per execution and its *wave bound*: with a fixed
latency L the executions move in lock-step waves (the replies of a wave arrive together and one
event loop handles them one after another), so one process reaches at most L / (L + c x CPU per
execution) of ideal at concurrency c. `--peer` adds the hand-written asyncio loop over the same
requests (`cpu_per_call.py`'s peer), the same figures for a client with no framework at all.

`--server sim` runs the same executions against the simulated model in capacity mode (continuous
batching: every request in flight shares a decode ceiling of `--tokens-per-s`, each stream decodes
at most 1 / decode_s_per_token tokens/s, at most 256 decode at once, the rest queue) at
concurrency 64 and 256, one process and `--processes`, and prints the request rate sustained as a
fraction of the server's capacity (ceiling / mean completion tokens per request):

    .venv/bin/python benchmarks/runner_throughput.py --server sim [--tokens-per-s 1500] [--n 1024]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.process_executor import run_experiment_processes

SERVER = Path(__file__).resolve().parents[1] / "tests" / "servers" / "openai_fault_server.py"


@contextmanager
def server_process(latency: float):
    """The test server in its own process (so it does not compete with the runner for the GIL)."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", "0", "--latency-s", str(latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def sim_server(tokens_per_s: float, workdir: Path):
    """The simulated model in capacity mode, with a latency model like a GPU server's."""
    from branchpoint.models.spec import SimServerSpec
    from branchpoint.sim import SimServer

    profile = workdir / "capacity-profile.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "extends": "instruct",
                "name": "capacity",
                "latency": {"base_s": 0.03, "prefill_s_per_token": 1e-5, "decode_s_per_token": 0.02},
                "capacity": {"tokens_per_s": tokens_per_s, "max_batch": 256},
                "failures": {"malformed": 0.0, "length": 0.0},
            }
        )
    )
    spec = SimServerSpec(profile=str(profile), latency_scale=1.0, capacity=True)
    with SimServer(spec, served_name="m", log_path=workdir / "sim.log") as server:
        yield server.base_url


def completion_tokens(run_dir: Path) -> float:
    """Mean output tokens per model call of a finished run (all its executions)."""
    import json

    calls = tokens = 0
    for line in (run_dir / "executions.jsonl").read_text().splitlines():
        rec = json.loads(line)
        for step in rec["steps"]:
            if step.get("usage"):
                calls += 1
                tokens += step["usage"]["output_tokens"]
    return tokens / max(calls, 1)


def main_sim(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bp-throughput-sim-"))
    print(
        f"simulated server, capacity mode: {args.tokens_per_s:.0f} tokens/s ceiling, 0.02 s/token per stream, "
        f"0.03 s base latency"
    )
    with sim_server(args.tokens_per_s, workdir) as base_url:
        for c in (64, 256):
            rates = {}
            for procs in sorted({1, args.processes}):
                rates[procs] = rate = run(base_url, args.n, c, workdir / f"sim-{c}-{procs}", procs)
                run_dir = next((workdir / f"sim-{c}-{procs}").glob("run-*"))
                capacity = args.tokens_per_s / completion_tokens(run_dir)
                how = f"{procs} processes" if procs > 1 else "1 process"
                print(
                    f"concurrency {c:>3}, {how}: {rate:6.1f} requests/s  server capacity {capacity:6.1f}  "
                    f"fraction {rate / capacity:.2f}  ({args.n} executions, one request each)"
                )
            if args.peer:  # the same requests from the hand-written loop, in the same run
                peer = peer_rate(base_url, args.n, c, workdir / f"sim-peer-{c}")
                ratios = ", ".join(f"{procs} proc. {rate / peer:.2f}" for procs, rate in rates.items())
                print(
                    f"concurrency {c:>3}, peer (asyncio loop over AsyncOpenAI, 1 process): {peer:6.1f} requests/s  "
                    f"fraction {peer / capacity:.2f}; branchpoint / peer: {ratios}"
                )
    print(
        f"(reproduce: .venv/bin/python benchmarks/runner_throughput.py --server sim --tokens-per-s "
        f"{args.tokens_per_s:g} --n {args.n} --processes {args.processes}{' --peer' if args.peer else ''})"
    )


def cpu_s() -> float:
    """User + system CPU seconds of this process so far (all its threads; not its children)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def wave_bound(latency: float, concurrency: int, cpu_ms: float) -> float:
    """The ratio to ideal that one process can reach when `concurrency` requests of a fixed
    latency move in lock-step waves: each wave's replies arrive together, and the loop spends
    `cpu_ms` on each execution (its request out, its reply in, its record) one after another,
    so a wave lasts latency + concurrency x cpu instead of latency."""
    return latency / (latency + concurrency * cpu_ms / 1000)


def peer_rate(base_url: str, n: int, concurrency: int, workdir: Path) -> float:
    """Requests/s of the hand-written peer (`cpu_per_call.peer`: AsyncOpenAI, `concurrency` in
    flight, one jsonl line per reply) over the same requests as `n` executions."""
    from benchmarks.cpu_per_call import peer, requests_of, spec_file

    workdir.mkdir(parents=True, exist_ok=True)
    requests = requests_of(spec_file(workdir, base_url, n), n)
    start = time.perf_counter()
    peer(base_url, requests, concurrency, workdir / f"peer-{n}-{concurrency}.jsonl")
    return n / (time.perf_counter() - start)


def run(base_url: str, n: int, concurrency: int, workdir: Path, processes: int = 1) -> float:
    """Executions/s for `n` executions (up to 64 demo questions x enough seeds) at a concurrency."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / f"spec-{concurrency}-{processes}.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": f"throughput-{concurrency}",
                "questions": {"path": "demo", "limit": min(n, 64)},
                "model": {"provider": "openai", "base_url": base_url, "name": "m", "max_tokens": 16},
                "agent": {"policy": "constrained", "search": False},
                "sweep": {"model.seed": list(range(-(-n // 64)))},
            }
        )
    )
    n = min(n, 64) * -(-n // 64)
    start = time.perf_counter()
    if processes == 1:
        summary = run_experiment(
            load_spec(spec_path), workdir / f"run-{concurrency}", progress=False, concurrency=concurrency
        )
    else:
        summary = run_experiment_processes(
            load_spec(spec_path),
            workdir / f"run-{concurrency}-{processes}",
            progress=False,
            concurrency=concurrency,
            processes=processes,
        )
    wall = time.perf_counter() - start
    assert summary.ran == n and summary.statuses == {"ok": n}, summary
    return n / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, nargs="+", default=[0.5, 2.0], help="seconds per request")
    parser.add_argument("--n", type=int, default=512, help="executions at concurrency 64 (a multiple of 64)")
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[64],
        help="the concurrency levels above 8 (each also over --processes)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=os.cpu_count() or 1,
        help="also run concurrency 64 over this many processes (--processes; default: the cores)",
    )
    parser.add_argument(
        "--server",
        choices=["fault", "sim"],
        default="fault",
        help="fault: fixed latency per request; sim: the simulated model in capacity mode",
    )
    parser.add_argument("--tokens-per-s", type=float, default=1500.0, help="--server sim: the decode ceiling")
    parser.add_argument(
        "--peer",
        action="store_true",
        help="also run the hand-written asyncio loop (cpu_per_call.py's peer) at each concurrency: the rate a "
        "framework-free client reaches on this machine, and its wave bound",
    )
    args = parser.parse_args()
    if args.server == "sim":
        main_sim(args)
        return
    workdir = Path(tempfile.mkdtemp(prefix="bp-throughput-"))
    for latency in args.latency:
        with server_process(latency) as base_url:
            single = run(base_url, 8, 1, workdir / f"{latency}")
            print(
                f"latency {latency:.2f} s/request; concurrency 1: {single:.2f} executions/s  "
                f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
            )
            levels = [(8, max(args.n // 8, 64), 1)]
            for c in args.concurrency:  # at least 4 rounds of `c` at each level
                levels += [(c, max(args.n, 4 * c), 1)]
                levels += [(c, max(args.n, 4 * c), args.processes)] if args.processes > 1 else []
            for c, n, procs in levels:
                cpu = cpu_s()
                rate = run(base_url, n, c, workdir / f"{latency}", procs)
                cpu_ms = (cpu_s() - cpu) / n * 1000
                waves = -(-n // c)  # executions finish in ceil(n / c) rounds at best
                ideal = n / (waves / single)
                how = f"{procs} processes" if procs > 1 else "1 process"
                load = os.getloadavg()[0]
                bound = (
                    f"; {cpu_ms:.1f} ms CPU/execution, wave bound {wave_bound(latency, c, cpu_ms):.2f}"
                    if procs == 1
                    else ""
                )
                print(
                    f"concurrency {c:>3}, {how}: {rate:6.2f} executions/s  ideal {ideal:6.2f}  "
                    f"ratio {rate / ideal:.2f}  ({n} executions; load average {load:.1f}{bound})"
                )
            if args.peer:
                peer_single = peer_rate(base_url, 8, 1, workdir / f"{latency}-peer")
                for c in args.concurrency:
                    n = max(args.n, 4 * c)
                    cpu = cpu_s()
                    rate = peer_rate(base_url, n, c, workdir / f"{latency}-peer")
                    cpu_ms = (cpu_s() - cpu) / n * 1000
                    ideal = n / (-(-n // c) / peer_single)
                    print(
                        f"concurrency {c:>3}, peer (asyncio loop over AsyncOpenAI, 1 process): {rate:6.2f} requests/s  "
                        f"ideal {ideal:6.2f}  ratio {rate / ideal:.2f}  ({cpu_ms:.1f} ms CPU/request, wave bound "
                        f"{wave_bound(latency, c, cpu_ms):.2f})"
                    )
    latencies = " ".join(str(x) for x in args.latency)
    levels = " ".join(str(c) for c in args.concurrency)
    print(
        f"(reproduce: .venv/bin/python benchmarks/runner_throughput.py --latency {latencies} --n {args.n} "
        f"--concurrency {levels} --processes {args.processes}{' --peer' if args.peer else ''})"
    )


if __name__ == "__main__":
    main()
