"""Over-searching metrics: answer accuracy, abstention accuracy, Tokens Per Correctness (TPC).

Metrics read judged records (see `judges.judge_records`) and the labels of one judge:

- a record is *correct* when it is answerable and its `answer` label is CORRECT, or
  unanswerable and its `abstention` label is ABSTAINED;
- records with status `incomplete` (transport failures, retried later) are never scored: they
  are excluded from every number and counted as `n_incomplete`;
- when one `execution_id` appears more than once (an append-only run store after a retry), the
  last record in file order wins;
- token counts are the record totals; `output_tokens` is taken to include reasoning tokens
  (as OpenAI-compatible servers report them), so `reasoning_tokens` is never added on top.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from branchpoint.errors import InputError
from branchpoint.evaluation.judges import needed_kind
from branchpoint.traces import ExecutionRecord

# Keys of a category bucket, in report order; unanswerable records without a category go under
# "unanswerable".
CATEGORY_ORDER: tuple[str, ...] = ("answerable", "AU", "FP", "UC", "unanswerable")
DEFAULT_CONDITION = "default"  # label of the empty condition {}


class MetricsConfig(BaseModel):
    """Weights of the TPC cost: λ per input token, μ per search call (generated tokens weigh 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lam: float = Field(0.25, ge=0, description="weight λ of one input token")
    mu: float = Field(500.0, ge=0, description="weight μ of one search call, in tokens")


def judgment_label(record: ExecutionRecord, judge: str, kind: str) -> str:
    """The last label of `kind` that `judge` gave the record; InputError if there is none."""
    for j in reversed(record.judgments):
        if j.judge == judge and j.kind == kind:
            return j.label.strip().upper()
    raise InputError(
        f'execution {record.execution_id}: no {kind} judgment from judge "{judge}" '
        f"(judge the records first, e.g. `branchpoint evaluate --judge {judge}`)"
    )


def is_correct(record: ExecutionRecord, judge: str) -> bool:
    """Answerable: `answer` label is CORRECT; unanswerable: `abstention` label is ABSTAINED."""
    kind = needed_kind(record)
    label = judgment_label(record, judge, kind)
    return label == ("CORRECT" if kind == "answer" else "ABSTAINED")


def scored(records: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
    """The records that count: every status except `incomplete`."""
    return [r for r in records if r.status != "incomplete"]


def tpc(records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig = MetricsConfig()) -> float:
    """Tokens Per Correctness: TPC = Σ_q (g_q + λ·x_q + μ·|S_q|) / Σ_q correct_q.

    g_q = output (generated) tokens, reasoning included; x_q = input tokens; |S_q| = search
    calls; the sums run over scored (non-`incomplete`) records. Returns +inf when nothing is
    correct.
    """
    rows = scored(records)
    g = np.array([r.output_tokens for r in rows], dtype=float)
    x = np.array([r.input_tokens for r in rows], dtype=float)
    s = np.array([r.search_calls for r in rows], dtype=float)
    n_correct = sum(is_correct(r, judge) for r in rows)
    if n_correct == 0:
        return math.inf
    return float(np.sum(g + cfg.lam * x + cfg.mu * s) / n_correct)


def category_key(record: ExecutionRecord) -> str:
    """Bucket of a record: "answerable", its category (AU / FP / UC), or "unanswerable"."""
    if record.answerable:
        return "answerable"
    return record.category or "unanswerable"


def _format_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def condition_label(condition: dict[str, Any]) -> str:
    """Stable short label of a condition: `k=v` pairs with sorted keys, e.g. `policy=x,search=true`.

    Strings appear as they are, other values as compact JSON (`true`, `3`, `null`); the empty
    condition is labelled "default".
    """
    if not condition:
        return DEFAULT_CONDITION
    return ",".join(f"{k}={_format_value(condition[k])}" for k in sorted(condition))


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig) -> dict[str, Any]:
    """The flat metrics of one set of records (no breakdowns)."""
    rows = scored(records)
    answerable = [r for r in rows if r.answerable]
    unanswerable = [r for r in rows if not r.answerable]
    n_answer_ok = sum(is_correct(r, judge) for r in answerable)
    n_abstain_ok = sum(is_correct(r, judge) for r in unanswerable)
    return {
        "n": len(rows),
        "n_answerable": len(answerable),
        "n_unanswerable": len(unanswerable),
        "n_incomplete": len(records) - len(rows),
        "n_correct": n_answer_ok + n_abstain_ok,
        "answer_accuracy": _ratio(n_answer_ok, len(answerable)),
        "abstention_accuracy": _ratio(n_abstain_ok, len(unanswerable)),
        "overall_accuracy": _ratio(n_answer_ok + n_abstain_ok, len(rows)),
        "tpc": tpc(rows, judge, cfg) if rows else None,
        "mean_search_calls": _mean([r.search_calls for r in rows]),
        "mean_input_tokens": _mean([r.input_tokens for r in rows]),
        "mean_output_tokens": _mean([r.output_tokens for r in rows]),
    }


def by_category(
    records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig
) -> dict[str, dict[str, Any]]:
    """Flat metrics per category bucket present in the records ("answerable", AU, FP, UC)."""
    groups: dict[str, list[ExecutionRecord]] = {}
    for r in records:
        groups.setdefault(category_key(r), []).append(r)
    order = {k: i for i, k in enumerate(CATEGORY_ORDER)}
    keys = sorted(groups, key=lambda k: (order.get(k, len(order)), k))
    return {k: summarize(groups[k], judge, cfg) for k in keys}


def latest_records(records: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
    """One record per execution_id, the last one in order (a retried execution replaces its failure)."""
    latest: dict[str, ExecutionRecord] = {}
    for r in records:
        latest.pop(r.execution_id, None)
        latest[r.execution_id] = r
    return list(latest.values())


def compute_metrics(
    records: Iterable[ExecutionRecord], judge_name: str, cfg: MetricsConfig = MetricsConfig()
) -> dict[str, Any]:
    """All over-searching metrics of judged records: overall, by category, by condition.

    `tpc` is a float and `math.inf` when nothing is correct (`metrics_json` writes it as the
    string "inf"); accuracies and means are None when their set is empty.
    """
    rows = latest_records(records)
    conditions: dict[str, list[ExecutionRecord]] = {}
    condition_dicts: dict[str, dict[str, Any]] = {}
    for r in rows:
        label = condition_label(r.condition)
        seen = condition_dicts.setdefault(label, r.condition)
        if seen != r.condition:
            raise InputError(
                f'conditions {seen!r} and {r.condition!r} share the label "{label}"; '
                "give them distinct values"
            )
        conditions.setdefault(label, []).append(r)
    return {
        "judge": judge_name,
        "lam": cfg.lam,
        "mu": cfg.mu,
        **summarize(rows, judge_name, cfg),
        "by_category": by_category(rows, judge_name, cfg),
        "by_condition": {
            label: {
                "condition": condition_dicts[label],
                **summarize(conditions[label], judge_name, cfg),
                "by_category": by_category(conditions[label], judge_name, cfg),
            }
            for label in sorted(conditions)
        },
    }


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def metrics_json(metrics: dict[str, Any]) -> str:
    """Metrics as JSON text (indent 2); an infinite TPC is written as the string "inf"."""
    return json.dumps(_json_ready(metrics), indent=2, allow_nan=False, default=str) + "\n"
