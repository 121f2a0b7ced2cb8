"""LangGraph's checkpoint saves in the calling thread, for the runner's synchronous executions.

Why: LangGraph's sync loop opens a new thread pool for every `graph.stream` / `invoke`
(`BackgroundExecutor`, through langchain-core's `get_executor_for_config`) and hands every
checkpoint save and every task's write save to it. A no-search execution makes 7 such hand-overs
and starts 1-2 threads; at concurrency 64 that is ~1 ms of CPU per execution of thread starts and
GIL hand-overs (BENCHMARKS.md, "CPU per model call"). The runner streams with
`durability="sync"`, so LangGraph waits for each checkpoint before the next superstep anyway,
and the agent graph runs one node per superstep, which LangGraph already runs in the calling
thread. Inside `inline_saves()` the pool is replaced by an executor that runs each submitted
call at once, in the submitting thread: the same saves, of the same checkpoints, made before
the stream goes on (and in submission order, where the pool could start them out of order).

Only LangGraph's loop is affected, only for the code inside `inline_saves()` (a context
variable, so other threads and other graphs in the process keep their pools). A graph with
several nodes in one superstep would run them one after the other in there. The hook replaces
`langgraph.pregel._executor.get_executor_for_config`, a private name of the pinned LangGraph
(`installed()` says whether it took; tests check it does, so an upgrade that moves it is seen).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

_INLINE: contextvars.ContextVar[bool] = contextvars.ContextVar("branchpoint_inline_saves", default=False)


class InlineExecutor(concurrent.futures.Executor):
    """An executor that runs each call when it is submitted, in the submitting thread; its future
    is done on return (with the result, or the exception, as a thread pool's would hold it)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # as ThreadPoolExecutor: the future holds it, the caller decides
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future


_INSTALLED = False


def _install() -> bool:
    """Wrap LangGraph's executor factory once (per process); False if the pinned name is gone."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        from langgraph.pregel import _executor
    except ImportError:  # pragma: no cover - LangGraph is a dependency
        return False
    original = getattr(_executor, "get_executor_for_config", None)
    if original is None or not hasattr(_executor, "BackgroundExecutor"):
        return False

    def get_executor_for_config(config: Any) -> Any:
        return nullcontext(InlineExecutor()) if _INLINE.get() else original(config)

    _executor.get_executor_for_config = get_executor_for_config
    _INSTALLED = True
    return True


def installed() -> bool:
    """Whether LangGraph's saves can run inline here (the hook is in place)."""
    return _install()


@contextmanager
def inline_saves() -> Iterator[None]:
    """Within this block (this thread / context only), LangGraph's sync loop saves checkpoints
    and writes in the calling thread instead of a new thread pool."""
    _install()
    token = _INLINE.set(True)
    try:
        yield
    finally:
        _INLINE.reset(token)
