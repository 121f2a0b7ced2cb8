"""The sequential runner: spec -> conditions x questions -> checkpointed executions -> run store.

Idempotent: each execution has a deterministic id, and executions already in the store are
skipped, so a finished spec reruns with no model call and an interrupted one does only what is
missing. A transport fault that outlives its retries is recorded as `incomplete` (never scored
as wrong) and redone on the next run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from branchpoint.agents import (
    AgentContext,
    AgentState,
    Budget,
    build_graph,
    initial_state,
    recursion_limit,
    resolve_policy,
)
from branchpoint.checkpoints.store import adelete_threads, batched_saves, open_async_checkpointer
from branchpoint.diskspace import reporting_no_space
from branchpoint.errors import InputError
from branchpoint.experiments.execution import execute, run_blocking_core, stream_recording
from branchpoint.experiments.execution_records import identity_fields, incomplete_record, record_from_state
from branchpoint.experiments.invocations import begin_invocation
from branchpoint.experiments.planning import PlannedExecution, plan_executions, policy_paths, select_questions
from branchpoint.experiments.run_checks import check_models, check_run_dir
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.store import RunLock, RunStore, run_lock
from branchpoint.experiments.tallies import tally_records
from branchpoint.models import ModelClient, TransportError, open_model
from branchpoint.models.request_fingerprint import RequestFingerprints, RequestSinks
from branchpoint.models.request_log import RequestLog, current_execution
from branchpoint.models.sent_sampling import SentSampling
from branchpoint.tools import SearchTool
from branchpoint.traces import EXECUTIONS_FILE, REQUESTS_FILE, RETRIEVAL_CACHE_FILE, ExecutionRecord

#: Opens a model client for a spec; tests pass one that yields a scripted model.
ModelOpener = Callable[[ExperimentSpec, Path], Any]


@dataclass
class RunSummary:
    """What a run did: planned, skipped (already recorded), run, and their statuses."""

    run_dir: Path
    planned: int = 0
    skipped: int = 0
    ran: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    #: Model calls the response cache answered (`hits`) or sent (`misses`); empty without one.
    response_cache: dict[str, int] = field(default_factory=dict)


def missing_work(
    plan: list[PlannedExecution], done: Collection[str], run_dir: Path, started: float
) -> tuple[list[PlannedExecution], RunSummary]:
    """The planned executions without a final record, and the run's summary so far (its wall
    time counted from `started`, final when nothing is missing)."""
    todo = [p for p in plan if p.execution_id not in done]
    summary = RunSummary(run_dir=run_dir, planned=len(plan), skipped=len(plan) - len(todo))
    summary.wall_s = time.perf_counter() - started
    return todo, summary


def progress_bar(progress: bool) -> Progress:
    """A run's progress bar: done / total, executions per minute (the task's `rate` field),
    elapsed time, ETA; nothing is drawn when `progress` is False."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        disable=not progress,
        transient=False,
    )


async def clear_thread(saver: Any, thread_id: str) -> None:
    """Delete what an abandoned attempt (a transport fault, a killed process) left on a thread.

    A redone execution reuses its thread id; without this, its thread would keep the abandoned
    attempt's checkpoints, and their boundaries would be listed (and forked) with the new ones.
    """
    if saver is not None:
        await saver.adelete_thread(thread_id)


async def run_one(
    graph: Any, ctx: AgentContext, planned: PlannedExecution, run_id: str, *, clear: bool = True
) -> ExecutionRecord:
    """Run one execution on its own checkpointed thread (thread id = execution id), on the
    running event loop.

    The thread is cleared first unless `clear` is False (the runner clears all the threads it
    is about to run in one go, see `adelete_threads`).
    """
    spec = planned.spec
    if clear:
        await clear_thread(graph.checkpointer, planned.execution_id)
    config = {
        "configurable": {"thread_id": planned.execution_id},
        "recursion_limit": recursion_limit(spec.agent.search_cap),
    }
    state = first_state(planned)
    start = time.perf_counter()
    try:
        values, ids = await stream_recording(graph, state, config, ctx)
    except TransportError as exc:
        return incomplete_record(identity_fields(planned, run_id), time.perf_counter() - start, str(exc))
    wall = time.perf_counter() - start
    return record_from_state(values, identity_fields(planned, run_id), wall, ids, ctx=ctx)


def first_state(planned: PlannedExecution) -> AgentState:
    """The state a planned execution starts from (its question, the default source, its earlier
    turns and its disclosed budget); the pre-run probe (`experiments.prerun`) starts from it too."""
    spec, q = planned.spec, planned.question
    return initial_state(q.id, q.question, spec.retrieval.default, planned.history, disclosed_budget(spec))


class SearchTools(Protocol):
    """Where an execution's search tool comes from: the run's `SourcePool`, or the pre-run
    probe's sources that search nothing (`experiments.prerun`)."""

    def search_tool(self, spec: ExperimentSpec, question: Any = None) -> SearchTool | None:
        """The search tool for a condition, or None when search is not offered."""
        ...


def agent_context(spec: ExperimentSpec, client: ModelClient, pool: SearchTools, question: Any = None) -> AgentContext:
    """The run-time context of one execution under a condition's spec (`question`: the one it
    answers, for retrieval interventions)."""
    agent = spec.agent
    return AgentContext(
        model=client,
        search=pool.search_tool(spec, question),
        search_cap=agent.search_cap,
        max_tokens=spec.model.max_tokens,
        answer_max_tokens=agent.answer_max_tokens or spec.model.max_tokens,
        evidence_words=agent.evidence_words,
        malformed_retries=agent.malformed_retries,
        prompt=agent.prompt,
        protocol=agent.protocol,
        token_budget=agent.token_budget,
    )


def disclosed_budget(spec: ExperimentSpec) -> Budget | None:
    """The initial state's `budget` channel for a condition's spec: the disclosure mode, the
    search cap and the token budget; None when nothing is disclosed and no token budget is set
    (so states and requests of such specs are as they were before the channel existed)."""
    agent = spec.agent
    if agent.budget_disclosure == "hidden" and agent.token_budget is None:
        return None
    return Budget(disclosure=agent.budget_disclosure, search_cap=agent.search_cap, token_budget=agent.token_budget)


def with_request_log(
    client: ModelClient,
    run_dir: Path,
    log_requests: bool,
    stack: ExitStack,
    fingerprints: RequestFingerprints | None = None,
    sent: SentSampling | None = None,
) -> ModelClient:
    """`client`, logging every request body to RUN_DIR/requests.jsonl when `log_requests` is set,
    and feeding `fingerprints` and `sent` (the sampling as sent) when given and the client can
    log its requests."""
    with_log = getattr(client, "with_request_log", None)
    sinks: list[Any] = []
    if log_requests:
        if with_log is None:
            raise InputError(f"--log-requests: the model client {type(client).__name__} cannot log its requests")
        log = RequestLog(Path(run_dir) / REQUESTS_FILE)
        stack.callback(log.close)
        sinks.append(log)
    if with_log is not None:
        sinks += [sink for sink in (fingerprints, sent) if sink is not None]
    if not sinks:
        return client
    assert with_log is not None
    logged: ModelClient = with_log(sinks[0] if len(sinks) == 1 else RequestSinks(sinks))
    return logged


@contextmanager
def default_model_opener(spec: ExperimentSpec, run_dir: Path) -> Iterator[ModelClient]:
    """Open the model of a spec, logging an embedded server's output into the run folder."""
    with open_model(spec.model, log_dir=run_dir) as client:
        yield client


def _model_key(spec: ExperimentSpec) -> str:
    """Executions that share one client (and one server, for an embedded model): the same model
    settings but for the request seed, which each execution's client view sends itself
    (`with_seed`); an unseeded model is a setting of its own. A sweep over `model.seed` is then
    one group with `concurrency` executions in flight, not one group per seed run one after
    another (which held a 16-seed sweep at concurrency 256 to 64 in flight)."""
    return f"{spec.model.model_dump_json(exclude={'seed'})}|seeded={spec.model.seed is not None}"


def run_experiment(
    spec: ExperimentSpec,
    run_dir: str | Path,
    *,
    progress: bool = True,
    model_opener: ModelOpener = default_model_opener,
    checkpoints: str | None = None,
    concurrency: int = 1,
    execution_ids: Collection[str] | None = None,
    log_requests: bool = False,
    lock: RunLock | None = None,
    invocation_id: str | None = None,
) -> RunSummary:
    """Run every missing execution of a spec into `run_dir` and return what was done.

    `concurrency` executions run at once (on one event loop; a server such as vLLM batches the
    concurrent requests), at most `model.max_connections` of them talking to one server at a time.
    `checkpoints` is a `postgresql://` URL for runs shared by many workers; default: the run's
    own SQLite file. `execution_ids` restricts the run to those planned executions (one shard of
    a run, see `shards.run_shard`); an id that the plan lacks is an error. `log_requests`
    appends every request body sent to the model to RUN_DIR/requests.jsonl. `lock` is the run
    folder's lock when the caller holds it already; else it is taken here. `invocation_id` names
    an invocation recorded already (a shard's driver); else this one is recorded in the run's
    invocations.jsonl. The plan is made here; a caller that has it already runs it with `run_planned`.
    """
    _check_concurrency(concurrency)
    started = time.perf_counter()
    plan = plan_executions(spec, select_questions(spec))  # validates names before anything is written
    if execution_ids is not None:
        wanted = set(execution_ids)
        plan = [p for p in plan if p.execution_id in wanted]
        if len(plan) != len(wanted):
            raise InputError(
                f"{len(wanted) - len(plan)} of {len(wanted)} execution ids are not in the plan of spec "
                f"{spec.name!r} here (do the spec or its question files differ between machines?)"
            )
    return run_planned(
        spec,
        run_dir,
        plan,
        progress=progress,
        model_opener=model_opener,
        checkpoints=checkpoints,
        concurrency=concurrency,
        log_requests=log_requests,
        lock=lock,
        started=started,
        invocation_id=invocation_id,
    )


def run_planned(
    spec: ExperimentSpec,
    run_dir: str | Path,
    planned: list[PlannedExecution],
    *,
    progress: bool = True,
    model_opener: ModelOpener = default_model_opener,
    checkpoints: str | None = None,
    concurrency: int = 1,
    log_requests: bool = False,
    lock: RunLock | None = None,
    started: float | None = None,
    invocation_id: str | None = None,
    done: Collection[str] | None = None,
) -> RunSummary:
    """Run those of `planned` (executions of `spec`, as `plan_executions` made them) that
    `run_dir` has not recorded as final; as `run_experiment`, without planning again.

    The driver's in-process backend comes here with the missing work it planned (see
    `driver.in_process`) and `done`, the finished ids it read under the lock it holds (`lock`),
    so the trace file is not read again; without `done` they are read here. The summary counts
    `planned` as the plan, and its wall time from `started` (default: now).
    """
    _check_concurrency(concurrency)
    check_models(planned)
    started = time.perf_counter() if started is None else started
    store = RunStore(run_dir)
    target = store.checkpoint_target(checkpoints)
    if lock is None:  # ids read before this lock was taken may be stale: read them under it
        done = None
    with ExitStack() as stack:
        lock = lock or stack.enter_context(run_lock(store.run_dir))  # one writer per run folder
        check_run_dir(store, spec, checkpoints)
        todo, summary = missing_work(planned, store.finished_ids() if done is None else done, store.run_dir, started)
        if not todo:
            return summary
        pool = SourcePool(progress, cache_path=store.run_dir / RETRIEVAL_CACHE_FILE)
        stack.callback(pool.close)
        for condition_spec in {id(p.spec): p.spec for p in todo}.values():  # one spec object per condition
            pool.prepare(condition_spec)  # open every source now: a bad corpus or a stale index writes nothing
            pool.check_oracles(condition_spec, (p.question for p in todo if p.spec is condition_spec))
        lock.committed = True  # the first write: from here on the folder is the run's
        store.create(spec.model_dump(mode="json"))
        specs = {id(p.spec): p.spec for p in todo}.values()
        begin_invocation(store, EXECUTIONS_FILE, "run", specs, invocation_id)
        _run_todo(
            spec, store, todo, summary, pool, stack, target, progress, model_opener, concurrency, started, log_requests
        )
    summary.wall_s = time.perf_counter() - started
    return summary


def _check_concurrency(concurrency: int) -> None:
    if concurrency < 1:
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")


def _run_todo(
    spec: ExperimentSpec,
    store: RunStore,
    todo: list[PlannedExecution],
    summary: RunSummary,
    pool: SourcePool,
    stack: ExitStack,
    target: str,
    progress: bool,
    model_opener: ModelOpener,
    concurrency: int,
    started: float,
    log_requests: bool = False,
) -> None:
    """Run the missing executions (the run folder is locked and written by the caller) on the
    asynchronous execution core (`experiments.execution`), one event loop for the whole run."""
    fingerprints = RequestFingerprints()  # what each execution sent (see `evaluation.sameness`)
    sent = SentSampling()  # how it sampled, as sent (the record's `sampling`)
    bar = stack.enter_context(progress_bar(progress))
    task = bar.add_task(spec.name, total=len(todo), rate="")
    graphs: dict[str, Any] = {}

    def count(rec: ExecutionRecord) -> None:  # on the loop, once the writer has appended it
        tally_records(summary, [rec])
        elapsed = time.perf_counter() - started
        bar.update(task, advance=1, rate=f"{summary.ran / max(elapsed, 1e-9) * 60:.1f}/min")

    @contextmanager
    def open_client(planned: PlannedExecution, group: ExitStack) -> Iterator[ModelClient]:
        with model_opener(planned.spec, store.run_dir) as opened:
            yield with_request_log(opened, store.run_dir, log_requests, group, fingerprints, sent)

    async def main() -> None:
        async with open_async_checkpointer(target) as saver:
            # What abandoned attempts (a transport fault, a killed process) left on the threads
            # about to be redone goes first, in one transaction (see `clear_thread`).
            await adelete_threads(saver, [p.execution_id for p in todo])

            def prepare(planned: PlannedExecution) -> None:  # sources and graphs before any runs
                pool.search_tool(planned.spec)
                policy = planned.spec.agent.policy
                if policy not in graphs:
                    graphs[policy] = build_graph(resolve_policy(policy, policy_paths(spec)), saver)

            async def one(planned: PlannedExecution, client: ModelClient) -> ExecutionRecord:
                # A client view per execution (the scripted model's list replies restart per
                # execution), and the execution named in any request log.
                ctx = agent_context(planned.spec, client.with_seed(planned.seed), pool, planned.question)
                current_execution.set(planned.execution_id)
                rec = await run_one(graphs[planned.spec.agent.policy], ctx, planned, spec.name, clear=False)
                rec.request_fingerprint = fingerprints.pop(planned.execution_id)
                rec.sampling = sent.pop(planned.execution_id)
                return rec

            # The saves go in one transaction per batch of records, committed by the writer just
            # before it appends them (`batched_saves`; what is left is committed at the end).
            with batched_saves(saver) as commit_states:
                await execute(
                    todo,
                    model_key=lambda p: _model_key(p.spec),
                    open_client=open_client,
                    max_connections=lambda p: p.spec.model.max_connections,
                    prepare=prepare,
                    run=one,
                    append=store.append_many,  # durable before the execution counts as done (as written)
                    count=count,
                    concurrency=concurrency,
                    commit_states=commit_states,
                )

    with reporting_no_space(store.run_dir):  # a checkpoint, cache or record write on a full disk
        run_blocking_core(main)
