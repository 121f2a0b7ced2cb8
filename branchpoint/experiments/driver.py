"""The one flow every executor of a run shares (`run_sharded`): plan -> lock the run folder ->
fold what shards of a killed run left -> missing work -> the backend's shards
(`work_driver.drive`) -> summary. The backends only say how a shard is started: `InProcess` (the
ordinary runner over the missing executions, into the run folder itself, `in_process`),
`process_executor.ProcessBackend`, `ray_executor.RayBackend`; `executors.run_spec` picks one
from the user's options.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchpoint.experiments.invocations import begin_invocation
from branchpoint.experiments.planning import PlannedExecution, plan_executions, select_questions
from branchpoint.experiments.run_checks import check_models, check_run_dir, check_sources
from branchpoint.experiments.runner import ModelOpener, RunSummary, default_model_opener, missing_work, run_planned
from branchpoint.experiments.shard_fold import ShardMerger
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.store import RunLock, RunStore, run_lock
from branchpoint.experiments.work_driver import Backend, InProcess, Shard, ShardOutcome, drive, missing
from branchpoint.traces import EXECUTIONS_FILE, ExecutionRecord

log = logging.getLogger(__name__)


@dataclass
class RunJob:
    """The run a backend's shards belong to: the spec, its locked run folder, the checkpoint
    target, and the invocation their records name once the driver has recorded it."""

    spec: ExperimentSpec
    store: RunStore
    lock: RunLock
    checkpoints: str | None
    progress: bool
    invocation: str | None = None
    #: The executions the run folder holds final records of, read once by the driver under its
    #: lock (the in-process runner takes them from here instead of reading the file again).
    finished: set[str] = field(default_factory=set)


#: Makes a run's backend once the run folder is locked.
BackendFactory = Callable[[RunJob], Backend[PlannedExecution]]


def in_process(
    concurrency: int = 1, log_requests: bool = False, model_opener: ModelOpener = default_model_opener
) -> BackendFactory:
    """The backend that runs the missing executions in this process with the ordinary runner
    (`run_planned` over the driver's plan, under the driver's lock: no shard folder)."""

    def make(job: RunJob) -> Backend[PlannedExecution]:
        def run(todo: list[PlannedExecution]) -> ShardOutcome:
            done = run_planned(
                job.spec,
                job.store.run_dir,
                todo,
                progress=job.progress,
                model_opener=model_opener,
                checkpoints=job.checkpoints,
                concurrency=concurrency,
                log_requests=log_requests,
                lock=job.lock,
                invocation_id=job.invocation,
                done=job.finished,
            )
            return ShardOutcome(ran=done.ran, statuses=dict(done.statuses), response_cache=dict(done.response_cache))

        return InProcess(run)

    return make


def run_sharded(
    spec: ExperimentSpec,
    run_dir: str | Path,
    backend: BackendFactory,
    *,
    progress: bool = True,
    checkpoints: str | None = None,
    check: Callable[[list[PlannedExecution]], None] | None = None,
) -> RunSummary:
    """Run every missing execution of `spec` into `run_dir` on `backend`; as `run_experiment`.

    Shard folders a killed run left (`RUN_DIR/shards/*`) are folded first, whatever backend made
    them; then only what is still missing is run. Nothing is written when nothing is missing.
    `check` refuses what the backend cannot run (e.g. a model each process would start itself),
    given the plan, before anything is written.
    """
    started = time.perf_counter()
    plan = plan_executions(spec, select_questions(spec))  # validates names before anything is written
    check_models(plan)
    if check is not None:
        check(plan)
    store = RunStore(run_dir)
    store.checkpoint_target(checkpoints)  # a malformed --checkpoints: refused before any write
    with run_lock(store.run_dir) as lock:  # one writer per run folder; shards write their own folders
        check_run_dir(store, spec, checkpoints)
        left = ShardMerger.shard_dirs_of(store)
        job = RunJob(spec, store, lock, checkpoints, progress)
        runner = backend(job)
        # The run's records are read once: by the merger when the driver writes (it folds
        # leftovers, or the shards it starts), else here, and handed to the in-process runner.
        merger = ShardMerger(store, checkpoints) if left or not runner.in_place else None
        done = merger.finished_ids() if merger is not None else store.finished_ids()
        todo = missing(plan, done, _key)
        if not todo and not left:
            return missing_work(plan, done, store.run_dir, started)[1]
        if merger is not None:
            check_sources(todo)  # (a shard in this process opens its sources before its first write)
            lock.committed = True
            store.create(spec.model_dump(mode="json"))
            job.invocation = begin_invocation(
                store, EXECUTIONS_FILE, "run", {id(p.spec): p.spec for p in todo}.values()
            )
            merger.recover()
            done = merger.finished_ids()
        job.finished = done
        todo, summary = missing_work(plan, done, store.run_dir, started)
        unseen: list[str] = []
        drive(
            todo,
            runner,
            summary,
            fold=folder_of(merger, unseen),
            recover=(lambda: merger.recover(strict=False)) if merger is not None else None,
            progress=progress,
            label=spec.name,
            started=started,
        )
    warn_unseen(unseen)
    summary.wall_s = time.perf_counter() - started
    return summary


def _key(planned: PlannedExecution) -> str:
    return planned.execution_id


def warn_unseen(unseen: list[str]) -> None:
    """Warn of the shards whose checkpoints the driver could not fold (their folders are on
    other machines' disks): their saved states cannot be forked from here."""
    if unseen:
        log.warning(
            "checkpoints of %d shards are not visible from this machine (%s): use a shared run "
            "folder or --checkpoints postgresql://... to fork them",
            len(unseen),
            ", ".join(unseen),
        )


def folder_of(
    merger: ShardMerger | None, unseen: list[str]
) -> Callable[[Shard[Any], ShardOutcome], list[ExecutionRecord]]:
    """Folds a finished shard's folder and returned records into the run (see `ShardMerger.fold`),
    noting in `unseen` a shard whose checkpoints this machine cannot see."""

    def fold(shard: Shard[Any], outcome: ShardOutcome) -> list[ExecutionRecord]:
        assert merger is not None and shard.folder is not None  # a shard with a folder: the driver writes
        added, found = merger.fold(shard.folder, outcome.records)
        if not found:
            unseen.append(f"{shard.name} on {outcome.node or 'another machine'}")
        return added

    return fold
