"""CPU per execution of `run_experiment`, and the part of it spent in the cyclic garbage collector.

The same no-search executions as `runner_throughput.py` (one completion call each, constrained
policy, SQLite checkpoints, durable appends; `cpu_per_call.spec_file`) against the local test
server (its own process, fixed latency), after an uncounted warm-up run of 64. For each of
`--repeats` runs it prints the process's CPU (user + system, all threads, `getrusage`) per
execution and the wall rate; at the end the CPU the garbage collector spent (`gc.callbacks`,
thread CPU clock) over the whole process. CPU per execution is the figure least moved by other
load on the machine (the wall rate is not). `--cprofile FILE` adds one profiled run (every thread).
For a sampled profile without cProfile's overhead run it under py-spy:

    .venv/bin/python benchmarks/runner_cpu.py [--n 1024] [--concurrency 256] [--latency 0.5] [--repeats 2]
    py-spy record -r 250 -f raw -o spy.txt -- .venv/bin/python benchmarks/runner_cpu.py
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cpu_per_call import profile_run, server_process, spec_file
from branchpoint.experiments import load_spec, run_experiment


def cpu_s() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class GcClock:
    """CPU seconds spent in garbage collections, per generation, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.counts = [0, 0, 0]
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds[info["generation"]] += time.thread_time() - self._start
            self.counts[info["generation"]] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1024, help="executions per run (a multiple of 64)")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.5, help="server seconds per request")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cprofile", type=Path, help="then one cProfile'd run (every thread) into this file")
    args = parser.parse_args()
    n = -(-args.n // 64) * 64
    work = Path(tempfile.mkdtemp(prefix="bp-runner-cpu-"))
    clock = GcClock()
    with server_process(args.latency) as base_url:
        spec = spec_file(work, base_url, n)
        (work / "warm").mkdir()
        run_experiment(
            load_spec(spec_file(work / "warm", base_url, 64)),
            work / "warm-run",
            progress=False,
            concurrency=args.concurrency,
        )
        gc_before = sum(clock.seconds)
        measured = 0.0
        for k in range(args.repeats):
            cpu, wall = cpu_s(), time.perf_counter()
            summary = run_experiment(load_spec(spec), work / f"run-{k}", progress=False, concurrency=args.concurrency)
            assert summary.statuses == {"ok": n}, summary
            cpu, wall = cpu_s() - cpu, time.perf_counter() - wall
            measured += cpu
            print(
                f"run {k}: {cpu / n * 1e3:.2f} ms CPU/execution, {n / wall:.1f} executions/s "
                f"({n} executions, concurrency {args.concurrency}, latency {args.latency:g} s)",
                flush=True,
            )
        in_gc = sum(clock.seconds) - gc_before
        print(
            f"garbage collector over the measured runs: {in_gc / (n * args.repeats) * 1e3:.2f} ms CPU/execution "
            f"({100 * in_gc / max(measured, 1e-9):.0f}% of their CPU; whole process, per generation: "
            f"{[round(s, 2) for s in clock.seconds]} s in {clock.counts} collections)"
        )
        if args.cprofile:  # every thread, merged: the top functions by own and cumulative time
            profile_run(spec, work / "profiled", args.concurrency, n, args.cprofile)


if __name__ == "__main__":
    main()
