"""The asynchronous execution core: bounded in-flight work, connection limits, one writer, and
runs at concurrency 256 (one event loop, no thread per execution)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest

from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.execution import RecordWriter, limit_connections, run_blocking_core, run_bounded
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.traces import read_records
from tests.experiments.conftest import CountingOpener, fewshot_responder


class SlowServer:
    """A client whose calls take 20 ms (async and blocking) and count how many are in flight."""

    name = "slow"

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.lock = threading.Lock()

    def _enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def _leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    async def acomplete(self, prompt, **kwargs):
        self._enter()
        await asyncio.sleep(0.02)
        self._leave()
        return "ok"

    def complete(self, prompt, **kwargs):
        self._enter()
        time.sleep(0.02)
        self._leave()
        return "ok"


def test_connection_limit_bounds_async_and_blocking_calls_in_flight():
    server = SlowServer()
    client = limit_connections(server, 3)
    out: list[str] = []

    async def main() -> None:
        await run_bounded(range(24), lambda i: client.acomplete(str(i)), 12, out.append)

    asyncio.run(main())
    assert out == ["ok"] * 24 and server.peak == 3

    blocking = SlowServer()
    limited = limit_connections(blocking, 2)
    threads = [threading.Thread(target=limited.complete, args=(str(i),)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert blocking.peak == 2


def test_run_bounded_keeps_at_most_n_in_flight_records_on_the_loop_and_raises_a_bug():
    in_flight, peak = 0, 0
    loop_thread: list[int] = []

    async def work(i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return i * i

    seen: list[tuple[int, int]] = []

    async def main() -> None:
        loop_thread.append(threading.get_ident())
        await run_bounded(range(200), work, 16, lambda r: seen.append((r, threading.get_ident())))

    asyncio.run(main())
    assert sorted(r for r, _ in seen) == [i * i for i in range(200)] and peak == 16
    assert {t for _, t in seen} == set(loop_thread)  # results handled on the loop

    async def fail_on_7(i: int) -> int:
        await asyncio.sleep(0)
        if i == 7:
            raise ValueError("bug in item 7")
        return i

    done: list[int] = []
    with pytest.raises(ValueError, match="item 7"):
        asyncio.run(run_bounded(range(1000), fail_on_7, 4, done.append))
    assert 7 not in done and len(done) < 1000  # the others stopped after their current item


def test_record_writer_appends_in_order_on_one_thread():
    written: list[tuple[int, int]] = []

    def append_many(recs):
        written.extend((rec, threading.get_ident()) for rec in recs)
        return list(recs)

    async def main() -> list[int]:
        writer = RecordWriter(append_many)  # type: ignore[arg-type]
        try:
            return [await writer.write(i) for i in range(5)]  # type: ignore[arg-type]
        finally:
            writer.close()

    assert asyncio.run(main()) == list(range(5))
    assert [r for r, _ in written] == list(range(5)) and len({t for _, t in written}) == 1


def test_record_writer_writes_what_arrives_meanwhile_in_one_batch_and_passes_failures_on():
    batches: list[list[int]] = []
    release = threading.Event()

    def append_many(recs):
        release.wait(5)  # the first batch is slow (a disk flush): the others arrive meanwhile
        batches.append(list(recs))
        if 13 in recs:
            raise OSError("disk full")
        return [r * 10 for r in recs]

    async def main() -> list[object]:
        writer = RecordWriter(append_many)  # type: ignore[arg-type]
        try:
            first = asyncio.ensure_future(writer.write(0))  # type: ignore[arg-type]
            await asyncio.sleep(0.05)
            rest = [asyncio.ensure_future(writer.write(i)) for i in range(1, 20)]  # type: ignore[arg-type]
            await asyncio.sleep(0.05)
            release.set()
            results = await asyncio.gather(first, *rest, return_exceptions=True)
            await writer.drain()
            return results
        finally:
            writer.close()

    results = asyncio.run(main())
    assert batches == [[0], list(range(1, 20))]  # 19 records, one append_many (one fsync)
    assert results[0] == 0
    assert all(isinstance(r, OSError) for r in results[1:])  # none of that batch counts as written


def test_run_blocking_core_runs_from_inside_an_event_loop():
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def caller() -> int:  # e.g. a notebook: run_experiment called while a loop runs
        return run_blocking_core(answer)

    assert run_blocking_core(answer) == 42
    assert asyncio.run(caller()) == 42


def test_run_and_fork_at_concurrency_256_match_concurrency_1(tmp_path, write_spec, isolated_cache):
    spec = load_spec(write_spec({"sweep": {"agent.search": [True, False], "model.seed": list(range(22))}}))
    records = {}
    threads_before = threading.active_count()
    for concurrency in (1, 256):
        run_dir = tmp_path / f"run-{concurrency}"
        summary = run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener(), concurrency=concurrency)
        assert summary.ran == 264 and summary.statuses == {"ok": 264}
        # no thread outlives a run (a later --processes run forks its workers only then)
        assert threading.active_count() == threads_before
        fork = fork_run(
            run_dir,
            ForkPlan(actions=["THINK", "STOP"], repeats=1, concurrency=concurrency),
            progress=False,
            model_opener=CountingOpener(),
        )
        assert fork.ran > 0 and fork.statuses == {"ok": fork.ran}
        # timings, LangGraph's checkpoint ids, and the invocation that wrote each record
        varying = {"wall_s", "steps", "checkpoint_ids", "invocation"}
        records[concurrency] = (
            sorted(
                (r.model_dump_json(exclude=varying), [s.kind for s in r.steps])
                for r in read_records(run_dir / "executions.jsonl")
            ),
            sorted(  # a branch's id names its parent's checkpoint
                (r.model_dump_json(exclude=varying | {"execution_id", "parent"}), [s.kind for s in r.steps])
                for r in read_records(run_dir / "forks.jsonl")
            ),
        )
    assert records[1] == records[256]


def test_a_run_keeps_the_heap_it_started_with_out_of_its_garbage_collections(tmp_path, write_spec, isolated_cache):
    """The objects that exist when a run starts are frozen out of the cyclic GC while it runs (a
    full collection would rescan every imported library's objects) and handed back after it."""
    frozen_during: list[int] = []

    def responder(prompt: str, request: dict | None = None) -> str:
        frozen_during.append(gc.get_freeze_count())
        return fewshot_responder(prompt, request)

    assert gc.get_freeze_count() == 0
    spec = load_spec(write_spec())
    summary = run_experiment(spec, tmp_path / "run", progress=False, model_opener=CountingOpener(responder=responder))
    assert summary.statuses == {"ok": 12} and frozen_during
    assert min(frozen_during) > 10_000  # the libraries' objects, at least
    assert gc.get_freeze_count() == 0  # collectable again after the run
    gc.freeze()  # something froze the heap already (an application before it forks): left as it is
    try:
        run_experiment(spec, tmp_path / "again", progress=False, model_opener=CountingOpener(responder=responder))
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
