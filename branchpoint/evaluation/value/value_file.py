"""value.json as a pydantic model: `ValueReport`, written by `study.value_study` and read back by
`read_value` (the value report, its terminal tables and the figures read this model).

Schema-versioned like inspect_ai's eval logs: `schema_version` is required (value.json has
always carried it); a newer version or a malformed file is an InputError that names the file
and the field. Scores are computed on the test rows; every `interval` is a percentile interval
of the support-component bootstrap (None when intervals are off or withheld). Keys a later
minor version adds are kept, so a file read and written back is unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from branchpoint.evaluation.report_types import FileModel, Interval, Num, dump_json, read_model, validate
from branchpoint.evaluation.value.seed_models import (
    FailureRates,
    GainSpread,
    Power,
    RouterDifferences,
    SimultaneousIntervals,
    StrataPanels,
)
from branchpoint.provenance import Provenance
from branchpoint.traces import VALUE_FILE

VALUE_SCHEMA_VERSION = 1
_WHAT = "the value.json of `branchpoint value`"


class Estimate(FileModel):
    """A point estimate and its interval."""

    value: Num | None = None
    interval: Interval = None


class Difference(FileModel):
    """A paired difference and its interval."""

    difference: Num | None = None
    interval: Interval = None


class StateCounts(FileModel):
    """How many records and states were read, scored, split and left out."""

    records: int | None = None
    incomplete_records: int | None = None
    other_action_records: int | None = None
    judged_records: int | None = None
    judge_calls: int | None = None
    forked_states: int | None = None
    scored: int | None = None
    dev: int = 0
    test: int | None = None
    excluded: dict[str, int] = Field(default_factory=dict)
    components: dict[str, int] = Field(default_factory=dict)
    test_strata: dict[str, int] = Field(default_factory=dict)
    mean_repeats: dict[str, Num] = Field(default_factory=dict)


class ForecasterInfo(FileModel):
    """Where a scored forecast came from: registered, file, given, calibrated or composed."""

    kind: str
    fitted: bool | None = None
    raw: str | None = None
    map: str | None = None
    info: dict[str, Any] | None = None


class BrierParts(FileModel):
    """Brier and its exact split: level error + ¼ gain error + outcome variance."""

    brier: Num | None = None
    level: Num | None = None
    gain: Num | None = None
    variance: Num | None = None


class OracleRange(FileModel):
    """The zero-price oracle improvement's range from θ̂ (and the interval around it)."""

    lower: Num | None = None
    upper: Num | None = None
    interval: Interval = None
    formula: str | None = None
    interval_from: dict[str, Any] | None = None


class GainR2Undefined(FileModel):
    """The share of resamples where R²_Δ is undefined (V_Δ ≤ 0), the share tolerated, and why
    the R²_Δ intervals are withheld (None: reported)."""

    share: Num | None = None
    max_share: Num | None = None
    rule: str | None = None
    withheld: str | None = None


class LevelSplit(FileModel):
    """A forecaster's Brier contrast against a constant-level forecaster, split."""

    reference_level: Num | None = None
    level_total: Estimate = Field(default_factory=Estimate)
    level_mean_bias: Estimate = Field(default_factory=Estimate)
    level_variation: Estimate = Field(default_factory=Estimate)
    gain_quarter: Estimate = Field(default_factory=Estimate)


class RouterScore(FileModel):
    """A router's mean utility at one price, its search rate and tokens, and what it chose."""

    utility: Num | None = None
    search_rate: Num | None = None
    mean_tokens: Num | None = None


class Utility(FileModel):
    """Routers' utility U = Y − λ·T/1000 per price."""

    prices: list[Num] = Field(default_factory=list)
    tau_grid: list[Num] = Field(default_factory=list)
    chosen_on: str = "dev"
    in_sample: bool = False
    oracle_range: OracleRange = Field(default_factory=OracleRange)
    oracle_plugin_optimistic: Num | None = None
    skipped_routers: dict[str, str] = Field(default_factory=dict)
    by_price: dict[str, dict[str, RouterScore]] = Field(default_factory=dict)


class FactorialCell(FileModel):
    utility: Num | None = None
    difference: Num | None = None
    interval: Interval = None


class FactorialPrice(FileModel):
    over_best_constant: dict[str, FactorialCell] = Field(default_factory=dict)
    contrasts: dict[str, Difference] = Field(default_factory=dict)


class Factorial(FileModel):
    """The decision factorial: fixed vs query-specific gain × fixed vs query-specific cost."""

    fixed_terms: dict[str, Num | None] = Field(default_factory=dict)
    fixed_terms_from: str | None = None
    selection_draws: str | None = None
    by_price: dict[str, FactorialPrice] = Field(default_factory=dict)


class Intervals(FileModel):
    """How the intervals were formed, and the intervals of the top-level scores."""

    method: str | None = None
    resamples: int = 0
    seed: int = 0
    level: Num = 0.95
    withheld: str | None = None
    gain_r2_undefined: GainR2Undefined | None = None
    studentized: dict[str, Interval] = Field(default_factory=dict)
    brier: dict[str, Interval] = Field(default_factory=dict)
    gain_risk: dict[str, Interval] = Field(default_factory=dict)
    gain_r2: dict[str, Interval] = Field(default_factory=dict)
    theta: Interval = None
    mean_gain: Interval = None
    gain_variance: Interval = None
    utility: dict[str, dict[str, Interval]] = Field(default_factory=dict)


class ObjectiveEntry(FileModel):
    think: Estimate = Field(default_factory=Estimate)
    search: Estimate = Field(default_factory=Estimate)
    gain: Estimate = Field(default_factory=Estimate)
    gain_minus_reference: Estimate | None = None


class Objectives(FileModel):
    """The scoring-objective comparison on the same executions (or why it was skipped)."""

    skipped: str | None = None
    reference: str | None = None
    objectives: dict[str, ObjectiveEntry] | None = None
    incomplete_records: int = 0
    note: str | None = None
    reference_judge: str | None = None


class BoundSummary(FileModel):
    """A contrast under the original labels and at the shared-label bounds."""

    original: Num | None = None
    lower: Num | None = None
    upper: Num | None = None
    uncertain_pairs: int = 0
    sampling_se: list[Num | None] = Field(default_factory=list)
    interval: Interval = None


class AuditBounds(FileModel):
    judges: list[str] = Field(default_factory=list)
    gain_vs_mean_gain: dict[str, BoundSummary] = Field(default_factory=dict)
    gain_vs_zero: dict[str, BoundSummary] = Field(default_factory=dict)
    brier_vs_mean: dict[str, BoundSummary] = Field(default_factory=dict)
    intervals_withheld: str | None = None
    audit_sample: dict[str, Any] | None = None


class ThreeActionForecast(FileModel):
    outcome_error: Estimate = Field(default_factory=Estimate)
    gain_loss: Estimate = Field(default_factory=Estimate)


class ThreeAction(FileModel):
    """STOP / SAME / SWITCH at pending queries: forecasts' errors and routers' utility."""

    states: dict[str, int] = Field(default_factory=dict)
    forecasts: dict[str, ThreeActionForecast] = Field(default_factory=dict)
    utility: dict[str, dict[str, Estimate]] = Field(default_factory=dict)
    best_constant: dict[str, Any] = Field(default_factory=dict)
    chosen_on: str | None = None
    intervals_withheld: str | None = None


class CurvePoint(FileModel):
    gain_risk: Num | None = None
    gain_r2: Num | None = None
    gain_r2_band: list[Num | None] = Field(default_factory=list)
    brier: Num | None = None
    brier_band: list[Num | None] = Field(default_factory=list)
    mean_guard_share: Num | None = None


class LargestBudget(FileModel):
    budget: int
    gain_r2_interval: Interval = None
    gain_r2_undefined_share: Num | None = None
    gain_r2_withheld: str | None = None
    brier_interval: Interval = None
    withheld: str | None = None


class CurveFamily(FileModel):
    by_budget: dict[str, CurvePoint] = Field(default_factory=dict)
    largest_budget: LargestBudget | None = None


class LearningCurves(FileModel):
    """Matched-configuration learning curves (or why they were skipped)."""

    skipped: str | None = None
    outer_folds: int | None = None
    samples: int | None = None
    families: dict[str, CurveFamily] = Field(default_factory=dict)


class CompositionScores(FileModel):
    """The composed B/Y forecast scored on the target's test states, against a comparator."""

    brier: Estimate = Field(default_factory=Estimate)
    gain_risk: Estimate = Field(default_factory=Estimate)
    gain_r2: Estimate = Field(default_factory=Estimate)
    brier_minus_comparator: Estimate | None = None
    gain_risk_minus_comparator: Estimate | None = None


class ThreePairComposition(FileModel):
    """Three-pair composition (search-value study, Appendix D, Eqs. 7–9): the target pair B/Y's
    forecast from the histories of A/X, A/Y and B/X, scored on the target's test states."""

    forecaster: str = "three_pair"
    histories: dict[str, str] = Field(default_factory=dict, description="A/X, A/Y, B/X: the fork studies read.")
    matched_questions: int = 0
    unmatched_states: int = 0
    design: str | None = Field(None, description="same_questions or disjoint (the histories ran other questions).")
    fallbacks: dict[str, int] | None = None
    comparator: str | None = None
    scores: CompositionScores = Field(default_factory=CompositionScores)
    formula: str | None = None


class ConsistencyAccounting(FileModel):
    """The two-probe router's token accounting against always SEARCH (search-value study §5.5):
    tokens per state, success in reward units; `skipped` says why the router was not scored."""

    skipped: str | None = None
    against: str | None = None
    note: str | None = None
    agreement_rate: Estimate | None = None
    tokens_saved: Estimate | None = None
    probe_tokens: Estimate | None = None
    net_tokens_saved: Estimate | None = None
    success_cost: Estimate | None = None


class Share(FileModel):
    """A ratio of Brier improvements, its interval, the share of resamples where it is
    undefined (denominator ≤ 0), and why its value or interval is withheld."""

    value: Num | None = None
    interval: Interval = None
    undefined_share: Num | None = None
    withheld: str | None = None


class PriorShare(FileModel):
    share: Share = Field(default_factory=Share)
    level_share: Share = Field(default_factory=Share)


class TaskPriorShare(FileModel):
    """The share of each forecaster's Brier improvement over the global means recovered by the
    task-stratum means, and the share carried by its success-level term (§5.1)."""

    skipped: str | None = None
    global_means: str | None = None
    task_prior: str | None = None
    brier_global_means: Num | None = None
    brier_task_prior: Num | None = None
    formula: str | None = None
    forecasters: dict[str, PriorShare] = Field(default_factory=dict)


class SourceSupported(FileModel):
    """Scores on the test states of source-supported questions alone (search-value study,
    Appendix C), from a sampled audit's file (`audit_sample.py`); `skipped` says why not."""

    skipped: str | None = None
    file: str | None = None
    test_questions: int = 0
    test_states: int = 0
    of_test_states: int = 0
    note: str | None = None
    brier: dict[str, Estimate] = Field(default_factory=dict)
    gain_risk: dict[str, Estimate] = Field(default_factory=dict)
    gain_r2: dict[str, Estimate] = Field(default_factory=dict)
    paired: dict[str, dict[str, Difference]] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class DecisionScores(FileModel):
    """The actor's search decisions against need on a set of states: the confusion counts and
    each score with its interval (`decisions`)."""

    n: int = 0
    n_needed: int = 0
    n_searched: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    precision: Estimate = Field(default_factory=Estimate)
    recall: Estimate = Field(default_factory=Estimate)
    f1: Estimate = Field(default_factory=Estimate)
    over_search_rate: Estimate = Field(default_factory=Estimate)
    under_search_rate: Estimate = Field(default_factory=Estimate)


class DecisionQuality(FileModel):
    """Decision-F1 of the parents' search / no-search decisions against each state's need, and
    over- / under-search rates, pooled and per step (decision index k: 0 at `initial`)."""

    available: bool = False
    reason: str | None = None
    need_rule: str | None = None
    need: str | None = None
    excluded: dict[str, int] = Field(default_factory=dict)
    n_states: int | None = None
    all: DecisionScores | None = None
    by_step: dict[str, DecisionScores] = Field(default_factory=dict)


class ValueReport(FileModel):
    """value.json, written by `branchpoint value`: search-value scores of a fork study."""

    schema_version: int = Field(description="Version of this file's layout.")
    source: str = Field(description="The forks.jsonl (or traces file) the study read.")
    settings: dict[str, Any] = Field(description="ValueConfig as used, and the actions compared at each boundary kind.")
    states: StateCounts = Field(description="How many states, per stratum and split, and mean repeats per action.")
    fork_settings: dict[str, Any] | None = Field(
        None,
        description="The fork settings read: per fingerprint its settings and branches; `chosen` "
        "(--fork-settings), `mix_allowed` (--mix-fork-settings), `mixed`, `left_out`.",
    )
    forecasters: dict[str, ForecasterInfo] = Field(
        description="Each forecaster scored, and where its forecasts came from."
    )
    skipped_forecasters: dict[str, str] = Field(
        default_factory=dict, description="Forecasters that could not be scored, with the reason."
    )
    brier: dict[str, BrierParts] = Field(default_factory=dict, description="Per forecaster: Brier and its split.")
    gain_risk: dict[str, Num | None] = Field(
        default_factory=dict, description="Per forecaster: the gain risk L (Eq. 5)."
    )
    gain_r2: dict[str, Num | None] = Field(
        default_factory=dict, description="Per forecaster: gain skill R²_Δ = 1 − L / V_Δ."
    )
    theta: Num | None = Field(None, description="θ̂, the unbiased estimate of E Δ².")
    mean_gain: Num | None = None
    gain_variance: Num | None = Field(None, description="V_Δ.")
    oracle_range: OracleRange | None = None
    paired: dict[str, dict[str, Difference]] = Field(default_factory=dict, description="Paired differences 'a - b'.")
    level_split: dict[str, LevelSplit] = Field(default_factory=dict)
    utility: Utility | None = None
    decision_factorial: Factorial | None = None
    consistency_accounting: ConsistencyAccounting | None = None
    task_prior_share: TaskPriorShare | None = None
    intervals: Intervals = Field(default_factory=Intervals)
    warnings: list[str] = Field(default_factory=list)
    scoring_objectives: Objectives | None = None
    decision_quality: DecisionQuality | None = Field(
        None, description="The parents' search decisions against need: decision-F1, over- / under-search rates."
    )
    audit_bounds: AuditBounds | None = None
    source_supported: SourceSupported | None = None
    three_action: ThreeAction | None = None
    three_pair_composition: ThreePairComposition | None = None
    learning_curves: LearningCurves | None = None
    router_differences: RouterDifferences | None = Field(None, description="Paired router − reference utilities.")
    simultaneous: SimultaneousIntervals | None = Field(None, description="Max-standardised simultaneous intervals.")
    strata_panels: StrataPanels | None = Field(None, description="Per-stratum utilities and scores with intervals.")
    gain_spread: GainSpread | None = Field(None, description="SD of gains, its distribution, repeat noise.")
    power: Power | None = Field(None, description="Power calculation of the paired contrasts.")
    failure_rates: FailureRates | None = Field(None, description="Malformed / length failures per action.")
    supervision_subsets: dict[str, Any] | None = Field(
        None, description="History-fitted vs target-k-fitted forecasters (supervision.py, seed 002 App. D)."
    )
    provenance: Provenance | None = Field(
        None, description="Where the file came from (branchpoint.provenance); absent in older files."
    )


def as_value(report: ValueReport | dict[str, Any], source: str = "value") -> ValueReport:
    """A `ValueReport` from the model itself or from a value dict (as `value_study` returns it)."""
    if isinstance(report, ValueReport):
        return report
    return validate(source, ValueReport, report, _WHAT)


def value_file_text(report: ValueReport | dict[str, Any]) -> str:
    """The text of value.json, through the model (its keys, none added)."""
    return dump_json(as_value(report))


def read_value(path: Path) -> ValueReport:
    """The value.json of a run directory (or the file itself) as a `ValueReport`.

    InputError, naming the file and field, when it is missing, not JSON, without or with a newer
    `schema_version`, or has a field of the wrong kind."""
    path = Path(path)
    source = path / VALUE_FILE if path.is_dir() else path
    hint = f"run `branchpoint value {path}` first"
    return read_model(source, ValueReport, _WHAT, hint, VALUE_SCHEMA_VERSION, default_version=None)
