"""The sweep blocks of metrics.json as pydantic models: the search-cap sweep (`CapSweep`,
`SweepPoint`, `RoiStep`), `MultiTurn` (`TurnSeries`), `ReasoningEffort` (`EffortRow`) and the
reasoning-effort × search-cap frontier (`EffortCapFrontier`, `FrontierGrid`, `FrontierPoint`,
`FrontierCapStep`, `FrontierEffortStep`).

`metrics_file.MetricsReport` is the file that holds them; the statistics every point carries
(`Stats`) are in `metrics_blocks`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from branchpoint.evaluation.metrics_blocks import Availability, Stats
from branchpoint.evaluation.report_types import FileModel, Interval, Num


class _CapHead(FileModel):
    cap: Num
    condition: str | None = None


class SweepPoint(Stats, _CapHead):
    """The metrics at one search cap."""


class _RoiCost(FileModel):
    """The added cost of one step (per query, with its interval), or why its ROI is undefined."""

    added_cost_per_query: Num | None = None
    added_cost_per_query_ci: Interval = None
    roi_undefined: str | None = None


class _RoiRates(FileModel):
    """The ROI of one step: accuracy change per 1,000 tokens of added cost, by accuracy."""

    overall_accuracy_per_1k_tokens: Num | None = None
    overall_accuracy_per_1k_tokens_ci: Interval = None
    answer_accuracy_per_1k_tokens: Num | None = None
    answer_accuracy_per_1k_tokens_ci: Interval = None
    abstention_accuracy_per_1k_tokens: Num | None = None
    abstention_accuracy_per_1k_tokens_ci: Interval = None


class _CapSpan(FileModel):
    from_cap: Num
    to_cap: Num


# pydantic lays out the fields of the last base first: each step's file keys keep their order.
class RoiStep(_RoiRates, _RoiCost, _CapSpan):
    """Marginal ROI of one step of the cap (accuracy change per 1,000 tokens of added cost)."""


class CapSweep(FileModel):
    """Conditions that differ only in the search cap: points by cap and the ROI of each step."""

    cap_key: str | None = None
    other: dict[str, Any] | None = None
    model: str
    points: list[SweepPoint] = Field(default_factory=list)
    marginal_roi: list[RoiStep] = Field(default_factory=list)
    roi_min_added_cost: Num | None = None


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


class _ConditionPair(FileModel):
    from_condition: str | None = None
    to_condition: str | None = None


class _AccuracyChange(FileModel):
    overall_accuracy_change: Num | None = None
    overall_accuracy_change_ci: Interval = None


class _FrontierStepValues(_RoiRates, _AccuracyChange, _RoiCost, _ConditionPair):
    """A frontier step's conditions, added cost, accuracy change and ROI (the cap sweep's `RoiStep`
    values, plus the pair of conditions and the accuracy change itself)."""


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
