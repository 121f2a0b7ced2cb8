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
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from branchpoint.agents import (
    AgentContext,
    build_graph,
    recursion_limit,
    resolve_policy,
)
from branchpoint.checkpoints import list_boundaries, open_checkpointer
from branchpoint.checkpoints.fork import branch_input, prefix_of, transcript_from_steps
from branchpoint.checkpoints.postgres import async_postgres_checkpointer
from branchpoint.checkpoints.values import acheckpoint_values, state_reader
from branchpoint.dbfiles import check_run_files
from branchpoint.diskspace import reporting_no_space
from branchpoint.errors import InputError
from branchpoint.evaluation.fork_settings import with_fork_settings
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import is_correct
from branchpoint.experiments.branch_planning import (
    REPLAY_KIND,
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
from branchpoint.experiments.driver import check_executor_options
from branchpoint.experiments.execution import execute, run_blocking_core, stream_recording
from branchpoint.experiments.invocations import begin_invocation
from branchpoint.experiments.runner import (
    ModelOpener,
    SourcePool,
    agent_context,
    clear_thread,
    default_model_opener,
    incomplete_record,
    record_from_state,
    simulated_marker,
    with_request_log,
)
from branchpoint.experiments.shard_fold import ShardMerger
from branchpoint.experiments.shards import FORK_SHARDS_DIR
from branchpoint.experiments.spec import ExperimentSpec, ForkPlan, load_spec
from branchpoint.experiments.store import RunStore, run_lock
from branchpoint.experiments.tallies import tally_records
from branchpoint.experiments.work_driver import InProcess, ShardOutcome, drive, missing
from branchpoint.models import ModelClient, TransportError
from branchpoint.models.request_log import current_execution
from branchpoint.models.sent_sampling import SentSampling
from branchpoint.traces import (
    BOUNDARY_AFTER_SEARCH,
    BOUNDARY_INITIAL,
    EXECUTIONS_FILE,
    FORKS_FILE,
    MINIMAL_SEARCH_FILE,
    REPLAYS_FILE,
    RETRIEVAL_CACHE_FILE,
    SPEC_FILE,
    ExecutionRecord,
)


@dataclass
class ForkSummary:
    """What a fork study did."""

    run_dir: Path
    planned: int = 0
    skipped_done: int = 0
    ran: int = 0
    illegal_skipped: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    minimal: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0  # the plan's seed base (the draws a rerun with it finds recorded)
    repeats: int = 0
    #: Model calls the response cache answered (`hits`) or sent (`misses`); empty without one.
    response_cache: dict[str, int] = field(default_factory=dict)

    @property
    def over_search_pct(self) -> float | None:
        """Over-search % = mean searches / mean minimal searches − 1 (None without data)."""
        if not self.minimal:
            return None
        mean_k = sum(m["searches"] for m in self.minimal) / len(self.minimal)
        mean_t = sum(m["minimal_searches"] for m in self.minimal) / len(self.minimal)
        return float("inf") if mean_t == 0 else 100.0 * (mean_k / mean_t - 1.0)


def replay_input(values: dict[str, Any]) -> dict[str, Any]:
    """The input state of a replay: the checkpoint's state with an empty trace and no directive,
    so the policy decides again (a pending query is run first, as on the original path)."""
    state = {**values, "steps": [], "status": "ok", "final_answer": None, "directive": None}
    if "transcript" not in values:
        state["transcript"] = transcript_from_steps(values)
    return state


def _prefix(parent: ExecutionRecord, values: dict[str, Any]) -> dict[str, int]:
    """What was spent before the checkpoint: the parent's own steps up to it, plus (for a branch
    of a branch) what its parent had spent before it was forked."""
    own = prefix_of(values).model_dump()
    if parent.parent is not None:
        before = (parent.model_extra or {}).get("prefix") or {}
        return {k: int(v) + int(before.get(k, 0)) if k != "search_calls" else int(v) for k, v in own.items()}
    return own


async def run_branch(
    graph: Any, ctx: AgentContext, task: BranchTask, saver: Any, plan: ForkPlan, parents: Any | None = None
) -> ExecutionRecord:
    """Run one branch (or replay) on its own checkpoint thread, seeded from the parent's
    checkpoint, on the running event loop (`saver`: the graph's, used through its async API).

    `parents` is a reader graph (`checkpoints.values.state_reader`) on the store the parent's
    saved state is read from, when that is not the graph's own saver (a fork shard writes its
    branches into its own folder's store and reads its parents from the run's)."""
    reader, source = (graph, saver) if parents is None else (parents, parents.checkpointer)
    values = await acheckpoint_values(source, task.parent.execution_id, task.boundary.checkpoint_id, reader=reader)
    if task.action is None:
        state, cap = replay_input(values), task.spec.agent.search_cap
    else:
        state, cap = branch_input(
            values, task.action, search_budget=plan.search_budget, switch_source=plan.switch_source
        )
    ctx.search_cap = cap
    parent = task.parent
    identity = dict(
        execution_id=task.execution_id,
        run_id=parent.run_id,
        condition=task.condition,
        question_id=parent.question_id,
        question=parent.question,
        answerable=parent.answerable,
        category=parent.category,
        gold_answers=parent.gold_answers,
        stratum=parent.stratum,
        support_group=parent.support_group,
        parent={
            "execution_id": parent.execution_id,
            "checkpoint_id": task.boundary.checkpoint_id,
            "boundary": task.boundary.boundary,
        },
        branch=task.action,
        repeat=task.repeat,
        sampling=plan.sampling(task.seed_key),
        **({"kind": REPLAY_KIND} if task.action is None else {}),
        **simulated_marker(task.spec),
    )
    config = {"configurable": {"thread_id": task.execution_id}, "recursion_limit": recursion_limit(cap)}
    await clear_thread(saver, task.execution_id)
    start = time.perf_counter()
    try:
        final, ids = await stream_recording(graph, state, config, ctx)
    except TransportError as exc:
        return incomplete_record(identity, time.perf_counter() - start, str(exc))
    wall = time.perf_counter() - start
    record = record_from_state(final, identity, wall, ids, searches_before=int(values.get("searches", 0)), ctx=ctx)
    extra = record.model_dump()
    extra["prefix"] = _prefix(parent, values)
    extra["directive"] = state["directive"]
    return ExecutionRecord.model_validate(extra)


def as_sent(record: ExecutionRecord, sampling: dict[str, Any] | None) -> ExecutionRecord:
    """A branch record with its sampling as sent (the plan's where the client reported no
    request) and the fork settings and fingerprint that follow from it."""
    if sampling is not None:
        record.sampling = sampling
    return with_fork_settings(record)


@asynccontextmanager
async def async_saver(saver: BaseCheckpointSaver[str]) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """The study's saver for graphs on the event loop: an `AsyncPostgresSaver` on the database
    of a `PostgresSaver` (its pool's connection string); any other saver itself (the run's SQLite
    saver makes its async calls in the loop's thread, see `checkpoints.store`)."""
    if type(saver).__name__ != "PostgresSaver":
        yield saver
        return
    conninfo = getattr(getattr(saver, "conn", None), "conninfo", None)
    if not isinstance(conninfo, str):
        raise InputError("checkpoint store: the PostgreSQL saver has no connection string to run branches on")
    async with async_postgres_checkpointer(conninfo) as opened:
        yield opened


class QuestionLookup:
    """The question record a branch answers, for retrieval interventions: its supporting passage
    ids come from the spec's question file (an execution record has none), read once per file and
    only for a spec with an intervention; else the parent record's question fields."""

    def __init__(self) -> None:
        self._by_file: dict[str, dict[str, Any]] = {}

    def of(self, spec: ExperimentSpec, parent: ExecutionRecord) -> Any:
        from branchpoint.retrieval.sources.interventions import InterventionSourceSpec

        if not any(isinstance(s, InterventionSourceSpec) for s in spec.retrieval.sources.values()):
            return parent
        key = json.dumps([str(spec.questions.path), spec.questions.format, spec.questions.split], default=str)
        if key not in self._by_file:
            from branchpoint.datasets import load_questions

            try:
                loaded = load_questions(spec.questions.path, spec.questions.format, split=spec.questions.split)
            except InputError:  # the question file moved: the record's own fields
                loaded = []
            self._by_file[key] = {q.id: q for q in loaded}
        return self._by_file[key].get(parent.question_id, parent)


def _run_tasks(
    tasks: list[BranchTask],
    store: RunStore,
    saver: Any,
    plan: ForkPlan,
    summary: ForkSummary,
    model_opener: ModelOpener,
    progress: bool,
    label: str,
    *,
    out_file: str = FORKS_FILE,
    log_requests: bool = False,
    parents_saver: Any | None = None,
) -> None:
    """Run the branches on the asynchronous execution core (`experiments.execution`), one event
    loop for the study; each branch record is appended durably before it counts.

    `parents_saver`: where the parents' saved states are read, when not from `saver` (a fork
    shard, see `fork_shards`)."""
    pool = SourcePool(progress=False, cache_path=store.run_dir / RETRIEVAL_CACHE_FILE)
    questions = QuestionLookup()
    graphs: dict[str, Any] = {}
    sent = SentSampling()  # each branch's sampling as sent (its record's `sampling`)
    with (
        ExitStack() as stack,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            disable=not progress,
        ) as bar,
    ):
        stack.callback(pool.close)
        bar_task = bar.add_task(label, total=len(tasks))

        def count(rec: ExecutionRecord) -> None:  # on the loop, after the writer stored it
            tally_records(summary, [rec])
            bar.update(bar_task, advance=1)

        @contextmanager
        def open_client(task: BranchTask, group: ExitStack) -> Iterator[ModelClient]:
            with model_opener(task.spec, store.run_dir) as opened:
                yield with_request_log(opened, store.run_dir, log_requests, group, sent=sent)

        parents = state_reader(parents_saver) if parents_saver is not None else None

        async def main() -> None:
            async with async_saver(saver) as graph_saver:

                def prepare(t: BranchTask) -> None:  # open sources and compile graphs before any runs
                    pool.search_tool(t.spec)
                    if t.spec.agent.policy not in graphs:
                        # a module:function policy imports from the working directory (see README)
                        graphs[t.spec.agent.policy] = build_graph(resolve_policy(t.spec.agent.policy), graph_saver)

                async def one(task: BranchTask, client: ModelClient) -> ExecutionRecord:
                    # an independent draw: the plan's sampling with this branch's own seed
                    ctx = agent_context(
                        task.spec,
                        client.with_sampling(**plan.sampling(task.seed_key)),
                        pool,
                        questions.of(task.spec, task.parent),
                    )
                    current_execution.set(task.execution_id)
                    record = await run_branch(graphs[task.spec.agent.policy], ctx, task, graph_saver, plan, parents)
                    return as_sent(record, sent.pop(task.execution_id))

                await execute(
                    tasks,
                    model_key=lambda t: t.spec.model.model_dump_json(),
                    open_client=open_client,
                    max_connections=lambda t: t.spec.model.max_connections,
                    prepare=prepare,
                    run=one,
                    append=lambda recs: store.append_many(recs, out_file),  # durable before it counts
                    count=count,
                    concurrency=plan.concurrency,
                )

        run_blocking_core(main)


def minimal_searches(
    parents: list[ExecutionRecord], branches: list[ExecutionRecord], saver: Any, judge: str
) -> list[dict[str, Any]]:
    """For each correct parent with k > 0 searches: the smallest t < k whose THINK continuation
    from `after_search_t` (t = 0: `initial`) is correct in at least half of its repeats; k if none."""
    judged_parents = {r.execution_id: r for r in judge_records(parents, judge)}
    think = [b for b in branches if b.branch == "THINK" and b.status != "incomplete"]
    judged = judge_records(think, judge)
    by_checkpoint: dict[tuple[str, str], list[bool]] = {}
    for b in judged:
        assert b.parent is not None  # a THINK branch has its parent
        by_checkpoint.setdefault((b.parent.execution_id, b.parent.checkpoint_id), []).append(is_correct(b, judge))
    out = []
    reader = state_reader(saver)
    for parent in judged_parents.values():
        k = parent.search_calls
        if k == 0 or not is_correct(parent, judge):
            continue
        minimal = k
        for boundary in list_boundaries(saver, parent.execution_id, reader):
            if boundary.kind in (BOUNDARY_INITIAL, BOUNDARY_AFTER_SEARCH) and boundary.searches < minimal:
                votes = by_checkpoint.get((parent.execution_id, boundary.checkpoint_id))
                if votes and sum(votes) * 2 >= len(votes):
                    minimal = boundary.searches
        out.append(
            {
                "execution_id": parent.execution_id,
                "question_id": parent.question_id,
                "condition": parent.condition,
                "searches": k,
                "minimal_searches": minimal,
                "judge": judge,
            }
        )
    return out


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
    (`_run_tasks`, into the run folder, which the caller has locked)."""

    def run_here(part: list[BranchTask]) -> ShardOutcome:
        ran = ForkSummary(run_dir=store.run_dir)
        _run_tasks(
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
        from branchpoint.experiments.fork_shards import check_fork_executor

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
            from branchpoint.experiments.fork_shards import ForkJob, run_fork_shards

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
    "minimal_searches",
    "replay_run",
]
