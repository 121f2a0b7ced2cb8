"""Evaluation: judges, over-searching metrics and reports. Reads traces only (`branchpoint.traces`)."""

from branchpoint.evaluation.evaluate import evaluate, trace_path
from branchpoint.evaluation.judges import (
    ABSTENTION_LABELS,
    ABSTENTION_PATTERNS,
    ANSWER_LABELS,
    AbstentionPattern,
    JudgeFn,
    contained_gold,
    detect_abstention,
    get_judge,
    judge,
    judge_names,
    judge_records,
    normalize_answer,
)
from branchpoint.evaluation.metrics import (
    MetricsConfig,
    compute_metrics,
    condition_label,
    is_correct,
    metrics_json,
    tpc,
)
from branchpoint.evaluation.report import comparison_table, markdown_report

__all__ = [
    "ABSTENTION_LABELS",
    "ABSTENTION_PATTERNS",
    "ANSWER_LABELS",
    "AbstentionPattern",
    "JudgeFn",
    "MetricsConfig",
    "comparison_table",
    "compute_metrics",
    "condition_label",
    "contained_gold",
    "detect_abstention",
    "evaluate",
    "get_judge",
    "judge",
    "judge_names",
    "judge_records",
    "is_correct",
    "markdown_report",
    "metrics_json",
    "normalize_answer",
    "tpc",
    "trace_path",
]
