"""The one driver of every executor: missing work -> shards -> futures -> fold -> tally -> progress.

A run (`branchpoint run`) and a fork study (`branchpoint fork`, `replay`) both come here with
the work they still lack (`missing`: what is planned and not yet recorded as final). A *backend*
says how that work is cut into shards and how a shard is started: in this process (the ordinary
runner or the fork engine, which draw their own progress bar), in local processes
(`process_executor`) or as Ray tasks (`ray_executor`). Every started shard is a
`concurrent.futures.Future` of its `ShardOutcome`; the driver waits on them, folds each finished
shard's folder into the run folder (the caller's `fold`), tallies what it added, and shows the
progress of the shards still running by counting the lines of their trace files.

When a shard fails, or the driver is interrupted, the others are stopped, what they recorded is
folded (`recover`), and the error is raised naming the shard (and its condition, where a shard
is one condition).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from branchpoint.errors import BranchpointError
from branchpoint.experiments.runner import progress_bar
from branchpoint.experiments.shards import ShardProgress
from branchpoint.experiments.tallies import Tally, tally_cache, tally_records
from branchpoint.traces import EXECUTIONS_FILE, ExecutionRecord, TraceError

W = TypeVar("W")


@dataclass
class Shard(Generic[W]):
    """One part of the missing work, run in one place.

    `folder` is the shard's own run folder when it writes one (folded when it is done, watched
    for progress meanwhile); None when it writes into the run folder itself. `where` says what
    the shard holds in an error message (e.g. its condition); None: errors are not renamed.
    `trace` is the trace file in its folder that progress counts (`forks.jsonl` for a fork shard).
    """

    name: str
    items: list[W]
    where: str | None = None
    folder: Path | None = None
    trace: str = EXECUTIONS_FILE


@dataclass
class ShardOutcome:
    """What a finished shard hands the driver: the records it returned (a Ray task's result, for
    a folder the driver may not see) and, for a shard that wrote into the run folder itself, what
    it ran (`ran`, `statuses`)."""

    records: list[ExecutionRecord] = field(default_factory=list)
    node: str = ""
    ran: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    #: The response cache's hits and misses over what it ran (`tallies.cache_outcomes`).
    response_cache: dict[str, int] = field(default_factory=dict)


class Backend(Protocol[W]):
    """A way to run shards: how the missing work is cut, how a shard is started, how it is stopped."""

    #: How the progress bar names the backend ("2 processes", "ray, 3 shards").
    description: str
    #: True when the shards write into the run folder itself (in this process, under its lock).
    in_place: bool

    def shards(self, todo: list[W]) -> list[Shard[W]]:
        """The shards of the missing work (never an empty one)."""
        ...

    def session(self) -> AbstractContextManager[Any]:
        """What must be open while shards run (a Ray session); closed after the last is folded."""
        ...

    def submit_all(self, shards: list[Shard[W]]) -> dict[Future[ShardOutcome], Shard[W]]:
        """Start every shard; the future of each. (All at once: a backend that forks processes
        does so before the driver starts any thread.)"""
        ...

    def stop(self) -> None:
        """Stop the shards still running (a shard failed, or the driver is interrupted)."""
        ...


class InProcess(Generic[W]):
    """The missing work as one shard run in this process, now, by `run` (the ordinary runner or
    the fork engine, writing into the run folder under the driver's lock and drawing its own
    progress bar); its future is done when `submit_all` returns."""

    description = "this process"
    in_place = True

    def __init__(self, run: Callable[[list[W]], ShardOutcome]) -> None:
        self.run = run

    def shards(self, todo: list[W]) -> list[Shard[W]]:
        """All of the missing work, as one shard."""
        return [Shard("this-process", todo)]

    def session(self) -> AbstractContextManager[Any]:
        """Nothing to open."""
        return nullcontext()

    def submit_all(self, shards: list[Shard[W]]) -> dict[Future[ShardOutcome], Shard[W]]:
        """Run each shard here, one after the other (an error is raised as it is)."""
        out: dict[Future[ShardOutcome], Shard[W]] = {}
        for shard in shards:
            future: Future[ShardOutcome] = Future()
            future.set_result(self.run(shard.items))
            out[future] = shard
        return out

    def stop(self) -> None:
        """Nothing runs once `submit_all` has returned."""


#: Folds a finished shard into the run folder; returns the records it added.
Fold = Callable[[Shard[Any], ShardOutcome], list[ExecutionRecord]]


def missing(planned: Iterable[W], done: Collection[str], key: Callable[[W], str]) -> list[W]:
    """The planned work whose id (`key`) has no final record yet, in plan order."""
    return [p for p in planned if key(p) not in done]


def named_error(shard: Shard[Any], exc: BaseException) -> BaseException:
    """A failed shard's error for people: an input, server or trace error keeps its one-line form,
    prefixed with the shard's name and what it holds; anything else (a bug) is raised as it is.

    A Ray task's error carries the shard's own error as `cause`.
    """
    cause = getattr(exc, "cause", None) or exc
    if shard.where is None or not isinstance(cause, (BranchpointError, TraceError)):
        return exc
    try:
        return type(cause)(f"shard {shard.name} ({shard.where}): {cause}")
    except TypeError:
        return cause


def drive(
    todo: list[W],
    backend: Backend[W],
    summary: Tally,
    *,
    fold: Fold | None = None,
    recover: Callable[[], object] | None = None,
    progress: bool = True,
    label: str = "",
    started: float | None = None,
) -> None:
    """Run the missing work `todo` on `backend`, counting what each shard adds into `summary`.

    `fold` folds a finished shard's folder (and returned records) into the run folder; a shard
    without a folder wrote into the run folder itself and reports what it ran. `recover` folds
    whatever shard folders are present; it runs when a shard fails or the driver is interrupted,
    so nothing the other shards recorded is lost. A progress bar is drawn for shards that write
    their own folders (the others, running here, draw their own).
    """
    if not todo:
        return
    started = time.perf_counter() if started is None else started
    shards = backend.shards(todo)
    watched = [s for s in shards if s.folder is not None]
    with backend.session():
        try:
            futures = backend.submit_all(shards)  # before any thread of the driver starts
            with progress_bar(progress and bool(watched)) as bar:
                bar_task = bar.add_task(f"{label} ({backend.description})", total=len(todo), rate="")
                watcher = ShardProgress()
                for shard in watched:
                    assert shard.folder is not None
                    watcher.watch(shard.name, shard.folder / shard.trace)
                while futures:
                    done, _ = wait(list(futures), timeout=0.5, return_when=FIRST_COMPLETED)
                    for future in done:
                        shard = futures.pop(future)
                        try:
                            outcome = future.result()
                        except BaseException as exc:
                            raise named_error(shard, exc) from None
                        if shard.folder is not None:
                            watcher.forget(shard.name, shard.folder / shard.trace)
                        if fold is not None and shard.folder is not None:
                            tally_records(summary, fold(shard, outcome))
                        else:
                            summary.ran += outcome.ran
                            for status, n in outcome.statuses.items():
                                summary.statuses[status] = summary.statuses.get(status, 0) + n
                            tally_cache(summary, outcome.response_cache)
                    if watched:
                        running = watcher.poll()
                        elapsed = time.perf_counter() - started
                        bar.update(
                            bar_task,
                            completed=min(summary.ran + running, len(todo)),
                            rate=f"{(summary.ran + running) / max(elapsed, 1e-9) * 60:.1f}/min",
                        )
        except BaseException:
            backend.stop()
            if recover is not None:
                recover()  # keep what the shards recorded before the failure
            raise
