"""Planning a run: which questions it asks and which executions (condition x epoch x question) it runs.

The plan is deterministic (each execution has an id made from the run, its condition, the question
and its epoch), so the runner, the shard driver and the verifier all plan the same executions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchpoint.agents import resolve_policy
from branchpoint.datasets import balanced_sample, load_questions
from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.experiments.multiturn import history_for
from branchpoint.experiments.spec import ExperimentSpec, condition_fingerprint, expand_conditions
from branchpoint.retrieval.sources.interventions import InterventionSourceSpec
from branchpoint.traces import execution_id


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
