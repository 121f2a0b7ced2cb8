"""JSON Schemas of what branchpoint writes and reads: traces, metrics.json, value.json.

`branchpoint schema trace|metrics|value` prints them. The trace schema is the contract itself
(`ExecutionRecord`, pydantic-validated on read and write). The metrics and value schemas name
every top-level section and what it holds; a section's inner shape is described in its
producing function's docstring (`evaluation.metrics.compute_metrics`, `evaluation.value.study`),
and new keys may appear in later versions (objects allow additional properties).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from branchpoint.traces import ExecutionRecord

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


class _Report(BaseModel):
    model_config = ConfigDict(extra="allow")


class MetricsReport(_Report):
    """metrics.json, written by `branchpoint evaluate`: over-searching metrics of one run.

    Beside the sections below it carries the overall summary's fields (counts, answer accuracy,
    abstention accuracy, TPC and its split by outcome, mean tokens and searches, each with its
    bootstrap interval), the same fields every `by_category` / `by_condition` entry has.
    """

    judge: str = Field(description="The judge whose labels were scored (rule, llm, given, ...).")
    lam: float = Field(description="TPC weight of input tokens (lambda).")
    mu: float = Field(description="TPC cost of one search call in tokens (mu).")
    bootstrap: dict[str, Any] = Field(description="Resamples, seed, confidence and resampling unit of every interval.")
    by_category: dict[str, Any] = Field(description="The summary per question category (answerable, AU, FP, UC).")
    by_condition: dict[str, Any] = Field(description="Per condition label: its settings (`condition`), summary and by_category.")
    search_effect: Any = Field(None, description="Search vs no search, paired by question, where both were run.")
    search_cap_sweep: Any = Field(None, description="Metrics by search cap, where the cap was swept.")
    over_search: Any = Field(None, description="Over-search %: mean searches / mean minimal searches - 1 (fork studies).")
    evidence_balance: Any = Field(None, description="Abstention by the balance of positive vs negative evidence retrieved.")
    multi_turn: Any = Field(None, description="Metrics by preceding-turn history, where multi-turn was swept.")
    reasoning_effort: Any = Field(None, description="Metrics by reasoning effort, where it was swept.")


class ValueReport(_Report):
    """value.json, written by `branchpoint value`: search-value scores of a fork study.

    Beside the sections below it carries the score sections (per forecaster: Brier and its
    split, gain risk L, gain skill R2_delta, bootstrap intervals; routers' utility at each price;
    the two-probe consistency router and the zero-price oracle bound).
    """

    schema_version: int
    source: str = Field(description="The forks.jsonl (or traces file) the study read.")
    settings: dict[str, Any] = Field(description="ValueConfig as used, and the actions compared at each boundary kind.")
    states: dict[str, Any] = Field(description="How many states, per stratum and split, and mean repeats per action.")
    forecasters: dict[str, Any] = Field(description="Each forecaster scored, and where its forecasts came from.")
    skipped_forecasters: Any = Field(None, description="Forecasters that could not be scored, with the reason.")


def json_schema(which: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `trace`, `metrics` or `value`."""
    models: dict[str, type[BaseModel]] = {"trace": ExecutionRecord, "metrics": MetricsReport, "value": ValueReport}
    if which not in models:
        raise ValueError(f"unknown schema {which!r} (expected one of: {', '.join(models)})")
    schema = models[which].model_json_schema()
    return {"$schema": _DRAFT, **schema}
