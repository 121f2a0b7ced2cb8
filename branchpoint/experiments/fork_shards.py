"""Fork studies over local processes or Ray (`branchpoint fork --processes N`, `--executor ray`).

The same driver as a sharded run (`work_driver.drive`): the fork study's driver plans every
branch (`branch_planning.plan_study`, with their deterministic ids and seed keys), holds the run
folder's lock, records the invocation, and deals the missing branches into shards: round robin
into N local processes, or one Ray task per branch condition (its action and fork settings,
`fork_shard_name`). A shard gets its branches as data (parent record, saved state, action,
repeat, condition, the resolved spec of its condition, the fork plan), so it plans nothing and
draws exactly what a local study draws; it runs them with the fork engine
(`branch_execution.run_branch_tasks`) into its own folder `RUN_DIR/fork_shards/<shard>/` (`forks.jsonl`, `checkpoints.sqlite` with
the branches' threads, `retrieval_cache.sqlite` seeded from the run's), reading the parents'
saved states from the run's checkpoint store. The driver folds each finished shard into the run
folder exactly once (`shard_fold.ShardMerger` on `forks.jsonl`): checkpoint rows, cache rows,
then records; a killed driver's shard folders are folded by the next `fork`, whatever its
executor. With `--checkpoints postgresql://...` every shard reads and writes that one database.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchpoint.checkpoints import open_checkpointer
from branchpoint.checkpoints.boundaries import BoundaryInfo
from branchpoint.checkpoints.postgres import is_postgres_url
from branchpoint.diskspace import reporting_no_space
from branchpoint.errors import InputError
from branchpoint.experiments.branch_execution import run_branch_tasks
from branchpoint.experiments.branch_planning import BranchTask, base_condition, condition_key, condition_specs
from branchpoint.experiments.driver import folder_of, warn_unseen
from branchpoint.experiments.fork_summary import ForkSummary
from branchpoint.experiments.process_executor import ProcessBackend, check_shared_model
from branchpoint.experiments.runner import default_model_opener
from branchpoint.experiments.shard_fold import CACHE_TABLES, ShardMerger, merge_sqlite_tables
from branchpoint.experiments.shards import FORK_SHARDS_DIR, ShardResult, node_model_spec, working_directory
from branchpoint.experiments.spec import ExperimentSpec, ForkPlan
from branchpoint.experiments.store import RunStore
from branchpoint.experiments.work_driver import Backend, Shard, drive
from branchpoint.retrieval.cache import RetrievalCache
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    FORKS_FILE,
    PASSAGES_FILE,
    RETRIEVAL_CACHE_FILE,
    ExecutionRecord,
    dump_record,
)


def check_fork_executor(spec: ExperimentSpec, executor: str, processes: int, checkpoints: str | None) -> None:
    """What a sharded fork study refuses before anything is written, as `branchpoint run` does:
    Ray installed, and a PostgreSQL URL or nothing for `--checkpoints` (`--executor ray`); a
    model server the processes share (`--processes N`)."""
    if executor == "ray":
        from branchpoint.experiments.ray_executor import check_ray_checkpoints, require_ray

        require_ray()
        check_ray_checkpoints(checkpoints)
    else:
        check_shared_model(processes, {s.model.provider for s in condition_specs(spec).values()})


@dataclass
class ForkJob:
    """The fork study the shards belong to: the run folder (locked by the driver), the plan, the
    checkpoint store, the invocation their records name, and the trace file they write."""

    store: RunStore
    plan: ForkPlan
    checkpoints: str | None
    invocation: str | None
    out_file: str = FORKS_FILE


@dataclass
class ForkShardTask:
    """What one fork shard runs: these branches, into `RUN_DIR/fork_shards/<shard>`.

    Plain data (a worker process or a Ray task on another node gets it): the fork plan, the
    resolved spec of each condition the branches descend from (by condition key), and each branch
    as `branch_data` made it.
    """

    plan: dict[str, Any]
    specs: dict[str, dict[str, Any]]
    branches: list[dict[str, Any]]
    run_dir: str
    shard: str
    checkpoints: str | None
    concurrency: int
    cwd: str
    invocation: str | None = None
    out_file: str = FORKS_FILE
    #: The run's retrieval cache is copied into the shard's first (the evidence a local study gets).
    seed_cache: bool = True

    @classmethod
    def of(cls, job: ForkJob, shard: str, branches: list[BranchTask], concurrency: int) -> ForkShardTask:
        """The task of one shard of `job`'s study."""
        specs = {_spec_key(b): b.spec.model_dump(mode="json") for b in branches}
        return cls(
            job.plan.model_dump(mode="json"),
            specs,
            [branch_data(b) for b in branches],
            str(job.store.run_dir.resolve()),
            shard,
            job.checkpoints,
            concurrency,
            os.getcwd(),
            job.invocation,
            job.out_file,
        )


def _spec_key(task: BranchTask) -> str:
    return condition_key(base_condition(task.parent.condition))


def branch_data(task: BranchTask) -> dict[str, Any]:
    """A branch as plain data: everything its execution id, seed key and first request follow from."""
    return {
        "parent": dump_record(task.parent),
        "boundary": task.boundary.model_dump(mode="json"),
        "action": task.action,
        "repeat": task.repeat,
        "execution_id": task.execution_id,
        "condition": task.condition,
        "spec": _spec_key(task),
    }


def branch_tasks_of(task: ForkShardTask) -> list[BranchTask]:
    """The shard's branches, as the driver planned them (this machine's model URL, if set: see
    `shards.node_model_spec`; it changes no id or seed)."""
    specs = {k: node_model_spec(ExperimentSpec.model_validate(v)) for k, v in task.specs.items()}
    return [
        BranchTask(
            parent=ExecutionRecord.model_validate_json(b["parent"]),
            boundary=BoundaryInfo.model_validate(b["boundary"]),
            action=b["action"],
            repeat=int(b["repeat"]),
            spec=specs[b["spec"]],
            execution_id=b["execution_id"],
            condition=b["condition"],
        )
        for b in task.branches
    ]


def fork_shard_name(task: BranchTask) -> str:
    """The stable name of a branch condition's Ray shard (its action and fork settings included)."""
    return "cond-" + hashlib.sha256(condition_key(task.condition).encode()).hexdigest()[:12]


def _seed_cache(run_dir: Path, shard_dir: Path) -> None:
    """Copy the run's retrieval cache into the shard's (where this machine sees it), so a branch
    gets the evidence a branch of a local study gets from the run's cache."""
    source = run_dir / RETRIEVAL_CACHE_FILE
    if source.is_file():
        target = shard_dir / RETRIEVAL_CACHE_FILE
        RetrievalCache(target).close()  # its tables, made by the code that owns them
        merge_sqlite_tables(target, source, CACHE_TABLES, "IGNORE")


def run_fork_shard(task: ForkShardTask) -> ShardResult:
    """Run one fork shard (in a worker process or a Ray task) with the fork engine; return its records.

    Branch checkpoints go to the shard's own SQLite file (or the PostgreSQL store); the parents'
    saved states are read from the run's store. The shard skips the branches its folder already
    holds as final; its records for the given ids are all returned, so a driver that cannot see
    this machine's files still receives them.
    """
    started = time.perf_counter()
    with working_directory(task.cwd):
        plan = ForkPlan.model_validate({**task.plan, "concurrency": task.concurrency})
        branches = branch_tasks_of(task)
        run_dir = Path(task.run_dir)
        shard_dir = run_dir / FORK_SHARDS_DIR / task.shard
        with reporting_no_space(shard_dir):
            shard_dir.mkdir(parents=True, exist_ok=True)
        store = RunStore(shard_dir)
        store.invocation_id = task.invocation  # the driver's invocation: its line names this study
        store.repair_torn_tail(task.out_file)
        store.repair_torn_tail(PASSAGES_FILE)
        done = {r.execution_id for r in store.iter_records(task.out_file) if r.status != "incomplete"}
        todo = [b for b in branches if b.execution_id not in done]
        summary = ForkSummary(run_dir=shard_dir)
        if todo:
            if task.seed_cache:
                _seed_cache(run_dir, shard_dir)
            _run_branches(todo, task, store, plan, summary)
        wanted = {b.execution_id for b in branches}
        lines = [dump_record(r) for r in store.iter_records(task.out_file) if r.execution_id in wanted]
    return ShardResult(task.shard, socket.gethostname(), summary.ran, lines, time.perf_counter() - started)


def _run_branches(todo: list[BranchTask], task: ForkShardTask, store: RunStore, plan: ForkPlan, summary: Any) -> None:
    """Open the shard's checkpoint store and the run's (for the parents) and run the branches."""
    label = f"fork shard {task.shard}"
    with reporting_no_space(store.run_dir):
        if task.checkpoints is not None and is_postgres_url(task.checkpoints):
            with open_checkpointer(task.checkpoints) as saver:  # parents and branches: one database
                run_branch_tasks(
                    todo, store, saver, plan, summary, default_model_opener, False, label, out_file=task.out_file
                )
            return
        run_db = Path(task.run_dir) / CHECKPOINTS_FILE
        if not run_db.is_file():
            raise InputError(
                f"{run_db}: not found on {socket.gethostname()}; a fork shard reads its parents' saved states "
                "from the run's checkpoint store (give every node the run folder at the same path, or use "
                "--checkpoints postgresql://...)"
            )
        with (
            open_checkpointer(run_db) as parents,
            open_checkpointer(store.run_dir / CHECKPOINTS_FILE) as saver,
        ):
            run_branch_tasks(
                todo,
                store,
                saver,
                plan,
                summary,
                default_model_opener,
                False,
                label,
                out_file=task.out_file,
                parents_saver=parents,
            )


def fork_backend(job: ForkJob, executor: str, ray_address: str | None, processes: int) -> Backend[BranchTask]:
    """The backend of a sharded fork study: `processes` local processes, or Ray tasks by branch condition."""
    root = job.store.run_dir / FORK_SHARDS_DIR
    concurrency = job.plan.concurrency

    def task_of(shard: Shard[BranchTask], each: int) -> ForkShardTask:
        return ForkShardTask.of(job, shard.name, shard.items, each)

    if executor == "ray":
        from branchpoint.experiments.ray_executor import RayBackend, condition_label

        return RayBackend(
            root,
            concurrency,
            ray_address,
            None,
            key=fork_shard_name,
            where=lambda b: condition_label(b.condition),
            task_of=task_of,
            worker=run_fork_shard,
            trace=job.out_file,
        )
    return ProcessBackend(root, processes, concurrency, task_of, run_fork_shard, trace=job.out_file)


def run_fork_shards(
    todo: list[BranchTask],
    job: ForkJob,
    merger: ShardMerger,
    summary: Any,
    executor: str,
    ray_address: str | None,
    processes: int,
    progress: bool,
    label: str,
    started: float,
) -> None:
    """Run the missing branches on the sharded backend and fold each finished shard into the run
    folder (the driver holds its lock); a failing shard or an interrupted driver folds what the
    shards recorded before the error is raised."""
    unseen: list[str] = []
    with reporting_no_space(job.store.run_dir):
        drive(
            todo,
            fork_backend(job, executor, ray_address, processes),
            summary,
            fold=folder_of(merger, unseen),
            recover=lambda: merger.recover(strict=False),
            progress=progress,
            label=label,
            started=started,
        )
    warn_unseen(unseen)


__all__ = [
    "ForkJob",
    "ForkShardTask",
    "branch_data",
    "branch_tasks_of",
    "check_fork_executor",
    "fork_backend",
    "fork_shard_name",
    "run_fork_shard",
    "run_fork_shards",
]
