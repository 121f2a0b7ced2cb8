"""The blocks of metrics.json that describe a set of executions, as pydantic models: `Stats` and
`Summary` (what every block may carry), `ConditionSummary`, `SearchEffect` (with `Change`),
`OverSearch`, `EvidenceBalance`, `Epochs`; `Availability` for a section that may have no data.

`metrics_file.MetricsReport` is the file that holds them; the sweep blocks are in
`metrics_sweeps`. Every statistic `x` has its interval `x_ci` beside it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from branchpoint.evaluation.report_types import FileModel, Interval, Num


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
