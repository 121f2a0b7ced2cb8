"""Framework CPU per model call: branchpoint against a hand-written asyncio loop (the peer).

Both talk to the same local OpenAI-compatible server (`tests/servers/openai_fault_server.py`, its
own process, so its CPU is not counted) with the same requests: the completion prompt of a
no-search `constrained` execution for each of the 64 demo questions (`fewshot_prompt`, no
evidence), `max_tokens` 16, stop at a newline, temperature 0 and the execution's seed.

- peer: `openai.AsyncOpenAI`, one `asyncio.gather` over the calls behind a semaphore of
  `--concurrency`, each reply's text and usage appended to a jsonl file — what a researcher
  writes instead of a framework.
- client: branchpoint's `OpenAICompatibleClient.complete` alone, from `--concurrency` threads
  (the request path of the runner without graph, checkpoints or record).
- branchpoint: `run_experiment` over the same executions (constrained policy, no search, one
  completion call each, SQLite checkpoints, durable appends), `--concurrency` at once.

CPU is this process's user + system time (`resource.getrusage`, every thread) over the measured
part divided by the calls, after a warm-up of each (imports, connection pools, compiled graph)
that is not counted. The ratio branchpoint / peer is the figure of issue 20 (target <= 3x).

    .venv/bin/python benchmarks/cpu_per_call.py [--n 512] [--concurrency 64] [--latency 0.05]
    .venv/bin/python benchmarks/cpu_per_call.py --profile prof.out   # cProfile of the branchpoint part
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchpoint.agents.prompts import fewshot_prompt
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.runner import select_questions
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.spec import ModelSpec

SERVER = Path(__file__).resolve().parents[1] / "tests" / "servers" / "openai_fault_server.py"
MAX_TOKENS = 16


@contextmanager
def server_process(latency: float) -> Iterator[str]:
    """The test server in its own process (its CPU is not this process's)."""
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--latency-s", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def cpu_s() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def measured(fn: Callable[..., object], *args: object) -> tuple[float, float]:
    """(CPU seconds, wall seconds) that `fn(*args)` took."""
    cpu, wall = cpu_s(), time.perf_counter()
    fn(*args)
    return cpu_s() - cpu, time.perf_counter() - wall


def spec_file(workdir: Path, base_url: str, n: int) -> Path:
    """The no-search spec of `n` executions: the 64 demo questions x ceil(n / 64) seeds."""
    path = workdir / f"spec-{n}.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"cpu-per-call-{n}",
        "questions": {"path": "demo", "limit": min(n, 64)},
        "model": {"provider": "openai", "base_url": base_url, "name": "m", "max_tokens": MAX_TOKENS},
        "agent": {"policy": "constrained", "search": False},
        "sweep": {"model.seed": list(range(-(-n // 64)))},
    }))
    return path


def requests_of(spec_path: Path, n: int) -> list[tuple[str, int]]:
    """(prompt, seed) of each of the `n` executions the spec plans, in plan order."""
    spec = load_spec(spec_path)
    prompts = [fewshot_prompt(q.question, [], False, spec.agent.evidence_words) for q in select_questions(spec)]
    return [(prompts[i % len(prompts)], i // len(prompts)) for i in range(n)]


def peer(base_url: str, requests: list[tuple[str, int]], concurrency: int, out: Path) -> None:
    """The hand-written loop: AsyncOpenAI, gather behind a semaphore, one jsonl line per reply."""
    import openai

    async def main() -> None:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="not-needed", max_retries=3, timeout=60.0)
        slots = asyncio.Semaphore(concurrency)
        with out.open("a", encoding="utf-8") as fh:

            async def one(i: int, prompt: str, seed: int) -> None:
                async with slots:
                    r = await client.completions.create(model="m", prompt=prompt, max_tokens=MAX_TOKENS,
                                                        stop=["\n"], temperature=0.0, seed=seed)
                fh.write(json.dumps({"i": i, "text": r.choices[0].text, "finish_reason": r.choices[0].finish_reason,
                                     "usage": r.usage.model_dump() if r.usage else None}) + "\n")

            await asyncio.gather(*(one(i, p, s) for i, (p, s) in enumerate(requests)))
        await client.close()

    asyncio.run(main())


def client_only(base_url: str, requests: list[tuple[str, int]], concurrency: int) -> None:
    """branchpoint's model client alone, one `complete` per request from `concurrency` threads."""
    spec = load_spec_model(base_url)
    clients = {seed: OpenAICompatibleClient(spec.model_copy(update={"seed": seed})) for seed in {s for _, s in requests}}
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda r: clients[r[1]].complete(r[0], stop=["\n"], max_tokens=MAX_TOKENS), requests))


def load_spec_model(base_url: str) -> ModelSpec:
    """The model of the spec, alone."""
    return ModelSpec(provider="openai", base_url=base_url, name="m", max_tokens=MAX_TOKENS)


def branchpoint_run(spec_path: Path, run_dir: Path, concurrency: int, n: int) -> None:
    """`run_experiment` of the spec; every execution must finish `ok`."""
    summary = run_experiment(load_spec(spec_path), run_dir, progress=False, concurrency=concurrency)
    assert summary.ran == n and summary.statuses == {"ok": n}, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=512, help="calls per measurement (a multiple of 64)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request")
    parser.add_argument("--repeats", type=int, default=2, help="measurements of each, interleaved; the lowest counts")
    parser.add_argument("--profile", type=Path, help="also write a cProfile of one branchpoint measurement here")
    args = parser.parse_args()
    n = -(-args.n // 64) * 64
    workdir = Path(tempfile.mkdtemp(prefix="bp-cpu-per-call-"))
    with server_process(args.latency) as base_url:
        spec_path = spec_file(workdir, base_url, n)
        requests = requests_of(spec_path, n)
        warm = spec_file(workdir, base_url, 64)
        peer(base_url, requests[:64], args.concurrency, workdir / "peer-warm.jsonl")  # warm-ups, not counted
        client_only(base_url, requests[:64], args.concurrency)
        branchpoint_run(warm, workdir / "warm-run", args.concurrency, 64)
        rows: dict[str, list[tuple[float, float]]] = {"peer": [], "client": [], "branchpoint": []}
        for k in range(args.repeats):
            rows["peer"].append(measured(peer, base_url, requests, args.concurrency, workdir / f"peer-{k}.jsonl"))
            rows["client"].append(measured(client_only, base_url, requests, args.concurrency))
            rows["branchpoint"].append(measured(branchpoint_run, spec_path, workdir / f"run-{k}", args.concurrency, n))
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
            branchpoint_run(spec_path, workdir / "run-profiled", args.concurrency, n)
            prof.disable()
            prof.dump_stats(args.profile)
    load = os.getloadavg()
    print(f"{n} calls, concurrency {args.concurrency}, server latency {args.latency:g} s, "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores")
    best = {name: min(r, key=lambda x: x[0]) for name, r in rows.items()}
    labels = {"peer": "asyncio loop (AsyncOpenAI)", "client": "branchpoint client alone (threads)",
              "branchpoint": "branchpoint run_experiment"}
    for name, (cpu, wall) in best.items():
        each = ", ".join(f"{c / n * 1e3:.2f}" for c, _ in rows[name])
        print(f"  {labels[name]:<36} {cpu / n * 1e3:6.2f} ms CPU/call  ({each} over {args.repeats} repeats)  "
              f"{n / wall:7.1f} calls/s wall")
    ratio = best["branchpoint"][0] / best["peer"][0]
    print(f"  ratio branchpoint / asyncio loop: {ratio:.2f}x  (target <= 3x)")
    print(f"(reproduce: .venv/bin/python benchmarks/cpu_per_call.py --n {n} --concurrency {args.concurrency} "
          f"--latency {args.latency:g} --repeats {args.repeats})")


if __name__ == "__main__":
    main()
