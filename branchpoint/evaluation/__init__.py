"""Evaluation: judges (rule, given, LLM), over-searching metrics with bootstrap intervals, judge
agreement, reports and figures. Reads traces only (`branchpoint.traces`); the LLM judges call a
model through `branchpoint.models`, never through the agents."""

from branchpoint.evaluation.agreement import cohen_kappa, judge_agreement
from branchpoint.evaluation.bootstrap import QuestionBootstrap, percentile_ci
from branchpoint.evaluation.evaluate import evaluate, trace_path
from branchpoint.evaluation.judge_cache import JudgeCache
from branchpoint.evaluation.judges import (
    ABSTENTION_LABELS,
    ABSTENTION_PATTERNS,
    ANSWER_LABELS,
    AbstentionPattern,
    BatchJudge,
    JudgeFn,
    JudgeRun,
    build_judge,
    check_judge,
    contained_gold,
    detect_abstention,
    judge,
    judge_records,
    normalize_answer,
)
from branchpoint.evaluation.llm_judge_prompts import (
    ABSTENTION_PROMPT_V1,
    ANSWER_PROMPT_V1,
    EVIDENCE_ANSWERABLE_PROMPT_V1,
    EVIDENCE_PROMPT_V1,
    parse_label,
)
from branchpoint.evaluation.llm_judges import LLMJudge, LLMJudgeSettings, build_llm_judge, llm_judge
from branchpoint.evaluation.metrics import (
    MetricsConfig,
    compute_metrics,
    condition_label,
    is_correct,
    metrics_json,
    tpc,
)
from branchpoint.evaluation.metrics_file import MetricsReport, read_metrics
from branchpoint.evaluation.report import comparison_table, markdown_report, write_report

__all__ = [
    "ABSTENTION_LABELS",
    "ABSTENTION_PATTERNS",
    "ABSTENTION_PROMPT_V1",
    "ANSWER_LABELS",
    "ANSWER_PROMPT_V1",
    "EVIDENCE_ANSWERABLE_PROMPT_V1",
    "EVIDENCE_PROMPT_V1",
    "AbstentionPattern",
    "BatchJudge",
    "JudgeCache",
    "JudgeFn",
    "JudgeRun",
    "LLMJudge",
    "LLMJudgeSettings",
    "MetricsConfig",
    "MetricsReport",
    "QuestionBootstrap",
    "build_judge",
    "build_llm_judge",
    "check_judge",
    "cohen_kappa",
    "comparison_table",
    "compute_metrics",
    "condition_label",
    "contained_gold",
    "detect_abstention",
    "evaluate",
    "is_correct",
    "judge",
    "judge_agreement",
    "judge_records",
    "llm_judge",
    "markdown_report",
    "metrics_json",
    "normalize_answer",
    "parse_label",
    "percentile_ci",
    "read_metrics",
    "tpc",
    "trace_path",
    "write_report",
]

# Search value: forecasters, Brier / gain scores, routers (subpackage `branchpoint.evaluation.value`).
from branchpoint.evaluation.value import Forecast, ValueConfig, forecaster, value_study

__all__ += ["Forecast", "ValueConfig", "forecaster", "value_study"]
