"""metrics.json as a pydantic model: `MetricsReport`, written by `metrics.metrics_json` and read
back by `read_metrics` (the report, the figures and the combined report read this model); its
blocks are in `metrics_blocks` (statistics of a set of executions) and `metrics_sweeps`.

Schema-versioned like inspect_ai's eval logs: `schema_version` (1 today; files written before
the field existed read as version 1), a newer version or a malformed file is an InputError that
names the file and the field. Every statistic `x` of a block has its interval `x_ci` beside it
(see `metrics` for how both are computed); keys a later minor version adds are kept (objects
allow additional keys), so a file read and written back is unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from branchpoint.evaluation.gold_lists import GoldListWarning
from branchpoint.evaluation.metrics_blocks import (
    ConditionSummary,
    Epochs,
    EvidenceBalance,
    OverSearch,
    SearchEffect,
    Stats,
    Summary,
)
from branchpoint.evaluation.metrics_sweeps import CapSweep, EffortCapFrontier, MultiTurn, ReasoningEffort
from branchpoint.evaluation.report_types import FileModel, Num, dump_json, read_model, validate
from branchpoint.provenance import Provenance
from branchpoint.traces import METRICS_FILE

METRICS_SCHEMA_VERSION = 1
_WHAT = "the metrics.json of `branchpoint evaluate`"


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
