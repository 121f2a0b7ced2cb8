"""The sequential runner: spec -> conditions x questions -> checkpointed executions -> run store.

Idempotent: each execution has a deterministic id, and executions already in the store are
skipped, so a finished spec reruns with no model call and an interrupted one does only what is
missing. A transport fault that outlives its retries is recorded as `incomplete` (never scored
as wrong) and redone on the next run.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
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
from branchpoint.agents.budget import budget_block
from branchpoint.checkpoints.store import adelete_threads, open_async_checkpointer
from branchpoint.datasets import balanced_sample, load_questions
from branchpoint.datasets.questions import Question
from branchpoint.diskspace import reporting_no_space
from branchpoint.errors import InputError
from branchpoint.experiments.execution import execute, run_blocking_core, stream_recording
from branchpoint.experiments.invocations import begin_invocation
from branchpoint.experiments.multiturn import history_for
from branchpoint.experiments.spec import ExperimentSpec, SourceSpec, condition_fingerprint, expand_conditions
from branchpoint.experiments.store import RunLock, RunStore, run_lock
from branchpoint.experiments.tallies import tally_records
from branchpoint.models import ModelClient, TransportError, open_model
from branchpoint.models.factory import check_planned_questions
from branchpoint.models.request_fingerprint import RequestFingerprints, RequestSinks
from branchpoint.models.request_log import RequestLog, current_execution
from branchpoint.models.sent_sampling import SentSampling
from branchpoint.retrieval import RetrievalSource
from branchpoint.retrieval.cache import CachedSource, RetrievalCache, source_params
from branchpoint.retrieval.interventions import InterventionSource, OracleRefused, SearchContext, context_of
from branchpoint.retrieval.sources.interventions import InterventionSourceSpec
from branchpoint.tools import SearchTool
from branchpoint.traces import (
    EXECUTIONS_FILE,
    REQUESTS_FILE,
    RETRIEVAL_CACHE_FILE,
    SPEC_FILE,
    ExecutionRecord,
    Step,
    execution_id,
)

#: Opens a model client for a spec; tests pass one that yields a scripted model.
ModelOpener = Callable[[ExperimentSpec, Path], Any]


@dataclass
class PlannedExecution:
    """One execution to run: its condition, the spec resolved for it, the question, its id and
    its epoch (`run.epochs`: recorded as the record's `repeat`)."""

    condition: dict[str, Any]
    spec: ExperimentSpec
    question: Question
    execution_id: str
    history: list[dict[str, str]] = field(default_factory=list)
    epoch: int = 0

    @property
    def seed(self) -> int | None:
        """The request seed this execution sends: `model.seed` for epoch 0, a seed of its own for
        each later epoch (`RunSpec.seed_of`)."""
        return self.spec.run.seed_of(self.spec.model.seed, self.epoch)


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


def select_questions(spec: ExperimentSpec) -> list[Question]:
    """The spec's questions: loaded, filtered, sampled (balanced and seeded) if asked, and cut to
    `limit` keeping the selection's answerable / unanswerable balance (`limit_balanced`)."""
    q = spec.questions
    questions = load_questions(q.path, q.format, limit=None, categories=q.categories, split=q.split)
    if q.sample:
        questions = balanced_sample(questions, q.sample.answerable, q.sample.unanswerable, seed=spec.seed)
    if q.limit:
        questions = limit_balanced(questions, q.limit)
    if not questions:
        raise InputError("questions: the selection is empty (check path, categories and sample)")
    return questions


def limit_balanced(questions: list[Question], n: int) -> list[Question]:
    """At most `n` questions, in input order, keeping the answerable / unanswerable shares.

    `round(n * answerable share)` answerable questions (at least one of each kind when `n >= 2`
    and both are present) and the rest unanswerable, those taken round-robin over their
    categories (AU, FP, UC, none) so that no category is left out while another has several; a
    kind that runs out is filled in by the other.
    """
    if n >= len(questions):
        return list(questions)
    answerable = [q for q in questions if q.answerable]
    unanswerable = [q for q in questions if not q.answerable]
    k = round(n * len(answerable) / len(questions))
    if answerable and unanswerable and n >= 2:
        k = min(max(k, 1), n - 1)
    k = min(max(k, n - len(unanswerable)), len(answerable))
    by_category: dict[str | None, list[Question]] = {}
    for q in unanswerable:
        by_category.setdefault(q.category, []).append(q)
    picked_u: list[Question] = []
    queues = [list(v) for v in by_category.values()]
    while len(picked_u) < n - k and any(queues):
        for queue_ in queues:
            if queue_ and len(picked_u) < n - k:
                picked_u.append(queue_.pop(0))
    keep = {id(q) for q in answerable[:k]} | {id(q) for q in picked_u}
    return [q for q in questions if id(q) in keep]


def history_pool(spec: ExperimentSpec) -> list[Question]:
    """Where multi-turn earlier turns are drawn from: the whole question file (not the selection:
    a `--limit` or a sample must not starve the histories)."""
    return load_questions(spec.questions.path, spec.questions.format, split=spec.questions.split)


def plan_executions(spec: ExperimentSpec, questions: list[Question]) -> list[PlannedExecution]:
    """Every condition x epoch x question, each with its deterministic execution id.

    Epoch e of a question is `execution_id(run, condition, question, repeat=e)`: epoch 0 keeps
    the id of a run without epochs, so raising `run.epochs` adds executions and redoes none.
    Within a condition the epochs come one after another (epoch 0 of every question first), so
    an interrupted run has whole epochs recorded.
    """
    plan = []
    pool: list[Question] | None = None
    for condition, resolved in expand_conditions(spec):
        resolve_policy(resolved.agent.policy, policy_paths(spec))  # unknown policy: fail before any work
        spec.run.check(resolved.model.temperature, "spec", condition)  # epochs that would be copies
        if resolved.retrieval.default not in resolved.retrieval.sources:
            raise InputError(
                f"retrieval.default: unknown source {resolved.retrieval.default!r} "
                f"(known: {', '.join(sorted(resolved.retrieval.sources))})"
            )
        for name, source in resolved.retrieval.sources.items():
            source.check(name)
            if isinstance(source, InterventionSourceSpec):
                source.check_base(name, dict(resolved.retrieval.sources))
        key = {**condition, "_settings": condition_fingerprint(resolved)}
        if resolved.multi_turn and resolved.multi_turn.preceding and pool is None:
            pool = history_pool(spec)
        histories = [
            history_for(question, pool or questions, resolved.multi_turn, spec.seed) if resolved.multi_turn else []
            for question in questions
        ]
        for epoch in range(spec.run.epochs):
            for question, history in zip(questions, histories, strict=True):
                eid = execution_id(spec.name, key, question.id, repeat=epoch)
                plan.append(PlannedExecution(condition, resolved, question, eid, history, epoch))
    return plan


def policy_paths(spec: ExperimentSpec) -> list[Path]:
    """Where a `module:function` policy is imported from besides the working directory: the
    folder of the spec file it was loaded from, when known."""
    return [spec.source_dir] if spec.source_dir is not None else []


def _source_key(name: str, source: SourceSpec) -> str:
    """A source's identity within a run: its name and its whole spec."""
    return json.dumps([name, source.model_dump()], sort_keys=True)


class SourcePool:
    """Opens each retrieval source once per run (indexes are cached on disk by corpus hash).

    With `cache_path`, every source goes through the run's persistent retrieval cache, so
    repeated executions (forks, reruns) get exactly the same evidence for the same query. The
    cache file is opened on first use: `prepare` opens (and so validates) a spec's sources
    without writing anything into the run folder.
    """

    def __init__(self, progress: bool, cache_path: Path | None = None) -> None:
        self._raw: dict[str, RetrievalSource] = {}
        self._open: dict[str, RetrievalSource] = {}
        self._progress = progress
        self._lock = threading.Lock()
        self._cache_path = cache_path
        self._cache: RetrievalCache | None = None

    def _opened(self, key: str, name: str, source: SourceSpec) -> RetrievalSource:
        """The source itself (no cache), opened (and if needed built) the first time; lock held."""
        if key not in self._raw:
            self._raw[key] = source.open(name, progress=self._progress)
        return self._raw[key]

    def prepare(self, spec: ExperimentSpec) -> None:
        """Open every source a condition searches (a corpus that does not parse, a stale index:
        InputError now, before the run folder is written)."""
        if spec.agent.search:
            for name, source in spec.retrieval.sources.items():
                if isinstance(source, InterventionSourceSpec):
                    self._intervention(name, source, spec.retrieval.sources, cached=False)
                    continue
                with self._lock:
                    self._opened(_source_key(name, source), name, source)

    def check_oracles(self, spec: ExperimentSpec, questions: Iterable[Any]) -> None:
        """Every planned question an `oracle` source will be asked about has gold passages: one
        InputError naming the questions without, before the run folder is written (not at the
        first search, after other executions were recorded)."""
        if not spec.agent.search:
            return
        questions = list(questions)
        for name, source in spec.retrieval.sources.items():
            if not isinstance(source, InterventionSourceSpec) or source.kind != "oracle":
                continue
            opened = self._intervention(name, source, spec.retrieval.sources, cached=False)
            missing = []
            for question in questions:
                try:
                    opened.gold_positions(context_of(question, spec.seed))
                except OracleRefused:
                    missing.append(str(getattr(question, "id", question)))
            if missing:
                shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
                raise InputError(
                    f"retrieval.sources.{name} (oracle): {len(missing)} answerable question(s) have no gold passage "
                    f"(no supporting passage id in the corpus, no passage holding a gold answer): {shown}"
                )

    def _intervention(
        self, name: str, spec: InterventionSourceSpec, sources: Mapping[str, SourceSpec], *, cached: bool = True
    ) -> InterventionSource:
        """An intervention source, opened once per run over its base (itself through `get`, so
        the base's results are cached and shared by every question). `cached=False` (`prepare`,
        `check_oracles`: checks before the run folder is written) opens the base without the run's
        retrieval cache, whose database file would be the folder's first write."""
        spec.check_base(name, dict(sources))
        base_spec = sources[spec.base] if spec.base is not None else spec.default_base()
        base_name = spec.base or f"{name}.base"
        key = json.dumps([name, spec.model_dump(), base_spec.model_dump(), cached], sort_keys=True)
        with self._lock:
            if key in self._raw:
                opened = self._raw[key]
                assert isinstance(opened, InterventionSource)
                return opened
        reads_base = spec.needs_base or (spec.needs_corpus and spec.corpus is None and spec.base is not None)
        base: RetrievalSource | None = None
        if reads_base and cached:
            base = self.get(base_name, base_spec)
        elif reads_base:
            with self._lock:
                base = self._opened(_source_key(base_name, base_spec), base_name, base_spec)
        params = source_params(base) if base is not None else ""
        with self._lock:
            if key not in self._raw:
                self._raw[key] = spec.open_over(name, base, params)
            opened = self._raw[key]
        assert isinstance(opened, InterventionSource)
        return opened

    def get(
        self,
        name: str,
        source: SourceSpec,
        sources: Mapping[str, SourceSpec] | None = None,
        context: SearchContext | None = None,
    ) -> RetrievalSource:
        """The source for `name` (through the run's retrieval cache, if any). An intervention
        (`sources.interventions`) is bound to `context` (the run's seed and the question), its
        cache key naming both; `sources` are the spec's others, where its `base` is found."""
        if isinstance(source, InterventionSourceSpec):
            bound = self._intervention(name, source, sources or {}).bind(context or SearchContext())
            if self._cache_path is None:
                return bound
            with self._lock:
                return CachedSource(bound, self._run_cache(self._cache_path), bound.cache_params)
        key = _source_key(name, source)
        with self._lock:
            if key not in self._open:
                opened = self._opened(key, name, source)
                if self._cache_path is not None:
                    opened = CachedSource(opened, self._run_cache(self._cache_path), source_params(opened))
                self._open[key] = opened
            return self._open[key]

    def _run_cache(self, path: Path) -> RetrievalCache:
        """The run's retrieval cache, its database opened on first use (lock held)."""
        if self._cache is None:
            self._cache = RetrievalCache(path)
        return self._cache

    def close(self) -> None:
        """Close the retrieval cache's database and the sources that hold connections."""
        for opened in self._raw.values():
            close = getattr(opened, "close", None)
            if callable(close):
                close()
        if self._cache is not None:
            self._cache.close()

    def search_tool(self, spec: ExperimentSpec, question: Any = None) -> SearchTool | None:
        """The search tool for a condition, or None when search is not offered. `question` (a
        `Question`, or a record's question fields) is what retrieval interventions key their
        draws on, with the run's seed (`retrieval.interventions.context_of`)."""
        if not spec.agent.search:
            return None
        context = context_of(question, spec.seed)
        named = spec.retrieval.sources
        sources = {name: self.get(name, s, named, context) for name, s in named.items()}
        return SearchTool(sources, spec.retrieval.default, top_k=spec.agent.top_k)


def check_run_dir(store: RunStore, spec: ExperimentSpec, checkpoints: str | None) -> None:
    """Everything about the run folder that can refuse a run, read-only (before the first write):
    it holds no other spec's run (`check_same_run`), its files are files, its databases are
    readable, and its checkpoints are there if its records list any (`check_saved_states`)."""
    from branchpoint.dbfiles import CACHE_HINT, CHECKPOINTS_HINT, check_run_files, probe
    from branchpoint.experiments.spec import check_same_run, load_spec

    recorded = store.run_dir / SPEC_FILE
    if recorded.is_file():
        check_same_run(load_spec(recorded, check_policy=False, recorded=True), spec, store.run_dir)
    check_run_files(store.run_dir)
    if checkpoints is None:
        probe(store.checkpoints_path, "checkpoint database", CHECKPOINTS_HINT, ("checkpoints", "writes"))
    probe(store.run_dir / RETRIEVAL_CACHE_FILE, "retrieval cache", CACHE_HINT, ("retrieval_cache",))
    store.check_saved_states(checkpoints)


def check_models(planned: Iterable[PlannedExecution]) -> None:
    """Each condition's model can be opened as far as the spec says (a `base_url` for provider
    openai, the API key's variable set: `ModelSpec.check_ready`), and a simulated model knows
    every planned question: refused before anything is written."""
    planned = list(planned)
    for spec in {id(p.spec): p.spec for p in planned}.values():
        spec.model.check_ready()
    check_planned_questions((p.spec.model, p.question) for p in planned)  # provider hooks (sim: by id)


def check_sources(todo: Iterable[PlannedExecution]) -> None:
    """Read every corpus the planned executions search, and check every saved index directory
    against it, and every FlashRAG index file (memory-mapped, not loaded), without loading an
    encoder or building anything (the check of the executors whose workers open the sources
    themselves): a corpus that is not JSON, not UTF-8 or empty, an index of another corpus, kind
    or build parameters, or a damaged index file, is an InputError before the run folder is
    written."""
    seen: set[str] = set()
    for spec in {id(p.spec): p.spec for p in todo}.values():  # one spec object per condition
        if not spec.agent.search:
            continue
        for source in spec.retrieval.sources.values():
            key = source.model_dump_json()
            if key not in seen:
                seen.add(key)
                source.check_data()


def identity_fields(planned: PlannedExecution, run_id: str) -> dict[str, Any]:
    """The fields that say which execution a record is: ids, condition and the question."""
    q = planned.question
    return dict(
        execution_id=planned.execution_id,
        run_id=run_id,
        condition=planned.condition,
        question_id=q.id,
        question=q.question,
        answerable=q.answerable,
        category=q.category,
        gold_answers=q.gold_answers,
        stratum=q.stratum,
        support_group=q.support_group,
        repeat=planned.epoch,
        **({"history": planned.history} if planned.history else {}),
        **simulated_marker(planned.spec),
    )


def simulated_marker(spec: ExperimentSpec) -> dict[str, str]:
    """`{"model_provider": "sim"}` for records made with the simulated model (provider `sim`, or a
    served name `branchpoint-sim-*` behind provider `openai`), so every report can say so; else {}."""
    if spec.model.provider == "sim" or spec.model.name.startswith("branchpoint-sim"):
        return {"model_provider": "sim"}
    return {}


def record_from_state(
    values: dict[str, Any],
    identity: dict[str, Any],
    wall_s: float,
    checkpoint_ids: list[str] | None,
    searches_before: int = 0,
    ctx: AgentContext | None = None,
) -> ExecutionRecord:
    """The trace record of a finished execution, from the graph's final state.

    `searches_before` is the number of searches already in the state it started from (non-zero
    for forks), so the record counts only its own search calls. With the execution's context
    `ctx`, the record carries its `budget` block (`agents.budget.budget_block`: the limits, what
    the path used of them, and why its answer was forced).
    """
    steps = [Step.model_validate(s) for s in values.get("steps", [])]
    usages = [s.usage for s in steps if s.usage is not None]
    return ExecutionRecord(
        **identity,
        status=values.get("status", "ok"),
        final_answer=values.get("final_answer"),
        steps=steps,
        search_calls=int(values.get("searches", 0)) - searches_before,
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        reasoning_tokens=sum(u.reasoning_tokens or 0 for u in usages),
        wall_s=wall_s,
        checkpoint_ids=checkpoint_ids,
        **({"budget": budget_block(values, ctx)} if ctx is not None else {}),
    )


def incomplete_record(identity: dict[str, Any], wall_s: float, error: str) -> ExecutionRecord:
    """A record for an execution cut short by a transport fault: redone on the next run."""
    return ExecutionRecord(**identity, status="incomplete", wall_s=wall_s, error=error)


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
    return with_log(sinks[0] if len(sinks) == 1 else RequestSinks(sinks))


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
) -> RunSummary:
    """Run those of `planned` (executions of `spec`, as `plan_executions` made them) that
    `run_dir` has not recorded as final; as `run_experiment`, without planning again.

    The driver's in-process backend comes here with the missing work it planned (see
    `driver.in_process`). The summary counts `planned` as the plan, and its wall time from
    `started` (default: now).
    """
    _check_concurrency(concurrency)
    check_models(planned)
    started = time.perf_counter() if started is None else started
    store = RunStore(run_dir)
    target = store.checkpoint_target(checkpoints)
    with ExitStack() as stack:
        lock = lock or stack.enter_context(run_lock(store.run_dir))  # one writer per run folder
        check_run_dir(store, spec, checkpoints)
        todo, summary = missing_work(planned, store.finished_ids(), store.run_dir, started)
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
            )

    with reporting_no_space(store.run_dir):  # a checkpoint, cache or record write on a full disk
        run_blocking_core(main)
