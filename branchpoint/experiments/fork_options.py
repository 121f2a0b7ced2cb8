"""The fork plan that `branchpoint fork` runs, from its options: flags, `--set` overrides of
fork-plan fields, and `--sample A,U` (the executions of a balanced seeded sample of the run's
questions). Bad settings are one InputError naming the field, with a did-you-mean hint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.datasets import balanced_sample
from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.experiments.spec import ForkPlan, apply_overrides, did_you_mean
from branchpoint.experiments.store import RunStore


def fork_plan_from_options(
    run_dir: Path, settings: dict[str, Any], sets: list[str], sample: tuple[int, int] | None = None
) -> ForkPlan:
    """The fork plan from the options, `--set` overrides and a balanced `sample` (answerable,
    unanswerable counts) of the run's questions."""
    data = apply_overrides(settings, sets)
    if sample is not None:
        if data.get("executions"):
            raise InputError("--sample and --execution: give one of them (both choose the executions to fork)")
        data["executions"] = sampled_executions(run_dir, sample, int(data.get("seed") or 0))
    try:
        return ForkPlan.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            hint = did_you_mean(key, ForkPlan.model_fields) if err.get("type") == "extra_forbidden" else ""
            parts.append(f'field "{key}": {err["msg"]}{hint}')
        raise InputError(f"fork settings: {'; '.join(parts)}") from None


def sampled_executions(run_dir: Path, counts: tuple[int, int], seed: int) -> list[str]:
    """The ids of a run's own executions whose questions a balanced seeded sample of `counts`
    (answerable, unanswerable) draws."""
    records = [r for r in RunStore(run_dir).records() if r.parent is None and r.kind is None]
    if not records:
        raise InputError(f"{run_dir}: no executions to sample from (run `branchpoint run` first)")
    questions: dict[str, Question] = {}
    for r in records:
        questions.setdefault(
            r.question_id,
            Question(
                id=r.question_id,
                question=r.question or "?",
                answerable=r.answerable,
                category=r.category,
            ),
        )
    chosen = {q.id for q in balanced_sample(list(questions.values()), counts[0], counts[1], seed=seed)}
    return [r.execution_id for r in records if r.question_id in chosen]
