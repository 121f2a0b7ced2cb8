"""The sweep run of a validation study: repeated executions over an effort × search-cap grid, for
the estimates a single run has none of (epochs, the 2-D frontier, budget use).

Beside its fork study every study runs one more ordinary run (`run_sweep`): the study's
questions and agent, `run.epochs: EPOCHS`, swept over `model.reasoning_effort` ∈ EFFORTS (the first only on the
completion endpoint: `efforts`) and `agent.search_cap` ∈ CAPS, with no fork. Its metrics.json (`sweep_metrics`, evaluated again
with every evaluation mutant) holds `epochs`, `effort_cap_frontier` and `budgets`; its truth
(`sweep_truth`) is, per condition, the truth model of that condition's agent (its effort and
cap) for every question of the run: P(success), expected searches and tokens, and the search
count's distribution; epochs are counted from the raw records (`sim.run_truth`).
`sweep_compare` sets the estimates beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchpoint.defaults import RULE_JUDGE
from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import MetricsConfig, compute_metrics
from branchpoint.experiments.runner import run_experiment
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.spec.run import RunSpec
from branchpoint.experiments.store import RunStore
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.run_truth import epochs_by_condition
from branchpoint.sim.truth import POLICY_STYLES, Style, Value
from branchpoint.traces import read_records
from branchpoint.validation.study_setup import MAIN_SOURCE, StudySettings, shared_server_opener, study_spec
from branchpoint.validation.truth_setup import search_function, truth_model

#: The grid and the epochs of the sweep run: 2 × 2 conditions (1 × 2 on the completion endpoint), 3 epochs each (pass@k, pass^k for
#: k ≤ 3, a flip rate over 3 epochs), over the study's run questions.
EFFORTS: tuple[str, ...] = ("low", "high")
CAPS: tuple[int, ...] = (1, 3)
EPOCHS = 3
EFFORT_KEY, CAP_KEY = "model.reasoning_effort", "agent.search_cap"


@dataclass
class ConditionTruth:
    """One condition of the sweep run: its effort and cap, and per question its exact value,
    search-count distribution (None where the truth model has none) and epochs run."""

    label: str
    effort: str
    cap: int
    values: dict[str, Value]
    counts: dict[str, dict[int, float]] | None
    epochs: dict[str, int]


@dataclass
class SweepTruth:
    """The truth of a study's sweep run, by condition label (`conditions.condition_label`, the join key)."""

    run_dir: Path
    conditions: dict[str, ConditionTruth]
    costs_modelled: bool


def efforts(settings: StudySettings, style: str | None = None) -> tuple[str, ...]:
    """The efforts swept: both on chat protocols; on the completion endpoint, where the simulator
    ignores the reasoning effort and a second effort would resend the same requests, the first.
    `style`: the policy's protocol where it is known only from a first run (a user policy)."""
    chat = settings.chat if style is None else style != "completion"
    return EFFORTS if chat else EFFORTS[:1]


def sweep_spec(settings: StudySettings, seed: int, served_name: str, style: str | None = None) -> ExperimentSpec:
    """The study's spec with epochs and the effort × cap sweep, and a model seed of its own (its
    requests are never the fork study's)."""
    spec = study_spec(settings, seed, served_name)
    return spec.model_copy(
        update={
            "name": f"{spec.name}-sweep",
            "model": spec.model.model_copy(update={"seed": (spec.model.seed or 0) + 7}),
            "sweep": {EFFORT_KEY: list(efforts(settings, style)), CAP_KEY: list(CAPS)},
            "run": RunSpec(epochs=EPOCHS),
        }
    )


def sweep_dir(run_dir: Path) -> Path:
    """Where a study's sweep run lives: beside its fork study (removed with it)."""
    return run_dir.parent / f"{run_dir.name}-sweep"


def run_sweep(
    settings: StudySettings, seed: int, out: Path, *, base_url: str, served_name: str, style: str | None = None
) -> ExperimentSpec:
    """Run the sweep into `out` on the shared simulated server; returns its spec."""
    spec = sweep_spec(settings, seed, served_name, style)
    run_experiment(
        spec, out, progress=False, model_opener=shared_server_opener(base_url), concurrency=settings.concurrency
    )
    return spec


def sweep_truth(
    settings: StudySettings, spec: ExperimentSpec, run_dir: Path, *, style: Style | None = None
) -> SweepTruth:
    """The truth of the sweep run in `run_dir` (see the module docstring)."""
    from branchpoint.datasets import load_questions
    from branchpoint.sim.profile import load_profile

    profile = load_profile(settings.profile)
    questions = load_questions(settings.questions)
    bank, by_id = QuestionBank(questions), {q.id: q for q in questions}
    chosen: Style = style or POLICY_STYLES[settings.policy]
    pool = SourcePool(progress=False)
    out: dict[str, ConditionTruth] = {}
    try:
        search = search_function(pool, spec)
        for cond, epochs in epochs_by_condition(run_dir).values():
            effort, cap = str(cond[EFFORT_KEY]), int(cond[CAP_KEY])
            cspec = spec.model_copy(
                update={
                    "model": spec.model.model_copy(update={"reasoning_effort": effort}),
                    "agent": spec.agent.model_copy(update={"search_cap": cap}),
                }
            )
            truth = truth_model(settings, cspec, profile, bank, chosen, search)
            values = {q: truth.natural(by_id[q], cap, MAIN_SOURCE) for q in sorted(epochs)}
            counter = getattr(truth, "search_counts", None)
            counts = {q: counter(by_id[q], cap, MAIN_SOURCE) for q in sorted(epochs)} if counter else None
            label = condition_label(cond)
            out[label] = ConditionTruth(label, effort, cap, values, counts, dict(epochs))
    finally:
        pool.close()
    return SweepTruth(Path(run_dir), out, chosen == "completion")


def sweep_metrics(settings: StudySettings, seed: int, sweep: SweepTruth) -> dict[str, Any]:
    """metrics.json of the sweep run (not written: validate reads it from here), with the
    spec's sweep order of efforts."""
    from branchpoint.evaluation.frontier import spec_sweep

    records = read_records(RunStore(sweep.run_dir).executions_path)
    judged = judge_records(records, RULE_JUDGE)
    cfg = MetricsConfig(bootstrap=settings.resamples, seed=seed)
    return compute_metrics(judged, RULE_JUDGE, cfg, sweep=spec_sweep(sweep.run_dir))
