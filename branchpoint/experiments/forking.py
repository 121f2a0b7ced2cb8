"""Fork studies on a run directory: branch x repeat continuations from saved states.

For each recorded execution, each selected legal boundary, each legal action and each repeat,
one branch runs on its own checkpoint thread seeded from the checkpoint (see `branchpoint.checkpoints.fork`)
and is appended to `RUN_DIR/forks.jsonl` as an `ExecutionRecord` with `parent`, `branch` and
`repeat`. Branches run concurrently, in this process or, sharded by the run's driver, over
local processes or Ray tasks (`fork_shards`: the same branches and records); reruns skip
branches already recorded. Retrieval goes through the run's persistent cache, so repeats share
evidence exactly.

`--minimal-search` forks THINK at every `after_search_t` (t < k) of each correct execution with
k searches, and records the smallest t whose continuation is still correct in
`RUN_DIR/minimal_search.jsonl`: the over-search % from real counterfactuals.

Branches are independent draws (the plan's temperature / top-p, one recorded seed per branch).
A branch is an execution too: selected by id (`executions`, `checkpoints`), its own saved states
fork again (forks of forks; `parent` chains lead back to the original execution). Replay
(`replay_run`) is the same machinery with no directive: the policy decides again from the saved
state, on new threads recorded in `RUN_DIR/replays.jsonl`.

This module opens the run and drives a study; a branch itself runs in `branch_execution`, the
branches are planned in `branch_planning` and the minimal-search study is `minimal_search`.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

from branchpoint.checkpoints import list_boundaries, open_checkpointer
from branchpoint.checkpoints.values import state_reader
from branchpoint.dbfiles import check_run_files
from branchpoint.diskspace import reporting_no_space
from branchpoint.errors import InputError
from branchpoint.experiments.branch_execution import run_branch_tasks
from branchpoint.experiments.branch_planning import (
    BranchTask,
    base_condition,
    branch_tasks,
    condition_key,
    condition_specs,
    fork_records,
    parent_records,
    plan_study,
    select_checkpoints,
)
from branchpoint.experiments.executors import check_executor_options
from branchpoint.experiments.fork_shards import ForkJob, check_fork_executor, run_fork_shards
from branchpoint.experiments.fork_summary import ForkSummary
from branchpoint.experiments.invocations import begin_invocation
from branchpoint.experiments.minimal_search import minimal_searches
from branchpoint.experiments.runner import ModelOpener, default_model_opener
from branchpoint.experiments.shard_fold import ShardMerger
from branchpoint.experiments.shards import FORK_SHARDS_DIR
from branchpoint.experiments.spec import ExperimentSpec, ForkPlan, load_spec
from branchpoint.experiments.store import RunStore, run_lock
from branchpoint.experiments.work_driver import InProcess, ShardOutcome, drive, missing
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, MINIMAL_SEARCH_FILE, REPLAYS_FILE, SPEC_FILE


def _open_run(
    run_dir: str | Path, checkpoints: str | None, response_cache: str | Literal[False] | None = None
) -> tuple[RunStore, ExperimentSpec]:
    store = RunStore(run_dir)
    if not (store.run_dir / SPEC_FILE).is_file() or not store.executions_path.is_file():
        raise InputError(f"{store.run_dir}: not a run directory (expected {SPEC_FILE} and {EXECUTIONS_FILE})")
    check_run_files(store.run_dir)
    store.check_saved_states(checkpoints, (EXECUTIONS_FILE, FORKS_FILE))
    if checkpoints is None and not store.checkpoints_path.is_file():
        raise InputError(f"{store.checkpoints_path}: not found (the run has no checkpoints to fork)")
    spec = load_spec(store.run_dir / SPEC_FILE, recorded=True).with_response_cache(response_cache)
    for resolved in condition_specs(spec).values():  # the models branches call: before any write
        resolved.model.check_ready()
    return store, spec


def missing_branches(tasks: list[BranchTask], store: RunStore, summary: ForkSummary, out_file: str) -> list[BranchTask]:
    """The planned branches (or replays) not yet recorded as final in `out_file`, after cutting a
    torn last line (a study killed mid-append: that branch is redone); counts them into `summary`."""
    summary.planned = len(tasks)
    store.repair_torn_tail(out_file)
    done = {r.execution_id for r in fork_records(store.run_dir, out_file) if r.status != "incomplete"}
    todo = missing(tasks, done, lambda t: t.execution_id)
    summary.skipped_done = len(tasks) - len(todo)
    return todo


def _begin(store: RunStore, out_file: str, todo: list[BranchTask]) -> str | None:
    """Record this invocation's provenance before its first write (see `experiments.invocations`)."""
    if not todo:
        return None
    command = "replay" if out_file == REPLAYS_FILE else "fork"
    return begin_invocation(store, out_file, command, {id(t.spec): t.spec for t in todo}.values())


def _run_here(
    todo: list[BranchTask],
    store: RunStore,
    saver: Any,
    plan: ForkPlan,
    summary: ForkSummary,
    model_opener: ModelOpener,
    progress: bool,
    label: str,
    out_file: str,
    log_requests: bool,
) -> None:
    """Run the missing branches (or replays) with the shared driver as one shard in this process
    (`run_branch_tasks`, into the run folder, which the caller has locked)."""

    def run_here(part: list[BranchTask]) -> ShardOutcome:
        ran = ForkSummary(run_dir=store.run_dir)
        run_branch_tasks(
            part, store, saver, plan, ran, model_opener, progress, label, out_file=out_file, log_requests=log_requests
        )
        return ShardOutcome(ran=ran.ran, statuses=ran.statuses, response_cache=ran.response_cache)

    with reporting_no_space(store.run_dir):  # a checkpoint, cache or record write on a full disk
        drive(todo, InProcess(run_here), summary, progress=progress, label=label)


def fork_run(
    run_dir: str | Path,
    plan: ForkPlan,
    *,
    progress: bool = True,
    model_opener: ModelOpener = default_model_opener,
    checkpoints: str | None = None,
    log_requests: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
    processes: int = 1,
    response_cache: str | Literal[False] | None = None,
) -> ForkSummary:
    """Run a fork study on a run directory (and, with `minimal_search`, the minimal-search study).

    `plan.executions` / `plan.checkpoints` may name fork branches too (forks of forks).
    `log_requests` appends every request body to RUN_DIR/requests.jsonl. The branches run in
    this process, over `processes` local processes, or as Ray tasks (`executor="ray"`), as for
    `branchpoint run` (see `fork_shards`): the same branches, seeds and records either way. Shard
    folders a killed sharded study left (`RUN_DIR/fork_shards/*`) are folded first, whatever
    executor runs now. `response_cache` (`--cache DIR`, False: `--no-cache`) overrides the run
    spec's `model.response_cache`.
    """
    plan.check()
    check_executor_options(executor, ray_address, processes, log_requests)
    sharded = executor == "ray" or processes > 1
    started = time.perf_counter()
    store, spec = _open_run(run_dir, checkpoints, response_cache)
    if sharded:
        check_fork_executor(spec, executor, processes, checkpoints)  # before anything is written
    summary = ForkSummary(run_dir=store.run_dir, seed=plan.seed, repeats=plan.repeats)
    label = f"fork {spec.name}"
    with ExitStack() as stack:
        stack.enter_context(run_lock(store.run_dir, "fork"))  # one writer per run folder
        merger: ShardMerger | None = None
        if sharded or ShardMerger.shard_dirs_of(store, FORK_SHARDS_DIR):
            merger = ShardMerger(store, checkpoints, FORKS_FILE, FORK_SHARDS_DIR)
            with reporting_no_space(store.run_dir):
                merger.recover()  # the branches a killed sharded study's shards recorded
        parents = parent_records(store, plan.executions, include_branches=plan.checkpoints is not None)
        target = store.checkpoint_target(checkpoints)
        with open_checkpointer(target) as saver:
            tasks, skipped = plan_study(saver, store, spec, plan, parents)
            summary.illegal_skipped = dict(skipped)
            todo = missing_branches(tasks, store, summary, FORKS_FILE)
            invocation = _begin(store, FORKS_FILE, todo)
            if not sharded:
                _run_here(todo, store, saver, plan, summary, model_opener, progress, label, FORKS_FILE, log_requests)
        if sharded and todo:  # no saver of the driver's is open while the shards run
            assert merger is not None
            job = ForkJob(store, plan, checkpoints, invocation, FORKS_FILE)
            run_fork_shards(todo, job, merger, summary, executor, ray_address, processes, progress, label, started)
        if plan.minimal_search:
            with open_checkpointer(target) as saver:
                summary.minimal = minimal_searches(parents, fork_records(store.run_dir), saver, plan.judge)
            path = store.run_dir / MINIMAL_SEARCH_FILE
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text("".join(json.dumps(m) + "\n" for m in summary.minimal), encoding="utf-8")
            tmp.replace(path)
    summary.wall_s = time.perf_counter() - started
    return summary


def replay_run(
    run_dir: str | Path,
    execution: str,
    plan: ForkPlan,
    *,
    progress: bool = True,
    model_opener: ModelOpener = default_model_opener,
    checkpoints: str | None = None,
    log_requests: bool = False,
    response_cache: str | Literal[False] | None = None,
) -> ForkSummary:
    """Replay one execution (or branch) from a saved state: the policy decides again, with no
    directive, `plan.repeats` times, each on its own new thread, recorded in RUN_DIR/replays.jsonl
    (kind `replay`, `parent` = the saved state). The original thread is never written to.

    The saved state is `plan.checkpoints[0]` (an id or unique prefix) or, by default, the
    execution's `initial` boundary. Reruns skip replays already recorded. `response_cache` as
    for `fork_run`.
    """
    plan.check()
    started = time.perf_counter()
    store, spec = _open_run(run_dir, checkpoints, response_cache)
    parents = parent_records(store, [execution])
    summary = ForkSummary(run_dir=store.run_dir, seed=plan.seed, repeats=plan.repeats)
    with ExitStack() as stack:
        stack.enter_context(run_lock(store.run_dir, "replay"))  # one writer per run folder
        saver = stack.enter_context(open_checkpointer(store.checkpoint_target(checkpoints)))
        parent = parents[0]
        resolved = condition_specs(spec).get(condition_key(base_condition(parent.condition)))
        if resolved is None:
            raise InputError(
                f"execution {parent.execution_id}: its condition {parent.condition} is not in the run's spec"
            )
        bounds = list_boundaries(saver, parent.execution_id, state_reader(saver))
        chosen = select_checkpoints(bounds, plan.checkpoints) if plan.checkpoints else bounds[:1]
        if len(chosen) != 1:
            what = "no" if not chosen else str(len(chosen))
            raise InputError(
                f"--checkpoint {(plan.checkpoints or [''])[0]}: {what} saved states of execution "
                f"{parent.execution_id[:12]} match (see `branchpoint checkpoints ls RUN_DIR --execution {execution} --wide`)"
            )
        tasks = branch_tasks(parent, chosen[0], None, plan, resolved)
        todo = missing_branches(tasks, store, summary, REPLAYS_FILE)
        _begin(store, REPLAYS_FILE, todo)
        label = f"replay {spec.name}"
        _run_here(todo, store, saver, plan, summary, model_opener, progress, label, REPLAYS_FILE, log_requests)
    summary.wall_s = time.perf_counter() - started
    return summary


__all__ = [
    "ForkPlan",
    "ForkSummary",
    "fork_run",
    "replay_run",
]
