"""Running fork branches and replays: one branch from its parent's saved state (`run_branch`), and a
list of them on the asynchronous execution core (`run_branch_tasks`), each record appended durably
before it counts.

A branch starts from the checkpoint's state with the fork's directive (`checkpoints.fork.branch_input`);
a replay from the same state with none (`replay_input`), so the policy decides again.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from branchpoint.agents import AgentContext, build_graph, recursion_limit, resolve_policy
from branchpoint.checkpoints.fork import branch_input, prefix_of, transcript_from_steps
from branchpoint.checkpoints.postgres import async_postgres_checkpointer
from branchpoint.checkpoints.store import batched_saves
from branchpoint.checkpoints.values import acheckpoint_values, state_reader
from branchpoint.errors import InputError
from branchpoint.evaluation.fork_settings import with_fork_settings
from branchpoint.experiments.branch_planning import REPLAY_KIND, BranchTask
from branchpoint.experiments.execution import execute, run_blocking_core, stream_recording
from branchpoint.experiments.execution_records import incomplete_record, record_from_state, simulated_marker
from branchpoint.experiments.runner import ModelOpener, agent_context, clear_thread, with_request_log
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.spec import ExperimentSpec, ForkPlan
from branchpoint.experiments.store import RunStore
from branchpoint.experiments.tallies import Tally, tally_records
from branchpoint.models import ModelClient, TransportError
from branchpoint.models.request_log import current_execution
from branchpoint.models.sent_sampling import SentSampling
from branchpoint.traces import FORKS_FILE, RETRIEVAL_CACHE_FILE, ExecutionRecord


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


def run_branch_tasks(
    tasks: list[BranchTask],
    store: RunStore,
    saver: Any,
    plan: ForkPlan,
    summary: Tally,
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

                # one transaction of saves per batch of records, committed before they are appended
                with batched_saves(graph_saver) as commit_states:
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
                        commit_states=commit_states,
                    )

        run_blocking_core(main)
