"""Fork studies on a run directory: branch x repeat continuations from saved states.

For each recorded execution, each selected legal boundary, each legal action and each repeat,
one branch runs on its own thread seeded from the checkpoint (see `branchpoint.checkpoints.fork`)
and is appended to `RUN_DIR/forks.jsonl` as an `ExecutionRecord` with `parent`, `branch` and
`repeat`. Branches run concurrently; reruns skip branches already recorded. Retrieval goes
through the run's persistent cache, so repeats share evidence exactly.

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
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from branchpoint.checkpoints.boundaries import BoundaryInfo
from branchpoint.checkpoints.fork import (
    LEGAL_ACTIONS,
    IllegalActionError,
    branch_input,
    check_action,
    checkpoint_values,
    prefix_of,
    transcript_from_steps,
)
from branchpoint.checkpoints.values import state_reader
from branchpoint.errors import InputError
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import is_correct
from branchpoint.experiments.runner import (
    ModelOpener,
    SourcePool,
    agent_context,
    clear_thread,
    default_model_opener,
    incomplete_record,
    invoke_recording,
    limit_connections,
    record_from_state,
    run_concurrently,
    with_request_log,
    simulated_marker,
)
from branchpoint.experiments.spec import ExperimentSpec, ForkPlan, expand_conditions, load_spec
from branchpoint.experiments.store import RunStore, run_lock
from branchpoint.models import TransportError
from branchpoint.models.request_log import current_execution
from branchpoint.traces import (
    FORKS_FILE,
    REPLAYS_FILE,
    ExecutionRecord,
    execution_id,
    read_records,
)

MINIMAL_FILE = "minimal_search.jsonl"


#: The `kind` of a replay record (its `branch` is null: no action was forced).
REPLAY_KIND = "replay"


@dataclass
class BranchTask:
    """One branch to run: parent record, boundary, action (None: a replay, the policy decides),
    repeat, the spec of its condition, its execution id and condition."""

    parent: ExecutionRecord
    boundary: BoundaryInfo
    action: str | None
    repeat: int
    spec: ExperimentSpec
    execution_id: str
    condition: dict[str, Any] = field(default_factory=dict)

    @property
    def seed_key(self) -> str:
        """What a branch's sampling seed is derived from: the parent, the saved state by its step
        (not its checkpoint id, which is new on every run), the branch's condition and repeat, so
        seeds differ per (state, action, repeat) and a study run afresh draws the same numbers."""
        return json.dumps([self.parent.execution_id, self.boundary.step, self.boundary.boundary,
                           self.condition, self.repeat], sort_keys=True, default=str)  # fmt: skip


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

    @property
    def over_search_pct(self) -> float | None:
        """Over-search % = mean searches / mean minimal searches − 1 (None without data)."""
        if not self.minimal:
            return None
        mean_k = sum(m["searches"] for m in self.minimal) / len(self.minimal)
        mean_t = sum(m["minimal_searches"] for m in self.minimal) / len(self.minimal)
        return float("inf") if mean_t == 0 else 100.0 * (mean_k / mean_t - 1.0)


def _condition_key(condition: dict[str, Any]) -> str:
    return json.dumps(condition, sort_keys=True, default=str)


def base_condition(condition: dict[str, Any]) -> dict[str, Any]:
    """A record's condition without the fork settings: the run condition it descends from."""
    return {k: v for k, v in condition.items() if not k.startswith("fork.")}


def fork_depth(record: ExecutionRecord) -> int:
    """0 for an original execution, 1 for a branch of one, 2 for a branch of a branch, …"""
    return int(record.condition.get("fork.depth", 1)) if record.parent is not None else 0


def offers_search(spec: ExperimentSpec) -> bool:
    """Whether executions under this condition may search at all (tool offered, cap > 0, and a
    policy that uses it): SEARCH and SWITCH branches are only planned where it is True."""
    return spec.agent.search and spec.agent.search_cap > 0 and spec.agent.policy != "no_search"


def condition_specs(spec: ExperimentSpec) -> dict[str, ExperimentSpec]:
    """The resolved spec of each condition of a run, keyed by its condition dict."""
    return {_condition_key(c): s for c, s in expand_conditions(spec)}


def parent_records(
    store: RunStore, prefixes: list[str] | None, *, include_branches: bool = False
) -> list[ExecutionRecord]:
    """Finished executions of a run (latest record per id), optionally by id prefix.

    Without prefixes, the original executions only; with prefixes (or `include_branches`),
    fork branches match too, so a branch can be forked again.
    """
    latest: dict[str, ExecutionRecord] = {}
    for rec in store.records():
        latest[rec.execution_id] = rec
    originals = [r for r in latest.values() if r.status != "incomplete" and r.parent is None]
    if not prefixes and not include_branches:
        return originals
    branches: dict[str, ExecutionRecord] = {}
    for rec in fork_records(store.run_dir):
        branches[rec.execution_id] = rec
    records = originals + [r for r in branches.values() if r.status != "incomplete"]
    if prefixes:
        picked = []
        for prefix in prefixes:
            matches = [r for r in records if r.execution_id.startswith(prefix)]
            if len(matches) != 1:
                what = "no" if not matches else str(len(matches))
                raise InputError(f"--execution {prefix}: {what} finished executions of {store.run_dir} match")
            picked += matches
        records = picked
    return records


def branch_condition(parent: ExecutionRecord, action: str | None, plan: ForkPlan) -> dict[str, Any]:
    """The branch's condition: the run condition it descends from, plus the action and the fork
    settings that shape the continuation (so `evaluate` on forks.jsonl reports each action and
    sampling setting as its own condition). A branch of a branch adds `fork.depth`; a replay's
    action is `replay`."""
    condition = {**base_condition(parent.condition), "fork.action": action or REPLAY_KIND}
    if action in ("SEARCH", "SWITCH"):
        condition["fork.search_budget"] = plan.search_budget
    if action == "SWITCH":
        condition["fork.switch_source"] = plan.switch_source
    condition["fork.temperature"] = plan.temperature
    condition["fork.top_p"] = plan.top_p
    depth = fork_depth(parent) + 1
    if depth > 1:
        condition["fork.depth"] = depth
    return condition


def checkpoint_matches(checkpoint_id: str, wanted: str) -> bool:
    """A saved state named by its full id, or by the start or end of it (`checkpoints ls` shows
    the last 12 characters: ids of one thread share their leading, time-ordered part)."""
    return checkpoint_id.startswith(wanted) or checkpoint_id.endswith(wanted)


def select_checkpoints(bounds: list[BoundaryInfo], wanted: list[str] | None) -> list[BoundaryInfo]:
    """The boundaries whose checkpoint id matches one of `wanted` (all when None)."""
    if wanted is None:
        return bounds
    return [b for b in bounds if any(checkpoint_matches(b.checkpoint_id, w) for w in wanted)]


def plan_branches(
    saver: Any, store: RunStore, spec: ExperimentSpec, plan: ForkPlan, parents: list[ExecutionRecord],
    *, only_think_before_k: bool = False,
) -> tuple[list[BranchTask], Counter[str]]:
    """Every (parent, boundary, action, repeat) to run, and counts of pairs skipped (illegal at
    their boundary, or SEARCH / SWITCH where the condition offers no search: `…@no-search`).

    With one execution and one boundary kind (or one saved state) selected, an illegal action is
    an error; with several, illegal pairs are skipped and counted. SWITCH to the state's own
    source is always an error.
    """
    specs = condition_specs(spec)
    strict = len(parents) == 1 and (len(plan.boundaries) == 1 or len(plan.checkpoints or []) == 1)
    tasks: list[BranchTask] = []
    skipped: Counter[str] = Counter()
    reader = state_reader(saver)
    found: set[str] = set()
    for parent in parents:
        resolved = specs.get(_condition_key(base_condition(parent.condition)))
        if resolved is None:
            raise InputError(
                f"execution {parent.execution_id}: its condition {parent.condition} is not in "
                f"{store.run_dir / 'spec.yaml'}"
            )
        if plan.switch_source and "SWITCH" in plan.actions and plan.switch_source not in resolved.retrieval.sources:
            raise InputError(
                f"--switch-source: unknown source {plan.switch_source!r} "
                f"(sources of this run: {', '.join(sorted(resolved.retrieval.sources))})"
            )
        bounds = list_boundaries(saver, parent.execution_id, reader)
        if not bounds:
            raise InputError(
                f"execution {parent.execution_id[:12]}: no saved states in the checkpoint store "
                "(fork with the same --checkpoints as the run)"
            )
        searchable = offers_search(resolved)
        for b in select_checkpoints(bounds, plan.checkpoints):
            found.add(b.checkpoint_id)
            if plan.checkpoints is None and b.kind not in plan.boundaries:
                continue
            if only_think_before_k and not (b.kind in ("initial", "after_search_k") and b.searches < parent.search_calls):
                continue
            for action in plan.actions:
                if action not in LEGAL_ACTIONS[b.kind]:
                    if strict:
                        check_action(action, b.boundary, f"execution {parent.execution_id[:12]}: ")
                    skipped[f"{action}@{b.kind}"] += 1
                    continue
                if action in ("SEARCH", "SWITCH") and not searchable:
                    skipped[f"{action}@no-search"] += 1
                    continue
                if action == "SWITCH" and not plan.switch_source:
                    raise InputError("SWITCH needs a source to switch to (--switch-source NAME)")
                if action == "SWITCH" and plan.switch_source == b.source:
                    raise IllegalActionError(
                        f"--switch-source {plan.switch_source}: that is the current source of the state at "
                        f"{b.boundary} of execution {parent.execution_id[:12]} (SWITCH needs another source)"
                    )
                tasks += branch_tasks(parent, b, action, plan, resolved)
    if plan.checkpoints is not None:
        missing = [c for c in plan.checkpoints if not any(checkpoint_matches(f, c) for f in found)]
        if missing:
            raise InputError(
                f"--checkpoint {missing[0]}: no saved state of the selected executions has this id "
                "(see `branchpoint checkpoints ls RUN_DIR --wide`)"
            )
    return tasks, skipped


def branch_tasks(
    parent: ExecutionRecord, b: BoundaryInfo, action: str | None, plan: ForkPlan, resolved: ExperimentSpec
) -> list[BranchTask]:
    """The plan's repeats of one action (None: a replay) at one saved state."""
    parent_ref = {"execution_id": parent.execution_id, "checkpoint_id": b.checkpoint_id, "boundary": b.boundary}
    condition = branch_condition(parent, action, plan)
    kind = action if action is not None else REPLAY_KIND
    return [
        BranchTask(parent, b, action, repeat, resolved,
                   execution_id(parent.run_id, condition, parent.question_id, parent_ref, kind, repeat), condition)
        for repeat in range(plan.repeats)
    ]  # fmt: skip


def plan_study(
    saver: Any, store: RunStore, spec: ExperimentSpec, plan: ForkPlan, parents: list[ExecutionRecord]
) -> tuple[list[BranchTask], Counter[str]]:
    """The branches of a whole fork study: the plan's, plus (with `minimal_search`) THINK at
    every `initial` / `after_search_k` boundary before each parent's last search; and the counts
    of illegal pairs skipped."""
    tasks, skipped = plan_branches(saver, store, spec, plan, parents)
    if plan.minimal_search:
        think_plan = plan.model_copy(update={"actions": ["THINK"], "boundaries": ["initial", "after_search_k"]})
        extra, _ = plan_branches(saver, store, spec, think_plan, parents, only_think_before_k=True)
        known = {t.execution_id for t in tasks}
        tasks += [t for t in extra if t.execution_id not in known]
    return tasks, skipped


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


def run_branch(graph: Any, ctx: AgentContext, task: BranchTask, saver: Any, plan: ForkPlan) -> ExecutionRecord:
    """Run one branch (or replay) on its own thread, seeded from the parent's checkpoint."""
    values = checkpoint_values(saver, task.parent.execution_id, task.boundary.checkpoint_id, reader=graph)
    if task.action is None:
        state, cap = replay_input(values), task.spec.agent.search_cap
    else:
        state, cap = branch_input(values, task.action, search_budget=plan.search_budget, switch_source=plan.switch_source)
    ctx.search_cap = cap
    parent = task.parent
    identity = dict(
        execution_id=task.execution_id, run_id=parent.run_id,
        condition=task.condition, question_id=parent.question_id,
        question=parent.question, answerable=parent.answerable, category=parent.category,
        gold_answers=parent.gold_answers, stratum=parent.stratum, support_group=parent.support_group,
        parent={"execution_id": parent.execution_id, "checkpoint_id": task.boundary.checkpoint_id,
                "boundary": task.boundary.boundary},
        branch=task.action, repeat=task.repeat, sampling=plan.sampling(task.seed_key),
        **({"kind": REPLAY_KIND} if task.action is None else {}), **simulated_marker(task.spec),
    )  # fmt: skip
    config = {"configurable": {"thread_id": task.execution_id}, "recursion_limit": recursion_limit(cap)}
    clear_thread(saver, task.execution_id)
    start = time.perf_counter()
    try:
        final, ids = invoke_recording(graph, state, config, ctx)
    except TransportError as exc:
        return incomplete_record(identity, time.perf_counter() - start, str(exc))
    wall = time.perf_counter() - start
    record = record_from_state(final, identity, wall, ids, searches_before=int(values.get("searches", 0)))
    extra = record.model_dump()
    extra["prefix"] = _prefix(parent, values)
    extra["directive"] = state["directive"]
    return ExecutionRecord.model_validate(extra)


def _run_tasks(
    tasks: list[BranchTask], store: RunStore, saver: Any, plan: ForkPlan, summary: ForkSummary,
    model_opener: ModelOpener, progress: bool, label: str, *, out_file: str = FORKS_FILE,
    log_requests: bool = False,
) -> None:

    def record(rec: ExecutionRecord) -> None:  # in this thread, after the worker stored it
        summary.ran += 1
        summary.statuses[rec.status] = summary.statuses.get(rec.status, 0) + 1
        bar.update(bar_task, advance=1)

    groups: dict[str, list[BranchTask]] = {}
    for t in tasks:
        groups.setdefault(t.spec.model.model_dump_json(), []).append(t)
    pool = SourcePool(progress=False, cache_path=store.run_dir / "retrieval_cache.sqlite")
    graphs: dict[str, Any] = {}
    with ExitStack() as stack, Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        disable=not progress,
    ) as bar:
        stack.callback(pool.close)
        bar_task = bar.add_task(label, total=len(tasks))
        for items in groups.values():
            with ExitStack() as group, model_opener(items[0].spec, store.run_dir) as opened:
                opened = with_request_log(opened, store.run_dir, log_requests, group)
                client = limit_connections(opened, items[0].spec.model.max_connections or plan.concurrency)

                def one(task: BranchTask) -> ExecutionRecord:
                    # an independent draw: the plan's sampling with this branch's own seed
                    ctx = agent_context(task.spec, client.with_sampling(**plan.sampling(task.seed_key)), pool)
                    current_execution.set(task.execution_id)
                    rec = run_branch(graphs[task.spec.agent.policy], ctx, task, saver, plan)
                    rec = store.append(rec, out_file)  # durable before it counts as done; counted as written
                    return rec

                for t in items:  # open sources and compile graphs before the threads start
                    pool.search_tool(t.spec)
                    if t.spec.agent.policy not in graphs:
                        # a module:function policy imports from the working directory (see README)
                        graphs[t.spec.agent.policy] = build_graph(resolve_policy(t.spec.agent.policy), saver)
                run_concurrently(items, one, plan.concurrency, record)


def fork_records(run_dir: Path, file: str = FORKS_FILE) -> list[ExecutionRecord]:
    """The branch records of a run (or its replays, `file=REPLAYS_FILE`); empty when none yet."""
    path = Path(run_dir) / file
    return read_records(path) if path.is_file() else []


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
        by_checkpoint.setdefault((b.parent.execution_id, b.parent.checkpoint_id), []).append(is_correct(b, judge))
    out = []
    reader = state_reader(saver)
    for parent in judged_parents.values():
        k = parent.search_calls
        if k == 0 or not is_correct(parent, judge):
            continue
        minimal = k
        for b in list_boundaries(saver, parent.execution_id, reader):
            if b.kind in ("initial", "after_search_k") and b.searches < minimal:
                votes = by_checkpoint.get((parent.execution_id, b.checkpoint_id))
                if votes and sum(votes) * 2 >= len(votes):
                    minimal = b.searches
        out.append({
            "execution_id": parent.execution_id, "question_id": parent.question_id,
            "condition": parent.condition, "searches": k, "minimal_searches": minimal, "judge": judge,
        })  # fmt: skip
    return out


def _open_run(run_dir: str | Path, checkpoints: str | None) -> tuple[RunStore, ExperimentSpec]:
    store = RunStore(run_dir)
    if not (store.run_dir / "spec.yaml").is_file() or not store.executions_path.is_file():
        raise InputError(f"{store.run_dir}: not a run directory (expected spec.yaml and executions.jsonl)")
    if checkpoints is None and not store.checkpoints_path.is_file():
        raise InputError(f"{store.checkpoints_path}: not found (the run has no checkpoints to fork)")
    return store, load_spec(store.run_dir / "spec.yaml")


def _run_missing(
    tasks: list[BranchTask], store: RunStore, saver: Any, plan: ForkPlan, summary: ForkSummary,
    model_opener: ModelOpener, progress: bool, label: str, out_file: str, log_requests: bool,
) -> None:
    """Run the planned branches (or replays) not yet recorded in `out_file`, after cutting a torn
    last line (a study killed mid-append: that branch is redone)."""
    summary.planned = len(tasks)
    store.repair_torn_tail(out_file)
    done = {r.execution_id for r in fork_records(store.run_dir, out_file) if r.status != "incomplete"}
    todo = [t for t in tasks if t.execution_id not in done]
    summary.skipped_done = len(tasks) - len(todo)
    if todo:
        _run_tasks(todo, store, saver, plan, summary, model_opener, progress, label, out_file=out_file,
                   log_requests=log_requests)  # fmt: skip


def fork_run(
    run_dir: str | Path,
    plan: ForkPlan,
    *,
    progress: bool = True,
    model_opener: ModelOpener = default_model_opener,
    checkpoints: str | None = None,
    log_requests: bool = False,
) -> ForkSummary:
    """Run a fork study on a run directory (and, with `minimal_search`, the minimal-search study).

    `plan.executions` / `plan.checkpoints` may name fork branches too (forks of forks).
    `log_requests` appends every request body to RUN_DIR/requests.jsonl.
    """
    plan.check()
    started = time.perf_counter()
    store, spec = _open_run(run_dir, checkpoints)
    parents = parent_records(store, plan.executions, include_branches=plan.checkpoints is not None)
    summary = ForkSummary(run_dir=store.run_dir)
    with ExitStack() as stack:
        stack.enter_context(run_lock(store.run_dir, "fork"))  # one writer per run folder
        saver = stack.enter_context(open_checkpointer(store.checkpoint_target(checkpoints)))
        tasks, skipped = plan_study(saver, store, spec, plan, parents)
        summary.illegal_skipped = dict(skipped)
        _run_missing(tasks, store, saver, plan, summary, model_opener, progress, f"fork {spec.name}",
                     FORKS_FILE, log_requests)  # fmt: skip
        if plan.minimal_search:
            summary.minimal = minimal_searches(parents, fork_records(store.run_dir), saver, plan.judge)
            path = store.run_dir / MINIMAL_FILE
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
) -> ForkSummary:
    """Replay one execution (or branch) from a saved state: the policy decides again, with no
    directive, `plan.repeats` times, each on its own new thread, recorded in RUN_DIR/replays.jsonl
    (kind `replay`, `parent` = the saved state). The original thread is never written to.

    The saved state is `plan.checkpoints[0]` (an id or unique prefix) or, by default, the
    execution's `initial` boundary. Reruns skip replays already recorded.
    """
    plan.check()
    started = time.perf_counter()
    store, spec = _open_run(run_dir, checkpoints)
    parents = parent_records(store, [execution])
    summary = ForkSummary(run_dir=store.run_dir)
    with ExitStack() as stack:
        stack.enter_context(run_lock(store.run_dir, "replay"))  # one writer per run folder
        saver = stack.enter_context(open_checkpointer(store.checkpoint_target(checkpoints)))
        parent = parents[0]
        resolved = condition_specs(spec).get(_condition_key(base_condition(parent.condition)))
        if resolved is None:
            raise InputError(f"execution {parent.execution_id}: its condition {parent.condition} is not in the run's spec")
        bounds = list_boundaries(saver, parent.execution_id, state_reader(saver))
        chosen = select_checkpoints(bounds, plan.checkpoints) if plan.checkpoints else bounds[:1]
        if len(chosen) != 1:
            what = "no" if not chosen else str(len(chosen))
            raise InputError(
                f"--checkpoint {(plan.checkpoints or [''])[0]}: {what} saved states of execution "
                f"{parent.execution_id[:12]} match (see `branchpoint checkpoints ls RUN_DIR --execution {execution} --wide`)"
            )
        tasks = branch_tasks(parent, chosen[0], None, plan, resolved)
        _run_missing(tasks, store, saver, plan, summary, model_opener, progress, f"replay {spec.name}",
                     REPLAYS_FILE, log_requests)  # fmt: skip
    summary.wall_s = time.perf_counter() - started
    return summary


__all__ = [
    "FORKS_FILE",
    "REPLAYS_FILE",
    "ForkPlan",
    "ForkSummary",
    "IllegalActionError",
    "fork_records",
    "fork_run",
    "minimal_searches",
    "replay_run",
]
