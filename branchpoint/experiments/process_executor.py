"""Run a spec over several local processes (`branchpoint run --processes N`): the process backend.

One Python process runs LangGraph, the checkpoint writes and the client side of every request
under one GIL: about 10-15 ms of CPU per execution, so at high concurrency against a fast
server the runner, not the server, sets the pace. Here the missing executions are dealt round
robin into N shards; each shard runs in its own process with the ordinary runner (concurrency
split between the processes) into its own folder `RUN_DIR/shards/local-<i>/` (`shards.run_shard`),
so no two processes append to one file or share one SQLite saver. The shared driver
(`driver.run_sharded`, `work_driver.drive`) folds each finished shard into the run folder and
deletes its folder. A killed driver takes its processes with it (Linux: parent-death signal);
the next run first folds whatever folders a killed run left, then plans only what is still missing.

The processes share the model server, so the model must be one they can all reach
(`provider: openai`, e.g. vLLM); an embedded model would start one server per process.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import queue
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Generic, TypeVar

from branchpoint.errors import BranchpointError, InputError
from branchpoint.experiments.driver import RunJob, run_sharded
from branchpoint.experiments.planning import PlannedExecution
from branchpoint.experiments.runner import RunSummary
from branchpoint.experiments.shards import SHARDS_DIR, ShardTask, run_shard
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.work_driver import Shard, ShardOutcome
from branchpoint.processes import die_with_parent
from branchpoint.traces import EXECUTIONS_FILE, TraceError

W = TypeVar("W")
#: What a worker process puts on the reports queue: (shard name, None) when its shard is done, or
#: (shard name, (error type, message)) when it failed.
Report = tuple[str, tuple[str, str] | None]

#: Model providers whose server the processes can share.
SHARED_PROVIDERS = ("openai", "scripted")
#: Folder-name prefix of the local shards (`RUN_DIR/shards/local-<i>`).
SHARD_PREFIX = "local-"


def _die_with_parent() -> None:
    """In a worker: on Linux, receive SIGKILL when the driver dies (even by SIGKILL)."""
    die_with_parent(signal.SIGKILL)  # not Linux: workers finish their part and exit


def _context() -> multiprocessing.context.ForkContext | multiprocessing.context.SpawnContext:
    """`fork` where it is safe (this process has one thread: nothing held by another thread can
    be copied locked), which starts workers in milliseconds; else `spawn`."""
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def deal(todo: list[W], parts: int) -> list[list[W]]:
    """Round-robin parts of the plan (conditions and questions mixed into every part)."""
    return [p for p in (todo[i::parts] for i in range(parts)) if p]


def run_experiment_processes(
    spec: ExperimentSpec,
    run_dir: str | Path,
    *,
    processes: int,
    progress: bool = True,
    checkpoints: str | None = None,
    concurrency: int = 1,
) -> RunSummary:
    """Run every missing execution of a spec in `processes` local processes; as `run_experiment`.

    `concurrency` is the total: each process runs its share (rounded up) at once.
    """
    if processes < 1:
        raise InputError(f"--processes must be at least 1, got {processes}")
    if concurrency < 1:
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")

    def check(plan: list[PlannedExecution]) -> None:
        check_shared_model(processes, {p.spec.model.provider for p in plan})

    def backend(job: RunJob) -> ProcessBackend[PlannedExecution]:
        def task_of(shard: Shard[PlannedExecution], each: int) -> ShardTask:
            ids = [p.execution_id for p in shard.items]
            return ShardTask.of(job.spec, job.store.run_dir, shard.name, ids, job.checkpoints, each, job.invocation)

        return ProcessBackend(job.store.run_dir / SHARDS_DIR, processes, concurrency, task_of, run_shard)

    return run_sharded(spec, run_dir, backend, progress=progress, checkpoints=checkpoints, check=check)


def check_shared_model(processes: int, providers: set[str]) -> None:
    """Refuse `--processes N` (N > 1) for a model each process would start itself (an embedded
    or simulated server per process): the processes must share one model server."""
    if processes > 1 and not providers <= set(SHARED_PROVIDERS):
        raise InputError(
            f"--processes {processes} needs a model server the processes share (model.provider: openai, "
            f"e.g. vLLM); this spec uses {', '.join(sorted(providers - set(SHARED_PROVIDERS)))}, which would "
            "start one server per process. Run it with --processes 1."
        )


class ProcessBackend(Generic[W]):
    """Each shard a local process running `worker(task)` into `root/local-<i>` (a run's shards:
    the ordinary runner, `shards.run_shard`; a fork study's: `fork_shards.run_fork_shard`).

    `task_of(shard, concurrency)` is the picklable task a shard's process gets. Its future is set
    by a watcher thread (started after every process is forked) when the process reports, or dies
    without a report.
    """

    in_place = False

    def __init__(
        self,
        root: Path,
        processes: int,
        concurrency: int,
        task_of: Callable[[Shard[W], int], Any],
        worker: Callable[[Any], Any],
        trace: str = EXECUTIONS_FILE,
    ) -> None:
        self.root = root
        self.processes = processes
        self.concurrency = concurrency
        self.task_of = task_of
        self.worker = worker
        self.trace = trace
        self.description = f"{processes} processes"
        self._workers: dict[str, BaseProcess] = {}
        self._stopped = threading.Event()

    def shards(self, todo: list[W]) -> list[Shard[W]]:
        """The missing work dealt round robin into at most `processes` shards."""
        parts = deal(todo, min(self.processes, len(todo)))
        self.description = f"{len(parts)} processes"
        names = [f"{SHARD_PREFIX}{i}" for i in range(len(parts))]
        return [
            Shard(name, part, where=f"{len(part)} {_what(self.trace)}", folder=self.root / name, trace=self.trace)
            for name, part in zip(names, parts, strict=True)
        ]

    @contextmanager
    def session(self) -> Iterator[None]:
        """The processes: whatever still runs when the driver leaves (it failed) is killed."""
        try:
            yield
        finally:
            self.stop()

    def submit_all(self, shards: list[Shard[W]]) -> dict[Future[ShardOutcome], Shard[W]]:
        """Fork (or spawn) one process per shard, then start the thread that watches them."""
        each = -(-self.concurrency // len(shards))
        ctx = _context()
        reports: multiprocessing.queues.Queue[Report] = ctx.Queue()
        futures: dict[str, Future[ShardOutcome]] = {}
        for shard in shards:
            task = self.task_of(shard, each)
            proc = ctx.Process(
                target=_run_part, args=(self.worker, task, reports), name=f"branchpoint-{shard.name}", daemon=True
            )
            self._workers[shard.name] = proc
            futures[shard.name] = Future()
        for worker in self._workers.values():  # before any thread of ours starts (fork copies only this one)
            worker.start()
        threading.Thread(target=self._watch, args=(reports, futures), name="branchpoint-shards", daemon=True).start()
        return {futures[s.name]: s for s in shards}

    def _watch(self, reports: multiprocessing.queues.Queue[Report], futures: dict[str, Future[ShardOutcome]]) -> None:
        """Set each shard's future from its report (its process joined first: its files are closed)."""
        waiting = set(futures)
        while waiting and not self._stopped.is_set():
            for name, error in _reports(reports, self._workers, waiting):
                waiting.discard(name)
                if error is None:
                    self._workers[name].join()
                    futures[name].set_result(ShardOutcome(node=socket.gethostname()))
                else:
                    futures[name].set_exception(error if isinstance(error, BaseException) else _error(name, error))

    def stop(self) -> None:
        """Kill the processes still running and wait for every one to be gone."""
        self._stopped.set()
        for proc in self._workers.values():
            if proc.pid is None:  # never started (the start of an earlier one failed)
                continue
            if proc.is_alive():
                proc.kill()
            proc.join()


#: Errors a worker reports by name, raised again as themselves in the driver (clear one-line
#: messages); anything else is raised as a RuntimeError naming its type.
_KNOWN_ERRORS: dict[str, type[BaseException]] = {e.__name__: e for e in (InputError, TraceError, BranchpointError)}


def _run_part(worker: Callable[[Any], Any], task: Any, reports: multiprocessing.queues.Queue[Report]) -> None:
    """A worker process: run one shard (`worker(task)`, e.g. the ordinary runner); report
    (name, None) or (name, (error type, message)) — plain strings, whatever the error holds."""
    _die_with_parent()
    try:
        worker(task)
    except BaseException as exc:  # sent to the driver, which raises it
        reports.put((task.shard, (type(exc).__name__, str(exc))))
    else:
        reports.put((task.shard, None))


def _what(trace: str) -> str:
    """What a shard's items are, for its error messages."""
    return "executions" if trace == EXECUTIONS_FILE else "branches"


def _error(name: str, report: tuple[str, str]) -> BaseException:
    kind, message = report
    if kind in _KNOWN_ERRORS:
        return _KNOWN_ERRORS[kind](message)
    return RuntimeError(f"shard {name}: {kind}: {message}")


def _reports(
    reports: multiprocessing.queues.Queue[Report], workers: dict[str, BaseProcess], waiting: set[str]
) -> list[tuple[str, Any]]:
    """The reports that arrive within half a second; a worker that died without one is an error."""
    out: list[tuple[str, Any]] = []
    try:
        out.append(reports.get(timeout=0.5))
        while True:
            out.append(reports.get_nowait())
    except queue.Empty:
        pass
    reported = {name for name, _ in out}
    for name in sorted(waiting - reported):
        proc = workers[name]
        if not proc.is_alive() and proc.exitcode not in (0, None):
            out.append((name, RuntimeError(f"the process running shard {name} died (exit code {proc.exitcode})")))
    return out
