"""The search boundary over training: per training step, how much of the searching was needed.

Seed 000 (over-searching; sections on TPC and on over-search % from minimal searches) defines
over-searching against what the same model achieves without search; SAAS-style and
Search-R1-re-examination analyses follow that across RL training. From rollouts alone (no forks)
the counterfactual "would this rollout have been right without searching?" is not observed; what
is observed is whether *other rollouts of the same question at the same step* (GRPO samples
several) answered correctly without searching. So, for the scored rollouts of step s (judged by
one judge; `incomplete` left out), per question q with rollouts R_q:

- `answerable_without_search` = #{q : some rollout of q with 0 searches is correct} / #{q}: the
  share of questions the policy is seen to answer from memory at that step. A lower bound on the
  share it *could* answer so (a question whose every rollout searched shows nothing), so it
  falls as the policy learns to always search even when its knowledge has not changed; forks
  (`branchpoint fork`, THINK at `initial`) measure the counterfactual instead;
- `redundant_search_share` = #{searching rollouts whose question is answerable without search
  at that step} / #{searching rollouts}: searches the same step's policy showed it did not need;
- `search_rate` (share of rollouts with >= 1 search), `mean_searches`, `accuracy` (share
  correct), and `tpc` = Σ (g + λ·x + μ·|S|) / Σ correct over the step's rollouts (seed 000's TPC,
  λ = 0.25, μ = 500 by default).

Intervals: percentile intervals over question resamples within each step (`bootstrap.
QuestionBootstrap`): a resampled question brings all its rollouts, so the intervals are
clustered by question. Each statistic is a ratio of per-question sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.bootstrap import QuestionBootstrap, percentile_ci, ratio_samples
from branchpoint.evaluation.cost import MetricsConfig, execution_cost, tpc_value
from branchpoint.evaluation.tally import is_correct, is_unparseable, scored
from branchpoint.traces import ExecutionRecord

#: The statistics per step, each (numerator column, denominator column, +inf when the denominator is 0).
STATISTICS: dict[str, tuple[str, str, bool]] = {
    "answerable_without_search": ("answerable_no_search", "questions", False),
    "redundant_search_share": ("redundant", "searched", False),
    "search_rate": ("searched", "rollouts", False),
    "mean_searches": ("searches", "rollouts", False),
    "accuracy": ("correct", "rollouts", False),
    "tpc": ("cost", "correct", True),
}
COLUMNS = ("questions", "answerable_no_search", "rollouts", "searched", "redundant", "searches", "correct", "cost")
STEP_FIELD = "training_step"


def step_of(record: ExecutionRecord) -> int | None:
    """A record's training step: its `training_step` (an imported rollout's), else its
    condition's `rollout.step`."""
    extra = record.model_extra or {}
    value = extra.get(STEP_FIELD, record.condition.get("rollout.step"))
    return None if value is None else int(value)


def question_rows(records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig) -> dict[str, np.ndarray]:
    """Per question of one step: the sums of `COLUMNS` (see the module docstring)."""
    by_question: dict[str, list[ExecutionRecord]] = {}
    for r in scored(records):
        if not is_unparseable(r, judge):
            by_question.setdefault(r.question_id, []).append(r)
    rows = {}
    for qid, rs in by_question.items():
        correct = [is_correct(r, judge) for r in rs]
        answerable = any(c and r.search_calls == 0 for r, c in zip(rs, correct))
        searched = sum(1 for r in rs if r.search_calls > 0)
        rows[qid] = np.array(
            [
                1.0,
                float(answerable),
                float(len(rs)),
                float(searched),
                float(searched if answerable else 0),
                float(sum(r.search_calls for r in rs)),
                float(sum(correct)),
                float(sum(execution_cost(r.output_tokens, r.input_tokens, r.search_calls, cfg) for r in rs)),
            ]
        )
    return rows


def step_statistics(
    records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig, boot: QuestionBootstrap
) -> dict[str, Any]:
    """The statistics of one step's records, each with its `_ci` (question-clustered bootstrap)."""
    rows = question_rows(records, judge, cfg)
    qids = sorted(rows)
    matrix = np.vstack([rows[q] for q in qids]) if qids else np.zeros((0, len(COLUMNS)))
    totals = matrix.sum(axis=0) if qids else np.zeros(len(COLUMNS))
    col = {name: i for i, name in enumerate(COLUMNS)}
    out: dict[str, Any] = {
        name: float(totals[col[name]]) for name in ("questions", "rollouts", "searched", "redundant")
    }
    out["questions"] = int(out["questions"])
    out["rollouts"] = int(out["rollouts"])
    resampled = boot.sums(qids, qids, matrix) if boot.enabled and qids else None
    for stat, (num, den, inf) in STATISTICS.items():
        n, d = totals[col[num]], totals[col[den]]
        if inf:
            out[stat] = tpc_value(n, d)
        else:
            out[stat] = float(n / d) if d else None
        samples = None
        if resampled is not None:
            samples = ratio_samples(resampled[:, col[num]], resampled[:, col[den]], zero_den_inf=inf)
        out[f"{stat}_ci"] = percentile_ci(samples, cfg.confidence) if out[stat] is not None else None
    return out


def training_boundary(
    records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig = MetricsConfig()
) -> dict[str, Any]:
    """Per training step (ascending), the boundary statistics of its rollouts; records without a
    step are counted apart (`no_step`). `records` must already carry `judge`'s labels."""
    by_step: dict[int, list[ExecutionRecord]] = {}
    no_step = 0
    for r in records:
        s = step_of(r)
        if s is None:
            no_step += 1
        else:
            by_step.setdefault(s, []).append(r)
    boot = QuestionBootstrap(cfg.bootstrap, cfg.seed)
    steps = [{"step": s, **step_statistics(by_step[s], judge, cfg, boot)} for s in sorted(by_step)]
    return {
        "judge": judge,
        "lam": cfg.lam,
        "mu": cfg.mu,
        "bootstrap": cfg.bootstrap,
        "seed": cfg.seed,
        "confidence": cfg.confidence,
        "no_step": no_step,
        "steps": steps,
        "definitions": {
            "answerable_without_search": "share of questions with a correct 0-search rollout at that step "
            "(a lower bound: from rollouts, not forks)",
            "redundant_search_share": "share of searching rollouts whose question has a correct 0-search "
            "rollout at the same step",
            "tpc": "sum(g + lam*x + mu*|S|) / sum(correct) over the step's rollouts",
        },
    }
