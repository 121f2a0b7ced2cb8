"""An execution's trace record: the fields that say which execution it is, and the record made from the
graph's final state (or an `incomplete` one after a transport fault)."""

from __future__ import annotations

from typing import Any

from branchpoint.agents import AgentContext
from branchpoint.agents.budget import budget_block
from branchpoint.experiments.planning import PlannedExecution
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.traces import ExecutionRecord, Step


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
