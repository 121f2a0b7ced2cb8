"""The viewer's table rows: one small row per record, with the evaluation's outcome and cost.

Outcomes and costs are the evaluation's (`tally.record_outcome`, `cost.execution_cost`); a record
without the chosen judge's label gets the offline `rule` judge's, computed here (its row says so).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.errors import InputError
from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.cost import MetricsConfig, execution_cost
from branchpoint.evaluation.fork_settings import fingerprint_of, settings_of
from branchpoint.evaluation.judges import UNPARSEABLE, build_judge
from branchpoint.evaluation.tally import category_key, evidence_counts, judgment_label, record_outcome
from branchpoint.traces import REPLAYS_FILE, ExecutionRecord

#: Outcomes a row can have: the evaluation's four, plus records it never scores.
ROW_OUTCOMES: tuple[str, ...] = (
    "correct_answer",
    "wrong_answer",
    "correct_abstention",
    "failed_abstention",
    "incomplete",
    "unparseable",
)
#: Columns of a row as the page receives them (one list per row, in this order).
COLUMNS: tuple[str, ...] = (
    "id",
    "kind",
    "file",
    "line",
    "condition",
    "question_id",
    "question",
    "answerable",
    "category",
    "status",
    "outcome",
    "judge",
    "labels",
    "evidence",
    "searches",
    "input_tokens",
    "output_tokens",
    "cost",
    "wall_s",
    "parent",
    "checkpoint",
    "boundary",
    "branch",
    "repeat",
    "fork",
    "checkpoints",
    "answer",
    "error",
)
ROW_FIELDS = (
    "execution_id",
    "run_id",
    "condition",
    "question_id",
    "question",
    "answerable",
    "category",
    "gold_answers",
    "parent",
    "branch",
    "repeat",
    "status",
    "final_answer",
    "search_calls",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "wall_s",
    "checkpoint_ids",
    "judgments",
    "error",
    "kind",
    "sampling",
    "fork_settings",
    "fork_fingerprint",
)

#: The table fields of an ExecutionRecord, with the contract's own types (the rest is skipped, so
#: phase 1 does not build steps and passages; the full record is validated later).
RowFields: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "RowFields",
    __config__=ConfigDict(extra="ignore"),
    **{
        name: (ExecutionRecord.model_fields[name].annotation, ExecutionRecord.model_fields[name]) for name in ROW_FIELDS
    },
)


def _rule_labels(rec: Any, cache: dict[tuple[Any, ...], list[Any]] | None = None) -> list[Any]:
    """The `rule` judge's answer and abstention labels of a record (or table row), judged on a
    copy without its steps: the rule judge reads steps only for evidence labels, not needed here.
    Identical answers to the same question share one judgment (`cache`), as in the value study."""
    key = (rec.question, rec.answerable, rec.category, tuple(rec.gold_answers), rec.status, rec.final_answer)
    if cache is not None and key in cache:
        return cache[key]
    record = ExecutionRecord.model_construct(**{name: getattr(rec, name) for name in ROW_FIELDS}, steps=[])
    labels = [j for j in build_judge(DEFAULT_JUDGE).judge_many([record])[0] if j.kind in ("answer", "abstention")]
    if cache is not None:
        cache[key] = labels
    return labels


def _labels_text(judgments: list[Any]) -> list[str]:
    """`judge:kind=LABEL` for each judge's last answer / abstention label."""
    last: dict[tuple[str, str], str] = {}
    for j in judgments:
        if j.kind in ("answer", "abstention"):
            last[(j.judge, j.kind)] = j.label.strip().upper()
    return [f"{judge}:{kind}={label}" for (judge, kind), label in sorted(last.items())]


def _evidence(rec: Any, judge: str) -> str:
    """`P+/N-`: positive and negative documents (`tally.evidence_counts`) of `judge`, or of the
    last judge that gave evidence labels when `judge` gave none; "" without evidence labels."""
    judges = [j.judge for j in rec.judgments if j.kind == "evidence"]
    if not judges:
        return ""
    positive, negative, _ = evidence_counts(rec, judge if judge in judges else judges[-1])
    return f"{positive}+/{negative}-"


class _Judged:
    """A record's identity fields with other judgments (what `record_outcome` reads)."""

    def __init__(self, rec: Any, judgments: list[Any]) -> None:
        self.execution_id = rec.execution_id
        self.answerable = rec.answerable
        self.judgments = judgments


def _decide(rec: Any, judge: str) -> str | None:
    """The outcome under `judge`, "unparseable", or None when the judge gave no deciding label."""
    try:
        label = judgment_label(rec, judge, "answer" if rec.answerable else "abstention")
    except InputError:
        return None
    return "unparseable" if label == UNPARSEABLE else record_outcome(rec, judge)


def shown_outcome(rec: Any, judge: str, cache: dict[tuple[Any, ...], list[Any]] | None = None) -> tuple[str, str]:
    """(the outcome the viewer shows, who decided it) of a record: `incomplete` records are never
    scored; else the evaluation's outcome (`tally.outcome_of`) under `judge`, or under the rule
    judge (computed here, "rule (viewer)") when `judge` gave the record no deciding label."""
    if rec.status == "incomplete":
        return "incomplete", ""
    outcome = _decide(rec, judge)
    if outcome is not None:
        return outcome, judge
    return _decide(_Judged(rec, _rule_labels(rec, cache)), DEFAULT_JUDGE) or "unparseable", f"{DEFAULT_JUDGE} (viewer)"


def record_kind(rec: Any, file: str) -> str:
    """`execution`, `fork` (a branch with THINK / SEARCH / STOP / SWITCH) or `replay`."""
    if file == REPLAYS_FILE or getattr(rec, "kind", None) == "replay":
        return "replay"
    if rec.parent is not None:
        return "fork"
    return "execution"


def table_row(
    rec: Any,
    file: str,
    line: int,
    judge: str,
    cfg: MetricsConfig,
    cache: dict[tuple[Any, ...], list[Any]] | None = None,
) -> dict[str, Any]:
    """The table row of a record (light or full): identity, outcome under `judge`, labels, cost
    (`cfg`'s weights); `cache` shares rule judgments between identical answers."""
    outcome, decided_by = shown_outcome(rec, judge, cache)
    parent = rec.parent
    kind = record_kind(rec, file)
    return {
        "id": rec.execution_id,
        "kind": kind,
        "file": file,
        "line": line,
        "condition": condition_label(rec.condition),
        "question_id": rec.question_id,
        "question": rec.question,
        "answerable": rec.answerable,
        "category": category_key(rec),
        "status": rec.status,
        "outcome": outcome,
        "judge": decided_by,
        "labels": _labels_text(rec.judgments),
        "evidence": _evidence(rec, judge),
        "searches": rec.search_calls,
        "input_tokens": rec.input_tokens,
        "output_tokens": rec.output_tokens,
        "cost": float(execution_cost(rec.output_tokens, rec.input_tokens, rec.search_calls, cfg)),
        "wall_s": round(float(rec.wall_s), 3),
        "parent": parent.execution_id if parent else None,
        "checkpoint": parent.checkpoint_id if parent else None,
        "boundary": parent.boundary if parent else None,
        "branch": "replay" if kind == "replay" else rec.branch,
        "repeat": rec.repeat,
        "fork": fingerprint_of(rec),
        "fork_settings": settings_of(rec),  # not a column: the fork tree reads it
        "checkpoints": len(rec.checkpoint_ids or []),
        "answer": (rec.final_answer or "")[:300],
        "error": getattr(rec, "error", None),
    }


def value_headline(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """value.json's scores per forecaster (Brier, gain risk L, R²_Δ) and its state counts."""
    if not value:
        return None
    return {
        "settings": {k: (value.get("settings") or {}).get(k) for k in ("judge", "reward", "pending_roles", "roles")},
        "states": value.get("states"),
        "brier": {name: parts.get("brier") for name, parts in (value.get("brier") or {}).items()},
        "gain_risk": value.get("gain_risk"),
        "gain_r2": value.get("gain_r2"),
        "theta": value.get("theta"),
        "gain_variance": value.get("gain_variance"),
    }
