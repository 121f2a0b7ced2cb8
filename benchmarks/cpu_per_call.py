"""Framework CPU per model call: branchpoint against a hand-written asyncio loop (the peer).

Both talk to the same local OpenAI-compatible server (`tests/servers/openai_fault_server.py`, its
own process, so its CPU is not counted) with the same requests: the completion prompt of a
no-search `constrained` execution for each of the 64 demo questions (`fewshot_prompt`, no
evidence), `max_tokens` 16, stop at a newline, temperature 0 and the execution's seed.

- peer: `openai.AsyncOpenAI`, one `asyncio.gather` over the calls behind a semaphore of
  `--concurrency`, each reply's text and usage appended to a jsonl file — what a researcher
  writes instead of a framework.
- client, async: branchpoint's `OpenAICompatibleClient.acomplete` alone, `--concurrency` at once
  on one event loop (the runner's request path without graph, checkpoints or record); client,
  threads: its blocking `complete` from `--concurrency` threads (what judges use).
- agent graph, no checkpointer / + SQLite checkpoints / + AsyncSqliteSaver: the compiled agent
  graph over the same executions, `--concurrency` in flight on one event loop: `graph.ainvoke`
  without a saver, the runner's `stream_recording` with the run's SQLite saver (async saves made
  in the loop's thread, `checkpoints.store.SqliteCheckpointer`), and the same with LangGraph's
  `AsyncSqliteSaver` (aiosqlite: each statement handed to its thread): where the CPU goes.
- branchpoint: `run_experiment` over the same executions (constrained policy, no search, one
  completion call each, SQLite checkpoints, durable appends), `--concurrency` at once.

CPU is this process's user + system time (`resource.getrusage`, every thread) over the measured
part divided by the calls, after a warm-up of each (imports, connection pools, compiled graph)
that is not counted. The rows are measured in turn, `--repeats` times; each row prints the
median and every repeat, and the ratio branchpoint / peer (the figure of issue 20, target
<= 3x) is given of the medians and of the lowest. `--profile FILE` then profiles one more
branchpoint run, every thread (cProfile, each thread timed by its own CPU clock), and prints the
top functions.

    .venv/bin/python benchmarks/cpu_per_call.py [--n 512] [--concurrency 64] [--latency 0.05] [--repeats 3]
    .venv/bin/python benchmarks/cpu_per_call.py --repeats 1 --profile prof.out
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchpoint.agents import build_graph, initial_state, resolve_policy
from branchpoint.agents.prompts import fewshot_prompt
from branchpoint.checkpoints import open_checkpointer
from branchpoint.checkpoints.serde import safe_serde
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.execution import run_bounded, stream_recording
from branchpoint.experiments.planning import PlannedExecution, plan_executions, select_questions
from branchpoint.experiments.runner import agent_context
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.spec import ModelSpec

SERVER = Path(__file__).resolve().parents[1] / "tests" / "servers" / "openai_fault_server.py"
MAX_TOKENS = 16


@contextmanager
def server_process(latency: float) -> Iterator[str]:
    """The test server in its own process (its CPU is not this process's)."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", "0", "--latency-s", str(latency)], stdout=subprocess.PIPE, text=True
    )
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
    path.write_text(
        yaml.safe_dump(
            {
                "name": f"cpu-per-call-{n}",
                "questions": {"path": "demo", "limit": min(n, 64)},
                "model": {"provider": "openai", "base_url": base_url, "name": "m", "max_tokens": MAX_TOKENS},
                "agent": {"policy": "constrained", "search": False},
                "sweep": {"model.seed": list(range(-(-n // 64)))},
            }
        )
    )
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
                    r = await client.completions.create(
                        model="m", prompt=prompt, max_tokens=MAX_TOKENS, stop=["\n"], temperature=0.0, seed=seed
                    )
                fh.write(
                    json.dumps(
                        {
                            "i": i,
                            "text": r.choices[0].text,
                            "finish_reason": r.choices[0].finish_reason,
                            "usage": r.usage.model_dump() if r.usage else None,
                        }
                    )
                    + "\n"
                )

            await asyncio.gather(*(one(i, p, s) for i, (p, s) in enumerate(requests)))
        await client.close()

    asyncio.run(main())


def client_only(base_url: str, requests: list[tuple[str, int]], concurrency: int) -> None:
    """branchpoint's model client alone, one blocking `complete` per request from `concurrency` threads."""
    spec = load_spec_model(base_url)
    clients = {
        seed: OpenAICompatibleClient(spec.model_copy(update={"seed": seed})) for seed in {s for _, s in requests}
    }
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda r: clients[r[1]].complete(r[0], stop=["\n"], max_tokens=MAX_TOKENS), requests))


def client_async(base_url: str, requests: list[tuple[str, int]], concurrency: int) -> None:
    """branchpoint's model client alone, one `acomplete` per request, `concurrency` in flight on one loop."""
    spec = load_spec_model(base_url)
    base = OpenAICompatibleClient(spec)
    clients = {seed: base.with_seed(seed) for seed in {s for _, s in requests}}

    async def main() -> None:
        async def one(r: tuple[str, int]) -> object:
            return await clients[r[1]].acomplete(r[0], stop=["\n"], max_tokens=MAX_TOKENS)

        await run_bounded(requests, one, concurrency, lambda _: None)
        await base.aclose()

    asyncio.run(main())


def load_spec_model(base_url: str) -> ModelSpec:
    """The model of the spec, alone."""
    return ModelSpec(provider="openai", base_url=base_url, name="m", max_tokens=MAX_TOKENS)


def graph_only(
    base_url: str, spec_path: Path, concurrency: int, checkpoints: Path | None, saver_kind: str = "run"
) -> None:
    """The agent graph alone over the spec's executions, `concurrency` in flight on one event loop:
    no record, no run folder; with `checkpoints`, the run's SQLite saver (`saver_kind` "run") or
    LangGraph's AsyncSqliteSaver ("aiosqlite") and the runner's `stream_recording`."""
    spec = load_spec(spec_path)
    plan = plan_executions(spec, select_questions(spec))
    pool = SourcePool(False)

    async def main() -> None:
        async with _saver(checkpoints, saver_kind) as saver:
            graph = build_graph(resolve_policy("constrained"), saver)
            base = OpenAICompatibleClient(plan[0].spec.model)
            clients = {p.spec.model.seed: base.with_seed(p.spec.model.seed) for p in plan}

            async def one(p: PlannedExecution) -> None:
                ctx = agent_context(p.spec, clients[p.spec.model.seed], pool)
                state = initial_state(p.question.id, p.question.question, p.spec.retrieval.default)
                config = {"configurable": {"thread_id": f"{checkpoints}-{p.execution_id}"}, "recursion_limit": 10}
                if saver is None:
                    await graph.ainvoke(state, config, context=ctx)
                else:
                    await stream_recording(graph, state, config, ctx)

            await run_bounded(plan, one, concurrency, lambda _: None)
            await base.aclose()

    asyncio.run(main())


@asynccontextmanager
async def _saver(path: Path | None, kind: str) -> AsyncIterator[object]:
    if path is None:
        yield None
    elif kind == "aiosqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with aiosqlite.connect(str(path)) as conn:
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA synchronous=NORMAL")
            saver = AsyncSqliteSaver(conn, serde=safe_serde())
            await saver.setup()
            yield saver
    else:
        with open_checkpointer(str(path)) as saver:
            yield saver


def branchpoint_run(spec_path: Path, run_dir: Path, concurrency: int, n: int) -> None:
    """`run_experiment` of the spec; every execution must finish `ok`."""
    summary = run_experiment(load_spec(spec_path), run_dir, progress=False, concurrency=concurrency)
    assert summary.ran == n and summary.statuses == {"ok": n}, summary


def profile_run(spec_path: Path, run_dir: Path, concurrency: int, n: int, out: Path) -> None:
    """cProfile of one `run_experiment`, every thread (each its own profiler, timed by that
    thread's CPU clock, merged): prints the top functions by own time and by cumulative time."""
    import cProfile
    import pstats
    import threading

    profiles: list[cProfile.Profile] = []

    def start(*_: object) -> None:  # the first event of each new thread starts its profiler
        prof = cProfile.Profile(timer=time.thread_time)
        profiles.append(prof)
        prof.enable()

    main_prof = cProfile.Profile(timer=time.thread_time)
    threading.setprofile(start)
    main_prof.enable()
    branchpoint_run(spec_path, run_dir, concurrency, n)
    main_prof.disable()
    threading.setprofile(None)  # type: ignore[arg-type]
    stats = pstats.Stats(main_prof)
    for prof in profiles:
        stats.add(prof)
    stats.dump_stats(out)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=512, help="calls per measurement (a multiple of 64)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each, interleaved")
    parser.add_argument("--profile", type=Path, help="then profile one branchpoint run (all threads) into this file")
    args = parser.parse_args()
    n = -(-args.n // 64) * 64
    workdir = Path(tempfile.mkdtemp(prefix="bp-cpu-per-call-"))
    with server_process(args.latency) as base_url:
        spec_path = spec_file(workdir, base_url, n)
        requests = requests_of(spec_path, n)
        warm = spec_file(workdir, base_url, 64)
        runs: dict[str, Callable[[int], object]] = {
            "peer": lambda k: peer(base_url, requests, args.concurrency, workdir / f"peer-{k}.jsonl"),
            "client_async": lambda k: client_async(base_url, requests, args.concurrency),
            "client": lambda k: client_only(base_url, requests, args.concurrency),
            "graph": lambda k: graph_only(base_url, spec_path, args.concurrency, None),
            "checkpointed": lambda k: graph_only(base_url, spec_path, args.concurrency, workdir / f"graph-{k}.sqlite"),
            "aiosqlite": lambda k: graph_only(
                base_url, spec_path, args.concurrency, workdir / f"aio-{k}.sqlite", "aiosqlite"
            ),
            "branchpoint": lambda k: branchpoint_run(spec_path, workdir / f"run-{k}", args.concurrency, n),
        }
        # warm-ups, not counted: imports, connection pools, compiled graphs
        peer(base_url, requests[:64], args.concurrency, workdir / "peer-warm.jsonl")
        client_only(base_url, requests[:64], args.concurrency)
        client_async(base_url, requests[:64], args.concurrency)
        graph_only(base_url, warm, args.concurrency, workdir / "graph-warm.sqlite")
        graph_only(base_url, warm, args.concurrency, workdir / "aio-warm.sqlite", "aiosqlite")
        branchpoint_run(warm, workdir / "warm-run", args.concurrency, 64)
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for k in range(args.repeats):
            for name, fn in runs.items():
                rows[name].append(measured(fn, k))
        if args.profile:
            profile_run(spec_path, workdir / "run-profiled", args.concurrency, n, args.profile)
    load = os.getloadavg()
    print(
        f"{n} calls, concurrency {args.concurrency}, server latency {args.latency:g} s, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores"
    )
    labels = {
        "peer": "asyncio loop (AsyncOpenAI)",
        "client_async": "branchpoint client alone (async)",
        "client": "branchpoint client alone (threads)",
        "graph": "agent graph, async, no checkpointer",
        "checkpointed": "agent graph, async + run's SQLite saver",
        "aiosqlite": "agent graph, async + AsyncSqliteSaver",
        "branchpoint": "branchpoint run_experiment",
    }
    median = {name: statistics.median(c for c, _ in r) for name, r in rows.items()}
    for name, r in rows.items():
        each = ", ".join(f"{c / n * 1e3:.2f}" for c, _ in r)
        wall = statistics.median(w for _, w in r)
        print(
            f"  {labels[name]:<40} {median[name] / n * 1e3:6.2f} ms CPU/call (median; {each})  "
            f"{n / wall:7.1f} calls/s wall"
        )
    low = min(c for c, _ in rows["branchpoint"]) / min(c for c, _ in rows["peer"])
    print(
        f"  ratio branchpoint / asyncio loop: {median['branchpoint'] / median['peer']:.2f}x of the medians, "
        f"{low:.2f}x of the lowest (target <= 3x)"
    )
    print(
        f"(reproduce: .venv/bin/python benchmarks/cpu_per_call.py --n {n} --concurrency {args.concurrency} "
        f"--latency {args.latency:g} --repeats {args.repeats})"
    )


if __name__ == "__main__":
    main()
