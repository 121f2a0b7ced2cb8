"""Planning a fork study: which branches (parent, saved state, action, repeat) to run.

Reads a run's recorded executions and branches and their saved states (legal boundaries), and
turns a `ForkPlan` into `BranchTask`s with deterministic execution ids, skipping (and counting)
actions that are not legal at a boundary or need a search the condition does not offer. Running
them is `branchpoint.experiments.forking`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchpoint.checkpoints import list_boundaries
from branchpoint.checkpoints.boundaries import BoundaryInfo
from branchpoint.checkpoints.fork import IllegalActionError, check_action
from branchpoint.checkpoints.values import state_reader
from branchpoint.errors import InputError
from branchpoint.experiments.spec import ExperimentSpec, ForkPlan, expand_conditions
from branchpoint.experiments.store import RunStore
from branchpoint.traces import (
    BOUNDARY_AFTER_SEARCH,
    BOUNDARY_INITIAL,
    FORKS_FILE,
    LEGAL_ACTIONS,
    SPEC_FILE,
    ExecutionRecord,
    execution_id,
    read_records,
)

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
        return json.dumps(
            [self.parent.execution_id, self.boundary.step, self.boundary.boundary, self.condition, self.repeat],
            sort_keys=True,
            default=str,
        )


def condition_key(condition: dict[str, Any]) -> str:
    """A condition as a key: its settings as sorted JSON."""
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
    return {condition_key(c): s for c, s in expand_conditions(spec)}


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


def check_unique_checkpoints(wanted: list[str], bounds: dict[str, list[BoundaryInfo]]) -> None:
    """Refuse a `--checkpoint` that names no saved state of `bounds` (execution id -> its
    boundaries), or several (a short start is shared by every state of a run), listing them."""
    for w in wanted:
        matches = [(eid, b) for eid, bs in bounds.items() for b in bs if checkpoint_matches(b.checkpoint_id, w)]
        if not matches:
            raise InputError(
                f"--checkpoint {w}: no saved state of the selected executions has this id "
                "(see `branchpoint checkpoints ls RUN_DIR --wide`)"
            )
        if len(matches) > 1:
            shown = ", ".join(f"{b.checkpoint_id} ({b.boundary} of {eid[:12]})" for eid, b in matches[:5])
            more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
            raise InputError(
                f"--checkpoint {w}: {len(matches)} saved states match ({shown}{more}); give more of the id "
                "(`branchpoint checkpoints ls RUN_DIR --wide` lists them), or repeat --checkpoint for each"
            )


def plan_branches(
    saver: Any,
    store: RunStore,
    spec: ExperimentSpec,
    plan: ForkPlan,
    parents: list[ExecutionRecord],
    *,
    only_think_before_k: bool = False,
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
    bounds_of = {p.execution_id: list_boundaries(saver, p.execution_id, reader) for p in parents}
    # Saved states named by id are looked for among every execution and branch; a branch with no
    # saved state of its own (STOP answers at once) is no error then, unless all have none.
    by_id = plan.checkpoints is not None and not plan.executions
    if plan.checkpoints is not None and any(bounds_of.values()):
        check_unique_checkpoints(plan.checkpoints, bounds_of)
    for parent in parents:
        resolved = specs.get(condition_key(base_condition(parent.condition)))
        if resolved is None:
            raise InputError(
                f"execution {parent.execution_id}: its condition {parent.condition} is not in "
                f"{store.run_dir / SPEC_FILE}"
            )
        if plan.switch_source and "SWITCH" in plan.actions and plan.switch_source not in resolved.retrieval.sources:
            raise InputError(
                f"--switch-source: unknown source {plan.switch_source!r} "
                f"(sources of this run: {', '.join(sorted(resolved.retrieval.sources))})"
            )
        bounds = bounds_of[parent.execution_id]
        if not bounds:
            if by_id and any(bounds_of.values()):
                continue
            raise InputError(
                f"execution {parent.execution_id[:12]}: no saved states in the checkpoint store "
                "(fork with the same --checkpoints as the run)"
            )
        searchable = offers_search(resolved)
        for b in select_checkpoints(bounds, plan.checkpoints):
            if plan.checkpoints is None and b.kind not in plan.boundaries:
                continue
            if only_think_before_k and not (
                b.kind in (BOUNDARY_INITIAL, BOUNDARY_AFTER_SEARCH) and b.searches < parent.search_calls
            ):
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
    return tasks, skipped


def branch_tasks(
    parent: ExecutionRecord, b: BoundaryInfo, action: str | None, plan: ForkPlan, resolved: ExperimentSpec
) -> list[BranchTask]:
    """The plan's repeats of one action (None: a replay) at one saved state."""
    parent_ref = {"execution_id": parent.execution_id, "checkpoint_id": b.checkpoint_id, "boundary": b.boundary}
    condition = branch_condition(parent, action, plan)
    kind = action if action is not None else REPLAY_KIND
    # The seed base names the draws: another --seed draws new branches (of the same fork settings,
    # so they pool with the first ones), where it used to find them all recorded and draw nothing.
    # Base 0, the default, keeps the ids branches had before.
    keyed = condition if plan.seed == 0 else {**condition, "fork.seed": plan.seed}
    return [
        BranchTask(
            parent,
            b,
            action,
            repeat,
            resolved,
            execution_id(parent.run_id, keyed, parent.question_id, parent_ref, kind, repeat),
            condition,
        )
        for repeat in range(plan.repeats)
    ]


def plan_study(
    saver: Any, store: RunStore, spec: ExperimentSpec, plan: ForkPlan, parents: list[ExecutionRecord]
) -> tuple[list[BranchTask], Counter[str]]:
    """The branches of a whole fork study: the plan's, plus (with `minimal_search`) THINK at
    every `initial` / `after_search_k` boundary before each parent's last search; and the counts
    of illegal pairs skipped."""
    tasks, skipped = plan_branches(saver, store, spec, plan, parents)
    if plan.minimal_search:
        think_plan = plan.model_copy(
            update={"actions": ["THINK"], "boundaries": [BOUNDARY_INITIAL, BOUNDARY_AFTER_SEARCH]}
        )
        extra, _ = plan_branches(saver, store, spec, think_plan, parents, only_think_before_k=True)
        known = {t.execution_id for t in tasks}
        tasks += [t for t in extra if t.execution_id not in known]
    return tasks, skipped


def fork_records(run_dir: Path, file: str = FORKS_FILE) -> list[ExecutionRecord]:
    """The branch records of a run (or its replays, `file=REPLAYS_FILE`); empty when none yet."""
    path = Path(run_dir) / file
    return read_records(path) if path.is_file() else []
