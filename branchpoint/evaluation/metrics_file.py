"""metrics.json as a pydantic model: `MetricsReport`, written by `metrics.metrics_json` and read
back by `read_metrics` (the report, the figures and the combined report read this model).

Schema-versioned like inspect_ai's eval logs: `schema_version` (1 today; files written before
the field existed read as version 1), a newer version or a malformed file is an InputError that
names the file and the field. Every statistic `x` of a block has its interval `x_ci` beside it
(see `metrics` for how both are computed); keys a later minor version adds are kept (objects
allow additional keys), so a file read and written back is unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from branchpoint.evaluation.gold_lists import GoldListWarning
from branchpoint.evaluation.report_types import FileModel, Interval, Num, dump_json, read_model, validate
from branchpoint.provenance import Provenance
from branchpoint.traces import METRICS_FILE

METRICS_SCHEMA_VERSION = 1
_WHAT = "the metrics.json of `branchpoint evaluate`"


class Channel(FileModel):
    """One TPC channel (generated, input, search): its total, share of the cost, cost per correct."""

    total: Num | None = None
    share: Num | None = None
    share_ci: Interval = None
    per_correct: Num | None = None
    per_correct_ci: Interval = None


class OutcomeCost(FileModel):
    """Executions of one outcome, their mean cost and their share of the total cost."""

    n: int
    cost_per_execution: Num | None = None
    cost_per_execution_ci: Interval = None
    cost_share: Num | None = None


class Stats(FileModel):
    """The statistics a block may carry, each with its interval (`<name>_ci`); None when undefined
    (an accuracy over no questions, a TPC of nothing) or not reported by that block. Fields in
    the order the files have them."""

    n: int | None = Field(None, description="Scored executions.")
    n_answerable: int | None = None
    n_unanswerable: int | None = None
    n_incomplete: int = 0
    n_unparseable: int = 0
    n_correct: int | None = None
    answer_accuracy: Num | None = None
    answer_accuracy_ci: Interval = None
    abstention_accuracy: Num | None = None
    abstention_accuracy_ci: Interval = None
    overall_accuracy: Num | None = None
    overall_accuracy_ci: Interval = None
    tpc: Num | None = Field(None, description="Tokens Per Correctness; inf when nothing is correct.")
    tpc_ci: Interval = None
    mean_search_calls: Num | None = None
    mean_search_calls_ci: Interval = None
    mean_input_tokens: Num | None = None
    mean_input_tokens_ci: Interval = None
    mean_output_tokens: Num | None = None
    mean_output_tokens_ci: Interval = None
    mean_reasoning_tokens: Num | None = None
    mean_reasoning_tokens_ci: Interval = None
    mean_cost: Num | None = None
    mean_cost_ci: Interval = None
    tpc_channels: dict[str, Channel] | None = None
    tpc_by_outcome: dict[str, OutcomeCost] | None = None
    mean_wall_s: Num | None = None
    mean_wall_s_ci: Interval = None
    mean_model_latency_s: Num | None = None
    mean_model_latency_s_ci: Interval = None
    mean_model_call_latency_s: Num | None = None
    mean_model_call_latency_s_ci: Interval = None
    mean_search_latency_s: Num | None = None
    mean_search_latency_s_ci: Interval = None


class Summary(Stats):
    """The flat metrics of a set of executions (the overall block, a category, a condition)."""

    n: int = Field(description="Scored executions.")


class _ConditionHead(FileModel):
    condition: dict[str, Any] = Field(default_factory=dict, description="The condition's settings.")


class ConditionSummary(Summary, _ConditionHead):
    """One condition: its settings, its summary and its summary per category."""

    by_category: dict[str, Summary] = Field(default_factory=dict)


class Change(FileModel):
    """A metric with and without search and the paired change (with − without)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    with_: Num | None = Field(None, alias="with")
    without: Num | None = None
    change: Num | None = None
    change_ci: Interval = None


class SearchEffect(FileModel):
    """Two conditions of one model that differ only in whether search was on."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    model: str
    with_: str = Field(alias="with", description="The condition label with search.")
    without: str
    paired_on: str | None = None
    n_with: int | None = None
    n_without: int | None = None
    answer_accuracy: Change = Field(default_factory=Change)
    abstention_accuracy: Change = Field(default_factory=Change)
    overall_accuracy: Change = Field(default_factory=Change)
    tpc: Change = Field(default_factory=Change)
    mean_cost: Change | None = None
    mean_search_calls: Change | None = None


class _CapHead(FileModel):
    cap: Num
    condition: str | None = None


class SweepPoint(Stats, _CapHead):
    """The metrics at one search cap."""


class RoiStep(FileModel):
    """Marginal ROI of one step of the cap (accuracy change per 1,000 tokens of added cost)."""

    from_cap: Num
    to_cap: Num
    added_cost_per_query: Num | None = None
    added_cost_per_query_ci: Interval = None
    roi_undefined: str | None = None
    overall_accuracy_per_1k_tokens: Num | None = None
    overall_accuracy_per_1k_tokens_ci: Interval = None
    answer_accuracy_per_1k_tokens: Num | None = None
    answer_accuracy_per_1k_tokens_ci: Interval = None
    abstention_accuracy_per_1k_tokens: Num | None = None
    abstention_accuracy_per_1k_tokens_ci: Interval = None


class CapSweep(FileModel):
    """Conditions that differ only in the search cap: points by cap and the ROI of each step."""

    cap_key: str | None = None
    other: dict[str, Any] | None = None
    model: str
    points: list[SweepPoint] = Field(default_factory=list)
    marginal_roi: list[RoiStep] = Field(default_factory=list)
    roi_min_added_cost: Num | None = None


class Availability(FileModel):
    """A section that may have no data (`available` false, with the `reason`)."""

    available: bool = False
    reason: str | None = None


class OverSearchStats(FileModel):
    """Over-search of a set of correct executions: mean searches k̄, mean minimal searches k̄*."""

    n: int | None = None
    n_searched: int | None = None
    n_no_search: int | None = None
    mean_searches: Num | None = None
    mean_minimal_searches: Num | None = None
    over_search_pct: Num | None = None
    over_search_pct_ci: Interval = None
    model: str | None = None


class ModelAverage(FileModel):
    """The unweighted average over models (the study's Table 8 average)."""

    n_models: int = 0
    models: list[str] = Field(default_factory=list)
    mean_searches: Num | None = None
    mean_minimal_searches: Num | None = None
    over_search_pct: Num | None = None
    over_search_pct_ci: Interval = None


class OverSearch(OverSearchStats, Availability):
    """Over-search %, pooled, per condition, per model and averaged over models."""

    source: str | None = None
    judges: list[str] = Field(default_factory=list)
    by_condition: dict[str, OverSearchStats] = Field(default_factory=dict)
    by_model: dict[str, OverSearchStats] = Field(default_factory=dict)
    model_average: ModelAverage | None = None


class EvidenceGroup(FileModel):
    """Unanswerable executions in one evidence-balance group and their abstention accuracy."""

    n: int = 0
    abstention_accuracy: Num | None = None
    abstention_accuracy_ci: Interval = None


class NegativeShare(FileModel):
    """Share of negative-evidence documents among those retrieved."""

    n_documents: int | None = None
    n_negative: int | None = None
    n_unparseable_documents: int | None = None
    negative_share: Num | None = None
    negative_share_ci: Interval = None


class AnswerableEvidence(NegativeShare):
    """The negative share of the documents retrieved for answerable questions."""

    n_answerable: int | None = None


class EvidenceSummary(NegativeShare):
    """Evidence balance of a set of unanswerable executions."""

    n_unanswerable: int | None = None
    n_with_evidence: int | None = None
    groups: dict[str, EvidenceGroup] = Field(default_factory=dict)
    answerable: AnswerableEvidence | None = None


class EvidenceBalance(EvidenceSummary, Availability):
    """Evidence balance pooled and per condition."""

    by_condition: dict[str, EvidenceSummary] = Field(default_factory=dict)


class _TurnHead(FileModel):
    preceding: int
    condition: str | None = None


class TurnPoint(Stats, _TurnHead):
    """The metrics after a number of preceding turns."""


class TurnSeries(FileModel):
    """One kind of conversation history, by number of preceding turns."""

    context: str
    other: dict[str, Any] | None = None
    model: str | None = None
    points: list[TurnPoint] = Field(default_factory=list)


class MultiTurn(Availability):
    series: list[TurnSeries] = Field(default_factory=list)


class _EffortHead(FileModel):
    effort: str
    key: str | None = None
    condition: str | None = None
    model: str
    other: dict[str, Any] | None = None
    search_cap: Num | None = None


class EffortRow(Stats, _EffortHead):
    """The metrics at one reasoning effort."""


class ReasoningEffort(Availability):
    rows: list[EffortRow] = Field(default_factory=list)


class _FrontierHead(FileModel):
    effort: str
    cap: Num
    condition: str | None = None


class FrontierPoint(Stats, _FrontierHead):
    """One condition of an effort × cap grid: its metrics, whether it is Pareto-optimal
    (accuracy up, TPC down) and the share of bootstrap replicates in which it is."""

    on_frontier: bool = False
    frontier_probability: Num | None = None


class _FrontierStepValues(FileModel):
    from_condition: str | None = None
    to_condition: str | None = None
    added_cost_per_query: Num | None = None
    added_cost_per_query_ci: Interval = None
    roi_undefined: str | None = None
    overall_accuracy_change: Num | None = None
    overall_accuracy_change_ci: Interval = None
    overall_accuracy_per_1k_tokens: Num | None = None
    overall_accuracy_per_1k_tokens_ci: Interval = None
    answer_accuracy_per_1k_tokens: Num | None = None
    answer_accuracy_per_1k_tokens_ci: Interval = None
    abstention_accuracy_per_1k_tokens: Num | None = None
    abstention_accuracy_per_1k_tokens_ci: Interval = None


class _CapStepHead(FileModel):
    effort: str
    from_cap: Num
    to_cap: Num


class FrontierCapStep(_FrontierStepValues, _CapStepHead):
    """Marginal ROI of one step up the search cap at one reasoning effort (paired by question)."""


class _EffortStepHead(FileModel):
    cap: Num
    from_effort: str
    to_effort: str


class FrontierEffortStep(_FrontierStepValues, _EffortStepHead):
    """Marginal ROI of one step up the reasoning effort (spec order) at one search cap."""


class FrontierGrid(FileModel):
    """One effort × cap grid (conditions alike in every other key): points, frontier, ROI."""

    effort_key: str
    cap_key: str
    other: dict[str, Any] | None = None
    model: str
    effort_order: list[str] = Field(default_factory=list)
    effort_order_source: str | None = None
    n_questions: int | None = None
    points: list[FrontierPoint] = Field(default_factory=list)
    frontier: list[str] = Field(default_factory=list, description="Pareto-optimal condition labels, by TPC.")
    cap_roi: list[FrontierCapStep] = Field(default_factory=list)
    effort_roi: list[FrontierEffortStep] = Field(default_factory=list)


class EffortCapFrontier(Availability):
    """The reasoning-effort × search-cap frontier of every grid (`evaluation.frontier`)."""

    accuracy: str | None = None
    simulated: bool = False
    roi_min_added_cost: Num | None = None
    pairing: str | None = None
    series: list[FrontierGrid] = Field(default_factory=list)


class PassAtK(FileModel):
    """pass@k and pass^k at one k, over the questions with at least k epochs."""

    k: int
    n_questions: int = 0
    pass_at_k: Num | None = Field(None, description="Mean of 1 - C(n-c,k)/C(n,k) (Chen et al. 2021).")
    pass_at_k_ci: Interval = None
    pass_hat_k: Num | None = Field(None, description="pass^k: mean of C(c,k)/C(n,k) (tau-bench).")
    pass_hat_k_ci: Interval = None


class Reliability(FileModel):
    """ICC(1) of one decision across epochs (questions as groups), with its ANOVA's mean squares."""

    n_questions: int = 0
    n_executions: int = 0
    mean: Num | None = None
    ms_between: Num | None = None
    ms_within: Num | None = None
    icc: Num | None = Field(None, description="One-way random-effects ICC(1); None when undefined.")
    icc_ci: Interval = None


class EpochSummary(FileModel):
    """The epoch metrics of one condition or one of its categories (`evaluation.epochs`)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    n_questions: int = 0
    n_executions: int = 0
    epochs_min: int = 0
    epochs_max: int = 0
    pass_: list[PassAtK] = Field(default_factory=list, alias="pass")
    n_questions_repeated: int = 0
    flip_rate: Num | None = Field(None, description="Share of questions whose correctness differs across epochs.")
    flip_rate_ci: Interval = None
    reliability: dict[str, Reliability] = Field(default_factory=dict)


class EpochCondition(EpochSummary):
    """One condition's epoch metrics and the same per category."""

    by_category: dict[str, EpochSummary] = Field(default_factory=dict)


class Epochs(FileModel):
    """Metrics of repeated executions (`run.epochs` > 1), per condition."""

    epochs: int = Field(description="The most epochs of any question under any condition.")
    decisions: list[str] = Field(default_factory=list)
    by_condition: dict[str, EpochCondition] = Field(default_factory=dict)


class Bootstrap(FileModel):
    resamples: int = 0
    seed: int = 0
    confidence: Num = 0.95
    unit: str | None = None


class _Head(FileModel):
    schema_version: int = Field(METRICS_SCHEMA_VERSION, description="Version of this file's layout.")
    judge: str = Field(description="The judge whose labels were scored (rule, llm, given, ...).")
    lam: Num = Field(description="TPC weight of input tokens (lambda).")
    mu: Num = Field(description="TPC cost of one search call in tokens (mu).")
    simulated: bool = Field(False, description="The records came from the simulated model (figures and tables say so).")
    bootstrap: Bootstrap = Field(
        default_factory=Bootstrap, description="Resamples, seed, confidence and unit of every interval."
    )


class MetricsReport(Stats, _Head):
    """metrics.json, written by `branchpoint evaluate`: over-searching metrics of one run.

    The overall summary's fields (counts, accuracies, TPC, its channels and outcomes, means,
    latency, each with its interval) sit at the top level beside the sections below.
    """

    by_category: dict[str, Summary] = Field(
        default_factory=dict, description="The summary per question category (answerable, AU, FP, UC)."
    )
    by_condition: dict[str, ConditionSummary] = Field(
        description="Per condition label: its settings (`condition`), summary and by_category."
    )
    search_effect: list[SearchEffect] | None = Field(
        None, description="Search vs no search, paired by question, where both were run."
    )
    search_cap_sweep: list[CapSweep] | None = Field(None, description="Metrics by search cap, where the cap was swept.")
    over_search: OverSearch | None = Field(
        None, description="Over-search %: mean searches / mean minimal searches - 1 (fork studies)."
    )
    evidence_balance: EvidenceBalance | None = Field(
        None, description="Abstention by the balance of positive vs negative evidence retrieved."
    )
    multi_turn: MultiTurn | None = Field(
        None, description="Metrics by preceding-turn history, where multi-turn was swept."
    )
    reasoning_effort: ReasoningEffort | None = Field(
        None, description="Metrics by reasoning effort, where it was swept."
    )
    effort_cap_frontier: EffortCapFrontier | None = Field(
        None,
        description="Reasoning effort x search cap: the accuracy / TPC Pareto frontier with its bootstrap "
        "probability, and marginal ROI along each axis, paired by question (`evaluation.frontier`).",
    )
    tpc_sensitivity: dict[str, Any] | None = Field(
        None,
        description="TPC per condition over a grid of (lam, mu), with the conditions' rank and Kendall's tau "
        "against the order at the run's own (lam, mu) (`evaluation.tpc_sensitivity`).",
    )
    epochs: Epochs | None = Field(
        None,
        description="pass@k, pass^k, flip rate and ICC(1) of the decisions per condition and category, where a "
        "question ran more than once under a condition (`run.epochs`; `evaluation.epochs`).",
    )
    budgets: dict[str, Any] | None = Field(
        None,
        description="Use of each per-execution budget (search cap, token budget): n, mean limit, mean used, "
        "use share (Σ used / Σ limit), share that reached it, share whose answer it forced; overall and "
        "by_condition; {available: false} without `budget` blocks in the records.",
    )
    identical_conditions: list[dict[str, Any]] | None = Field(
        None, description="Sweep conditions that sent identical requests."
    )
    judge_agreement: dict[str, Any] | None = Field(
        None, description="Agreement between the judges that labelled the traces."
    )
    gold_list_warnings: list[GoldListWarning] | None = Field(
        None,
        description="Questions whose gold answers look like an alias dump from another data set "
        "(`evaluation.gold_lists`): question id, question, number of gold answers, signals, examples.",
    )
    settings: dict[str, Any] | None = Field(
        None,
        description="The settings `evaluate` ran with (judge, judge_settings, lam, mu, bootstrap, bootstrap_seed), "
        "the spec.yaml read (`spec`), the keys taken from it (`from_spec`) and those given on the command line "
        "(`overrides`).",
    )
    fork_settings: dict[str, Any] | None = Field(
        None,
        description="Fork branches read: per fork settings fingerprint its settings and branches; `chosen` "
        "(--fork-settings), `mix_allowed` (--mix-fork-settings), `mixed`, `left_out`.",
    )
    provenance: Provenance | None = Field(
        None, description="Where the file came from (branchpoint.provenance); absent in older files."
    )


def as_metrics(metrics: MetricsReport | dict[str, Any], source: str = "metrics") -> MetricsReport:
    """A `MetricsReport` from the model itself or from a metrics dict (as `compute_metrics` returns it)."""
    if isinstance(metrics, MetricsReport):
        return metrics
    return validate(source, MetricsReport, metrics, _WHAT)


def metrics_file_text(metrics: MetricsReport | dict[str, Any]) -> str:
    """The text of metrics.json: the model's keys (with `schema_version`), ±inf as "inf" / "-inf"."""
    model = as_metrics(metrics).model_copy()
    if "schema_version" not in model.model_fields_set:
        model.schema_version = METRICS_SCHEMA_VERSION  # assignment marks the field set, so it is written
    return dump_json(model)


def read_metrics(path: Path) -> MetricsReport:
    """The metrics.json of a run directory (or the file itself) as a `MetricsReport`.

    InputError, naming the file and field, when it is missing, not JSON, of a newer schema
    version, or has a field of the wrong kind."""
    path = Path(path)
    source = path / METRICS_FILE if path.is_dir() else path
    hint = f"run `branchpoint evaluate {path}` first"
    return read_model(source, MetricsReport, _WHAT, hint, METRICS_SCHEMA_VERSION, default_version=1)
