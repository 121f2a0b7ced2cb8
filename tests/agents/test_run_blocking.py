"""`run_blocking` keeps one event loop per thread, and a forked child (a `--processes` worker of
a process that ran before) must not reuse its parent's: the inherited loop's default executor
counts the parent's idle worker thread, which the child does not have, so work handed to it
would wait forever; nor may it close the inherited loop (which its finaliser does once the child
drops it), since that removes the self-pipe from the epoll instance the parent still uses: the
parent's next wake-up from a thread would never arrive (this hung a run after a `--processes`
run in the same process)."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import threading

import pytest

from branchpoint.agents.policies import run_blocking
from branchpoint.experiments.execution import run_blocking_core


async def _in_executor() -> int:
    return await asyncio.get_running_loop().run_in_executor(None, lambda: 41 + 1)


def _child(conn) -> None:  # type: ignore[no-untyped-def]
    conn.send((run_blocking(_in_executor()), run_blocking_core(_in_executor)))
    conn.close()


def test_the_loop_is_kept_between_calls_on_one_thread() -> None:
    loops = [run_blocking(_current_loop()) for _ in range(2)]
    assert loops[0] is loops[1]
    other: list[asyncio.AbstractEventLoop] = []
    t = threading.Thread(target=lambda: other.append(run_blocking(_current_loop())))
    t.start()
    t.join()
    assert other[0] is not loops[0]  # each thread its own loop


async def _current_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_runs_coroutines_on_a_loop_of_its_own() -> None:
    assert run_blocking(_in_executor()) == 42  # the parent's loop now has an idle executor thread
    ctx = multiprocessing.get_context("fork")
    parent_end, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child_end,))
    proc.start()
    try:
        assert parent_end.poll(30), "the forked child hung on its parent's event loop"
        assert parent_end.recv() == (42, 42)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0


def _child_drops_the_inherited_loop(conn) -> None:  # type: ignore[no-untyped-def]
    result = run_blocking(_in_executor())  # the child's own loop replaces the inherited one
    gc.collect()  # would finalise (and close) the inherited loop if nothing kept it
    conn.send(result)
    conn.close()


async def _seconds_to_be_woken_by_a_thread() -> float:
    # Nothing else wakes the loop: only the executor thread's call_soon_threadsafe, through the
    # self-pipe, can; without it the loop sleeps until the 10 s timer (then finds the result).
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.wait_for(loop.run_in_executor(None, lambda: 7), 10)
    return loop.time() - start


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_the_parents_loop_still_wakes_up_after_a_forked_child_ran() -> None:
    assert run_blocking(_in_executor()) == 42
    ctx = multiprocessing.get_context("fork")
    parent_end, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_drops_the_inherited_loop, args=(child_end,))
    # The child's gc.collect must find only the loop it drops, not garbage that earlier tests left
    # here (whose finalisers may wait on threads a forked child does not have).
    gc.collect()
    proc.start()
    try:
        assert parent_end.poll(30) and parent_end.recv() == 42
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    assert run_blocking(_seconds_to_be_woken_by_a_thread()) < 5  # 10 s when the self-pipe was lost
