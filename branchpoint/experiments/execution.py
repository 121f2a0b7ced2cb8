"""The in-process execution core: many executions (or fork branches) on one event loop.

Used by the runner (`runner._run_todo`) and by the fork engine
(`branch_execution.run_branch_tasks`), so both run work the same way:

- items are grouped by model setting; each group's model client is opened once (`open_client`),
  wrapped in a per-server connection limit (`limit_connections`: an `asyncio.Semaphore`), and its
  graphs are compiled once (`prepare`);
- at most `concurrency` items are in flight at once, each a coroutine on the loop (up to
  thousands, no thread per execution): `concurrency` worker tasks take the next item when they
  are free, so nothing waits on a dispatcher and memory stays flat however long the sweep;
- each result goes to the run's one writer, a thread that appends the record durably (fsync,
  `RunStore.append_many`: the records that finished meanwhile go together, one fsync) while the
  loop goes on; the item counts as done (`count`, on the loop) only once its record is written;
- the checkpoint saves are committed by that writer too (`commit_states`, see
  `checkpoints.store.batched_saves`), once per batch, just before it appends the batch's
  records: a state a record lists is durable before the record is;
- the heap that exists when the run starts (imported libraries, the plan, opened sources) is
  frozen out of the cyclic garbage collector for the run (`heap_frozen`): without that, each
  full collection rescans it, ~30% of the CPU at concurrency 256 (BENCHMARKS.md);
- no thread outlives the run (the search threads, the writer and the loop's executor threads are
  joined at the end), so a process that ran one can still fork worker processes;
- a bug (an exception that is not a transport fault, which the item itself records as
  `incomplete`) stops every worker after its current item and is raised to the caller.

The public entry points stay blocking: `run_blocking_core` runs the core on the calling thread's
own event loop (on a thread of its own when the caller is itself on an event loop, e.g. a
notebook). Blocking work
that a graph hands to the loop's default executor (a policy written as a plain function, see
`agents.policies`) gets up to `concurrency` threads.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager, contextmanager
from typing import Any, TypeVar

from branchpoint.agents.policies import loop_running, run_blocking
from branchpoint.models.call import ModelClient
from branchpoint.tools.search import RUN_SEARCH_POOL, new_search_pool
from branchpoint.traces import ExecutionRecord, legal_boundary_kind

T = TypeVar("T")
R = TypeVar("R")


async def stream_recording(
    graph: Any, state: Mapping[str, Any] | None, config: dict[str, Any], ctx: Any
) -> tuple[dict[str, Any], list[str]]:
    """Run the graph on the running loop and return its final state and the ids of the
    checkpoints it saved at legal boundaries, taken from the checkpoint stream as they are
    written (no reading them back). Each checkpoint is saved before the next superstep
    (`durability="sync"`)."""
    final: dict[str, Any] = {}
    ids: list[str] = []
    async for event in graph.astream(state, config, context=ctx, durability="sync", stream_mode="checkpoints"):
        final = event["values"]
        if (event["metadata"] or {}).get("source") != "input" and legal_boundary_kind(final.get("boundary")):
            ids.append(event["config"]["configurable"]["checkpoint_id"])
    return final, ids


class ConnectionLimitedClient:
    """A model client that lets at most N calls reach its server at once (per-server limit):
    an `asyncio.Semaphore` for `acomplete` / `achat` on the loop the client was made on, a thread
    semaphore for the blocking calls and for coroutines awaited on another thread's loop (a
    policy written as a plain function), each shared by every `with_seed` / `with_sampling`
    view."""

    def __init__(
        self,
        inner: ModelClient,
        limit: int,
        semaphores: tuple[threading.BoundedSemaphore, asyncio.Semaphore, Any] | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.limit = limit
        self._semaphores = semaphores or (threading.BoundedSemaphore(limit), asyncio.Semaphore(limit), _loop_or_none())

    def with_seed(self, seed: int | None) -> ConnectionLimitedClient:
        """The same limit (shared) for a client with another seed."""
        return ConnectionLimitedClient(self.inner.with_seed(seed), self.limit, self._semaphores)

    def with_sampling(self, **sampling: Any) -> ConnectionLimitedClient:
        """The same limit (shared) for a client with other sampling settings."""
        return ConnectionLimitedClient(self.inner.with_sampling(**sampling), self.limit, self._semaphores)

    def _on_home_loop(self) -> bool:
        home = self._semaphores[2]
        return home is None or home is asyncio.get_running_loop()

    def complete(self, prompt: str, **kwargs: Any) -> Any:
        """`complete` once a connection slot is free."""
        with self._semaphores[0]:
            return self.inner.complete(prompt, **kwargs)

    def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """`chat` once a connection slot is free."""
        with self._semaphores[0]:
            return self.inner.chat(messages, **kwargs)

    async def acomplete(self, prompt: str, **kwargs: Any) -> Any:
        """`acomplete` once a connection slot is free."""
        from branchpoint.models.call import acomplete

        if not self._on_home_loop():  # another thread's loop: that thread may block on the slot
            with self._semaphores[0]:
                return await acomplete(self.inner, prompt, **kwargs)
        async with self._semaphores[1]:
            return await acomplete(self.inner, prompt, **kwargs)

    async def achat(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """`achat` once a connection slot is free."""
        from branchpoint.models.call import achat

        if not self._on_home_loop():
            with self._semaphores[0]:
                return await achat(self.inner, messages, **kwargs)
        async with self._semaphores[1]:
            return await achat(self.inner, messages, **kwargs)

    async def aclose(self) -> None:
        """Close the inner client's async connections, if it has any."""
        await aclose_client(self.inner)


def _loop_or_none() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def limit_connections(client: ModelClient, limit: int) -> ModelClient:
    """Wrap a client so at most `limit` calls are in flight to its server."""
    return ConnectionLimitedClient(client, limit)


async def aclose_client(client: Any) -> None:
    """Close a client's connections of the running loop (clients without `aclose` hold none)."""
    close = getattr(client, "aclose", None)
    if close is not None:
        await close()


class _Stop(Exception):
    """Raised in a worker when another worker failed (internal)."""


async def run_bounded(
    items: Iterable[T],
    fn: Callable[[T], Awaitable[R]],
    concurrency: int,
    on_result: Callable[[R], Awaitable[None] | None],
) -> None:
    """Await `fn(item)` for every item with at most `concurrency` in flight; `on_result` runs on
    the loop, once per result, as results arrive (awaited when it is a coroutine). An exception
    in `fn` or `on_result` stops every worker after its current item and is raised here (the
    first one; the other items' results are dropped)."""
    source = iter(items)
    errors: list[BaseException] = []

    async def worker() -> None:
        while not errors:
            item = next(source, _END)
            if item is _END:
                return
            try:
                result = await fn(item)
                if errors:
                    return
                done = on_result(result)
                if done is not None:
                    await done
            except Exception as exc:  # a bug: handed to the caller, which stops the others
                errors.append(exc)
                return

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    if errors:
        raise errors[0]


_END: Any = object()


class RecordWriter:
    """The run's one writer: a thread that appends records durably, in the order handed over,
    while the loop goes on (`write` returns once the record is on disk).

    Records that arrive while a write is under way wait and then go to disk together, in one
    `append_many` (one fsync for the lot): with one writer, a wave of executions that finish
    together would otherwise queue behind one fsync each (1-4 ms apiece on this machine's disk,
    more while other processes write). Each record is still durable before its `write` returns."""

    def __init__(self, append_many: Callable[[list[ExecutionRecord]], list[ExecutionRecord]]) -> None:
        self._append_many = append_many
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="branchpoint-writer")
        self._waiting: list[tuple[ExecutionRecord, asyncio.Future[ExecutionRecord]]] = []
        self._flushing = False
        self._flush_task: asyncio.Task[None] | None = None

    async def write(self, record: ExecutionRecord) -> ExecutionRecord:
        """The record as written (see `RunStore.append_many`), once it is durable."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[ExecutionRecord] = loop.create_future()
        self._waiting.append((record, done))
        if not self._flushing:
            self._flushing = True
            self._flush_task = loop.create_task(self._flush())
        return await done

    async def _flush(self) -> None:
        """Write what waits, in batches, until nothing does (one flush task at a time)."""
        loop = asyncio.get_running_loop()
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    written = await loop.run_in_executor(self._thread, self._append_many, [r for r, _ in batch])
                except BaseException as exc:  # every record of the batch failed to be written
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for (_, done), rec in zip(batch, written, strict=True):
                    if not done.done():
                        done.set_result(rec)
        finally:
            self._flushing = False

    async def drain(self) -> None:
        """Wait for the flush under way, if any, to end (before the loop stops)."""
        if self._flush_task is not None:
            await asyncio.gather(self._flush_task, return_exceptions=True)

    def close(self) -> None:
        """Stop the writer thread (after the last write)."""
        self._thread.shutdown(wait=True)


async def execute(
    items: Sequence[T],
    *,
    model_key: Callable[[T], str],
    open_client: Callable[[T, ExitStack], AbstractContextManager[ModelClient]],
    max_connections: Callable[[T], int | None],
    prepare: Callable[[T], None],
    run: Callable[[T, ModelClient], Awaitable[ExecutionRecord]],
    append: Callable[[list[ExecutionRecord]], list[ExecutionRecord]],
    count: Callable[[ExecutionRecord], None],
    concurrency: int,
    commit_states: Callable[[], None] | None = None,
) -> None:
    """Run every item: grouped by `model_key`, one client per group (`open_client(first item,
    group stack)`, limited to `max_connections(first item) or concurrency` calls at once),
    `prepare(item)` for each before any runs (open sources, compile graphs), then
    `run(item, client)` with at most `concurrency` in flight; each record goes through the one
    writer (`append`: a batch of records in order, durably, e.g. `RunStore.append_many`) and is
    then counted (`count`). `commit_states` (the `batched_saves` commit of the run's saver) is
    called on the writer thread before each batch is appended, so every checkpoint saved before
    a record was handed over is committed before that record is written."""
    loop = asyncio.get_running_loop()
    nodes = _node_threads()
    loop.set_default_executor(nodes)
    searches = new_search_pool()
    token = RUN_SEARCH_POOL.set(searches)  # the worker tasks inherit it
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(model_key(item), []).append(item)
    writer = RecordWriter(append if commit_states is None else states_first(commit_states, append))
    with heap_frozen():  # the heap before the run, out of its garbage collections
        try:
            for group_items in groups.values():
                async with _group(group_items[0], open_client, max_connections, concurrency) as client:
                    for item in group_items:
                        prepare(item)

                    async def one(item: T, client: ModelClient = client) -> ExecutionRecord:
                        return await writer.write(await run(item, client))

                    await run_bounded(group_items, one, concurrency, count)
        finally:
            await writer.drain()
            writer.close()
            # No thread outlives the run (a later `--processes` run forks its workers only from a
            # process with one thread): a fresh executor for the loop, the run's threads joined.
            RUN_SEARCH_POOL.reset(token)
            loop.set_default_executor(_node_threads())
            nodes.shutdown(wait=True)
            searches.shutdown(wait=True)


@contextmanager
def heap_frozen() -> Iterator[None]:
    """Keep the objects that exist now out of the cyclic garbage collector until the end
    (`gc.freeze`, then `gc.unfreeze`): a run's full collections then scan what the run made, not
    the hundreds of thousands of objects of the libraries it imported (measured: ~0.36 s per full
    collection at concurrency 256, ~30% of the run's CPU). Nothing becomes uncollectable: what
    was frozen is collected as usual after the run. Left alone when something froze the heap
    already (an enclosing run, or an application that freezes before it forks)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def states_first(
    commit_states: Callable[[], None], append: Callable[[list[ExecutionRecord]], list[ExecutionRecord]]
) -> Callable[[list[ExecutionRecord]], list[ExecutionRecord]]:
    """`append`, after committing the checkpoint saves made so far (those of every record in the
    batch, saved before the record was handed to the writer): the states first, then the
    records that list them, so a crash between the two leaves states without a record (redone
    and cleared by the next run), never a record without its states."""

    def append_after_states(records: list[ExecutionRecord]) -> list[ExecutionRecord]:
        commit_states()
        return append(records)

    return append_after_states


#: Threads for blocking work on a loop (plain-function policies, `asyncio.to_thread`, DNS):
#: made when needed, at most this many (the most executions a run keeps in flight).
NODE_THREADS = 1024


def _node_threads() -> ThreadPoolExecutor:
    """A default executor for the loop of up to NODE_THREADS threads (the standard one has
    min(32, cores + 4): a plain-function policy would run a handful of executions at once);
    it starts no thread until something is handed to it."""
    return ThreadPoolExecutor(NODE_THREADS, thread_name_prefix="branchpoint-node")


@asynccontextmanager
async def _group(
    first: T,
    open_client: Callable[[T, ExitStack], AbstractContextManager[ModelClient]],
    max_connections: Callable[[T], int | None],
    concurrency: int,
) -> AsyncIterator[ModelClient]:
    """One group's client: opened by the (blocking) opener, where an embedded server starts,
    limited to its connections, and its async connections closed at the end, on the loop."""
    with ExitStack() as stack:
        opened = stack.enter_context(open_client(first, stack))
        client = limit_connections(opened, max_connections(first) or concurrency)
        try:
            yield client
        finally:
            await aclose_client(client)


_LOOP_THREAD: ThreadPoolExecutor | None = None
_LOOP_THREAD_PID = 0


def run_blocking_core(main: Callable[[], Awaitable[R]]) -> R:
    """Run the coroutine `main()` makes to completion from blocking code, on this thread's own
    event loop, kept from one run to the next (`agents.policies.run_blocking`): clients that
    cache their async connections process-wide (langchain-openai's) and the runner's own stay
    valid across runs, where a new loop per run would leave them bound to a closed one. When
    this thread already runs a loop (a notebook, an async app), on one long-lived thread of its
    own instead."""
    global _LOOP_THREAD, _LOOP_THREAD_PID
    if not loop_running():
        return run_blocking(_as_coroutine(main))
    if _LOOP_THREAD is None or os.getpid() != _LOOP_THREAD_PID:  # a forked child has no such thread
        _LOOP_THREAD = ThreadPoolExecutor(1, thread_name_prefix="branchpoint-loop")
        _LOOP_THREAD_PID = os.getpid()
    return _LOOP_THREAD.submit(lambda: run_blocking(_as_coroutine(main))).result()


async def _as_coroutine(main: Callable[[], Awaitable[R]]) -> R:
    return await main()


__all__ = [
    "ConnectionLimitedClient",
    "RecordWriter",
    "execute",
    "heap_frozen",
    "limit_connections",
    "run_blocking_core",
    "run_bounded",
    "states_first",
    "stream_recording",
]
