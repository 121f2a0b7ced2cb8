"""Run a spec over several local processes (`branchpoint run --processes N`).

One Python process runs LangGraph, the checkpoint writes and the client side of every request
under one GIL: about 10-15 ms of CPU per execution, so at high concurrency against a fast
server the runner, not the server, sets the pace. Here the missing executions are dealt round
robin into N parts; each part runs in its own process with the ordinary runner (concurrency
split between the processes) into its own folder `RUN_DIR/shards/local-<i>/`, exactly as a Ray
shard does (`ray_executor.run_shard`), so no two processes append to one file or share one
SQLite saver. When a process finishes, this driver folds its folder into the run folder
(checkpoint and retrieval-cache rows, then each record once; `ray_executor.ShardMerger`) and
deletes it. A killed driver takes its processes with it (Linux: parent-death signal); the next
run first folds whatever folders a killed run left, then plans only what is still missing.

The processes share the model server, so the model must be one they can all reach
(`provider: openai`, e.g. vLLM); an embedded model would start one server per process.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import os
import queue
import shutil
import signal
import threading
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from branchpoint.errors import BranchpointError, InputError
from branchpoint.experiments.ray_executor import (
    SHARDS_DIR,
    ShardMerger,
    ShardProgress,
    ShardTask,
    complete_records,
    run_shard,
)
from branchpoint.experiments.runner import (
    PlannedExecution,
    RunSummary,
    check_run_dir,
    check_sources,
    missing_work,
    plan_executions,
    progress_bar,
    select_questions,
)
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.store import RunStore, run_lock
from branchpoint.processes import die_with_parent
from branchpoint.traces import EXECUTIONS_FILE, ExecutionRecord, TraceError

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


def deal(todo: list[PlannedExecution], parts: int) -> list[list[PlannedExecution]]:
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
    plan = plan_executions(spec, select_questions(spec))  # validates names before anything is written
    providers = {p.spec.model.provider for p in plan}
    if processes > 1 and not providers <= set(SHARED_PROVIDERS):
        raise InputError(
            f"--processes {processes} needs a model server the processes share (model.provider: openai, "
            f"e.g. vLLM); this spec uses {', '.join(sorted(providers - set(SHARED_PROVIDERS)))}, which would "
            "start one server per process. Run it with --processes 1."
        )
    started = time.perf_counter()
    store = RunStore(run_dir)
    store.checkpoint_target(checkpoints)  # a malformed --checkpoints: refused before any write
    with run_lock(store.run_dir) as lock:  # one writer per run folder; the workers run under it
        check_run_dir(store, spec, checkpoints)
        left = [f for f in ShardMerger.shard_dirs_of(store) if f.name.startswith(SHARD_PREFIX)]
        done = store.finished_ids()
        missing = [p for p in plan if p.execution_id not in done]
        if not missing and not left:
            return missing_work(plan, done, store.run_dir, started)[1]
        check_sources(missing)
        lock.committed = True
        store.create(spec.model_dump(mode="json"))
        return _run_locked(spec, store, plan, processes, progress, checkpoints, concurrency, started)


def _run_locked(
    spec: ExperimentSpec,
    store: RunStore,
    plan: list[PlannedExecution],
    processes: int,
    progress: bool,
    checkpoints: str | None,
    concurrency: int,
    started: float,
) -> RunSummary:
    """`run_experiment_processes` once the run folder is locked and its spec written."""
    merger = ShardMerger(store, checkpoints)
    for folder in merger.shard_dirs():  # what a killed run left: fold it, then drop it
        if folder.name.startswith(SHARD_PREFIX):
            _fold(merger, folder)
    todo, summary = missing_work(plan, merger.finished_ids(), store.run_dir, started)
    if not todo:
        return summary

    parts = deal(todo, min(processes, len(todo)))
    each = -(-concurrency // len(parts))
    spec_data = spec.model_dump(mode="json")
    run_abs = str(store.run_dir.resolve())
    tasks = {
        f"{SHARD_PREFIX}{i}": ShardTask(
            spec_data, run_abs, f"{SHARD_PREFIX}{i}", [p.execution_id for p in part], checkpoints, each, os.getcwd()
        )
        for i, part in enumerate(parts)
    }
    ctx = _context()
    reports: multiprocessing.queues.Queue = ctx.Queue()
    workers: dict[str, BaseProcess] = {
        name: ctx.Process(target=_run_part, args=(task, reports), name=f"branchpoint-{name}", daemon=True)
        for name, task in tasks.items()
    }
    for proc in workers.values():  # before any thread of ours starts (fork copies only this one)
        proc.start()
    try:
        with progress_bar(progress) as bar:
            bar_task = bar.add_task(f"{spec.name} ({len(parts)} processes)", total=len(todo), rate="")
            watcher = ShardProgress()
            for name in tasks:
                watcher.watch(name, store.run_dir / SHARDS_DIR / name / EXECUTIONS_FILE)
            waiting = set(tasks)
            while waiting:
                for name, error in _reports(reports, workers, waiting):
                    waiting.discard(name)
                    if error is not None:
                        raise error if isinstance(error, BaseException) else _error(name, error)
                    folder = store.run_dir / SHARDS_DIR / name
                    watcher.forget(name, folder / EXECUTIONS_FILE)
                    workers[name].join()
                    for rec in _fold(merger, folder):
                        summary.ran += 1
                        summary.statuses[rec.status] = summary.statuses.get(rec.status, 0) + 1
                running = watcher.poll()
                elapsed = time.perf_counter() - started
                bar.update(
                    bar_task,
                    completed=min(summary.ran + running, len(todo)),
                    rate=f"{(summary.ran + running) / max(elapsed, 1e-9) * 60:.1f}/min",
                )
    finally:
        for proc in workers.values():  # a failure or an interrupt: stop the others now
            if proc.is_alive():
                proc.kill()
            proc.join()
        for folder in merger.shard_dirs():  # keep what the parts recorded before a failure
            if folder.name.startswith(SHARD_PREFIX):
                _fold(merger, folder)
    summary.wall_s = time.perf_counter() - started
    return summary


#: Errors a worker reports by name, raised again as themselves in the driver (clear one-line
#: messages); anything else is raised as a RuntimeError naming its type.
_KNOWN_ERRORS: dict[str, type[BaseException]] = {e.__name__: e for e in (InputError, TraceError, BranchpointError)}


def _run_part(task: ShardTask, reports: multiprocessing.queues.Queue) -> None:
    """A worker process: run one part with the ordinary runner; report (name, None) or
    (name, (error type, message)) — plain strings, whatever the error holds."""
    _die_with_parent()
    try:
        run_shard(task)
    except BaseException as exc:  # sent to the driver, which raises it
        reports.put((task.shard, (type(exc).__name__, str(exc))))
    else:
        reports.put((task.shard, None))


def _error(name: str, report: tuple[str, str]) -> BaseException:
    kind, message = report
    if kind in _KNOWN_ERRORS:
        return _KNOWN_ERRORS[kind](message)
    return RuntimeError(f"part {name}: {kind}: {message}")


def _reports(
    reports: multiprocessing.queues.Queue, workers: dict[str, BaseProcess], waiting: set[str]
) -> list[tuple[str, Any]]:
    """The reports that arrive within half a second; a worker that died without one is an error."""
    out = []
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
            out.append((name, RuntimeError(f"the process running part {name} died (exit code {proc.exitcode})")))
    return out


def _fold(merger: ShardMerger, folder: Path) -> list[ExecutionRecord]:
    """Fold a part's folder into the run folder, then delete it; returns the records added."""
    merger.merge_databases(folder)
    added = merger.merge_records(complete_records(folder / EXECUTIONS_FILE))
    shutil.rmtree(folder)
    return added
