"""Builders for hand-made execution records."""

from __future__ import annotations

from typing import Any

from branchpoint.traces import ExecutionRecord, Judgment


def make_record(
    qid: str,
    *,
    answerable: bool = True,
    category: str | None = None,
    gold: list[str] | None = None,
    answer: str | None = "x",
    status: str = "ok",
    condition: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    judge: str = "human",
    input_tokens: int = 0,
    output_tokens: int = 0,
    search_calls: int = 0,
    execution_id: str | None = None,
    evidence: dict[str, str] | None = None,
    **extra: Any,
) -> ExecutionRecord:
    """One record; `labels` maps judgment kind to label, given by `judge`; `evidence` maps doc_id
    to an evidence label by `judge`; `extra` sets other record fields (steps, wall_s, run_id, ...)."""
    judgments = [Judgment(judge=judge, kind=k, label=v) for k, v in (labels or {}).items()]
    judgments += [Judgment(judge=judge, kind="evidence", label=v, doc_id=d) for d, v in (evidence or {}).items()]
    return ExecutionRecord(
        execution_id=execution_id or f"e-{qid}",
        run_id=extra.pop("run_id", "run"),
        condition=condition or {},
        question_id=qid,
        question=f"question {qid}?",
        answerable=answerable,
        category=category,
        gold_answers=gold or [],
        status=status,
        final_answer=answer,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        search_calls=search_calls,
        judgments=judgments,
        **extra,
    )


#: The top-level keys every metrics.json has.
METRICS_KEYS = {
    "answer_accuracy",
    "abstention_accuracy",
    "overall_accuracy",
    "tpc",
    "n",
    "n_answerable",
    "n_unanswerable",
    "n_incomplete",
    "mean_search_calls",
    "mean_input_tokens",
    "mean_output_tokens",
    "by_category",
    "by_condition",
    "judge",
    "lam",
    "mu",
}
