"""The fork plan that `branchpoint fork` (and `replay`) runs: the run's spec.yaml `fork` section
first, then the options the user gave, `--set` overrides of fork-plan fields, and `--sample A,U`
(the executions of a balanced seeded sample of the run's questions). Bad settings are one
InputError naming the field, with a did-you-mean hint. Each invocation's plan and where its
settings came from is appended to RUN_DIR/fork_settings.jsonl.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.datasets import balanced_sample
from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.experiments.spec import ForkPlan, apply_overrides, did_you_mean
from branchpoint.experiments.store import RunStore
from branchpoint.experiments.study_settings import StudySettings, fork_settings
from branchpoint.registry import merge_settings
from branchpoint.traces import FORK_SETTINGS_FILE


def fork_plan_from_options(
    run_dir: Path,
    given: dict[str, Any],
    sets: list[str],
    sample: tuple[int, int] | None = None,
    *,
    replay: bool = False,
) -> tuple[ForkPlan, StudySettings]:
    """The fork plan of the run's spec (its `fork` section) updated by the options the user gave
    (`given`: fork-plan fields), `--set` overrides and a balanced `sample` (answerable,
    unanswerable counts) of the run's questions; and where each setting came from. `replay`:
    only the sampling and concurrency fields come from the spec (`study_settings.REPLAY_FIELDS`)."""
    cli = merge_settings(given, apply_overrides({}, sets, source="--set"))
    if sample is not None:
        if cli.get("executions"):
            raise InputError("--sample and --execution: give one of them (both choose the executions to fork)")
        seed = cli.get("seed", fork_settings(run_dir, {}, replay).values.get("seed"))
        cli["executions"] = sampled_executions(run_dir, sample, int(seed or 0))
    settings = fork_settings(run_dir, cli, replay)
    return _validated(settings.values), settings


def record_fork_settings(run_dir: Path, command: str, plan: ForkPlan, settings: StudySettings, summary: Any) -> None:
    """Append one line to RUN_DIR/fork_settings.jsonl: the command, the plan it ran (every
    field), where its settings came from, and what it did (planned, ran, statuses)."""
    line = {
        "command": command,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {**plan.model_dump(mode="json"), **settings.source()},
        "planned": summary.planned,
        "ran": summary.ran,
        "statuses": dict(summary.statuses),
    }
    with (Path(run_dir) / FORK_SETTINGS_FILE).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def _validated(data: dict[str, Any]) -> ForkPlan:
    """The fork plan of `data`, or one InputError naming each bad field (did-you-mean for unknown)."""
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
