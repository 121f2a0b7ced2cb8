"""Metrics of repeated executions (`run.epochs`): pass@k, pass^k, flip rate, and the reliability
(ICC(1)) of the agent's decisions, per condition and per category, with question-clustered
bootstrap intervals.

An *epoch* is one of the independent executions of a question under a condition: the run's own
records (no fork branch, no replay) of one (condition, question), told apart by `repeat`
(epoch e has `repeat = e`; an inspect_ai sample's epoch − 1 when imported). The records that
count are the ones every other metric counts (scored, with a parseable deciding label: see
`tally`); a question's n is its number of such epochs, c the number of them that are correct.

Definitions (none of them is in the seed studies, 000 and 002; each names its source):

- **pass@k** (`pass_at_k`) = mean over questions with n ≥ k of 1 − C(n − c, k) / C(n, k): the
  chance that at least one of k epochs drawn without replacement is correct, the unbiased
  estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code", §2.1, eq. 1).
  pass@1 is the question-weighted accuracy.
- **pass^k** (`pass_hat_k`) = mean over questions with n ≥ k of C(c, k) / C(n, k): the chance
  that all k are correct (Yao et al. 2024, "τ-bench", §5.1, the unbiased pass^k of repeated trials).
- **flip rate** = share of questions with n ≥ 2 whose correctness differs across epochs
  (0 < c < n): the questions where the epoch drawn decides the outcome.
- **ICC(1)** (`icc1`) of a decision: one-way random-effects intraclass correlation, questions as
  the random groups and epochs as the replicates (Shrout & Fleiss 1979, "Intraclass
  correlations: uses in assessing rater reliability", case 1, ICC(1,1); McGraw & Wong 1996, ICC(1)):
  ICC = (MSB − MSW) / (MSB + (k₀ − 1)·MSW), with MSB = SSB / (a − 1), MSW = SSW / (N − a) over a
  questions and N executions, and for unequal n_i the average group size
  k₀ = (N − Σ n_i² / N) / (a − 1) (Snedecor & Cochran, Statistical Methods, §13.8). 1: the decision is a
  property of the question; 0 (or below): it is as likely to change between epochs of one
  question as between questions. Undefined (None) with fewer than 2 questions, no replicate
  (N = a), or no variance at all. The decisions: `searched` (search_calls > 0), `abstained`
  (the judge's abstention label ABSTAINED; where the judge gave no abstention label, an answer
  label NOT_ATTEMPTED; an UNPARSEABLE label leaves the execution out of this decision), and
  `n_searches` (search_calls, a count).

Intervals are the metrics' question bootstrap (`bootstrap.QuestionBootstrap`): questions are
resampled within each condition with all their epochs (the same draws as the condition's other
metrics), and each statistic is recomputed from the resampled per-question sums; a category's
interval uses its condition's draws.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.bootstrap import QuestionBootstrap, ratio_samples
from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.evaluation.judges import UNPARSEABLE
from branchpoint.evaluation.tally import CATEGORY_ORDER, category_key, is_correct, is_unparseable, scored, set_stat
from branchpoint.traces import ExecutionRecord

#: The decisions whose reliability across epochs is reported, in report order.
DECISIONS: tuple[str, ...] = ("searched", "abstained", "n_searches")
#: pass@k and pass^k are reported for k = 1 … this many, and for the most epochs of any question.
MAX_LISTED_K = 10


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n − c, k) / C(n, k): at least one of k of n epochs (c correct) is correct (Chen et al. 2021)."""
    _check_counts(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k): all k of n epochs (c correct) are correct (pass^k, Yao et al. 2024, τ-bench)."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"expected 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


#: Per-question sufficient statistics of the one-way ANOVA, in this column order: groups (1),
#: n_i, Σx, Σx², (Σx)² / n_i, n_i².
_ANOVA_COLUMNS = 6


def anova_row(values: Sequence[float]) -> np.ndarray:
    """One question's ICC sufficient statistics (`_ANOVA_COLUMNS`): sums over questions of these
    rows, plain or bootstrap-weighted, give every term of ICC(1)."""
    x = np.asarray(values, dtype=np.float64)
    n = float(x.size)
    s = float(x.sum())
    return np.array([1.0, n, s, float((x * x).sum()), s * s / n, n * n])


def icc1_from_sums(sums: np.ndarray) -> np.ndarray:
    """ICC(1) from summed `anova_row`s (… × 6, e.g. B bootstrap resamples); NaN where undefined."""
    sums = np.asarray(sums, dtype=np.float64)
    a, n, s, ss, s2n, n2 = (sums[..., i] for i in range(_ANOVA_COLUMNS))
    with np.errstate(invalid="ignore", divide="ignore"):
        ssb = s2n - s * s / n
        ssw = ss - s2n
        msb = ssb / (a - 1)
        msw = ssw / (n - a)
        k0 = (n - n2 / n) / (a - 1)
        den = msb + (k0 - 1) * msw
        icc = (msb - msw) / den
    undefined = (a < 2) | (n - a < 1) | ~np.isfinite(icc) | np.isclose(den, 0.0, atol=1e-12)
    return np.where(undefined, np.nan, icc)


def icc1(groups: Iterable[Sequence[float]]) -> float | None:
    """ICC(1) of values grouped by question (one group per question, one value per epoch); None
    when undefined (see the module docstring)."""
    rows = [anova_row(g) for g in groups if len(g)]
    if not rows:
        return None
    value = float(icc1_from_sums(np.sum(rows, axis=0)))
    return None if math.isnan(value) else value


def abstained(record: ExecutionRecord, judge: str) -> bool | None:
    """Whether the execution abstained, by `judge`: its last abstention label, else (a judge that
    labels answerable questions only by answer) an answer label NOT_ATTEMPTED; None when the
    label is UNPARSEABLE or the judge gave neither."""
    for kind, yes in (("abstention", "ABSTAINED"), ("answer", "NOT_ATTEMPTED")):
        labels = [j.label.strip().upper() for j in record.judgments if j.judge == judge and j.kind == kind]
        if labels:
            return None if labels[-1] == UNPARSEABLE else labels[-1] == yes
    return None


class _Question:
    """One question's epochs under one condition: correctness and decisions, in epoch order."""

    def __init__(self, category: str) -> None:
        self.category = category
        self.correct: list[bool] = []
        self.decisions: dict[str, list[float]] = {d: [] for d in DECISIONS}

    def add(self, record: ExecutionRecord, judge: str) -> None:
        self.correct.append(is_correct(record, judge))
        self.decisions["searched"].append(float(record.search_calls > 0))
        self.decisions["n_searches"].append(float(record.search_calls))
        gave_up = abstained(record, judge)
        if gave_up is not None:
            self.decisions["abstained"].append(float(gave_up))


def epoch_groups(records: Iterable[ExecutionRecord], judge: str) -> dict[str, dict[str, _Question]]:
    """The run's own scored records grouped by condition label and question (epochs in `repeat` order)."""
    out: dict[str, dict[str, _Question]] = {}
    own = [r for r in scored(records) if r.parent is None and r.kind is None and not is_unparseable(r, judge)]
    for r in sorted(own, key=lambda r: r.repeat):
        of_condition = out.setdefault(condition_label(r.condition), {})
        of_condition.setdefault(r.question_id, _Question(category_key(r))).add(r, judge)
    return out


def has_epochs(groups: Mapping[str, Mapping[str, _Question]]) -> bool:
    """True when some question has more than one epoch under some condition."""
    return any(len(q.correct) > 1 for questions in groups.values() for q in questions.values())


def _ks(most: int) -> list[int]:
    return sorted({*range(1, min(most, MAX_LISTED_K) + 1), most})


def _mean_stat(
    qids: list[str], values: list[float], qset: list[str], boot: QuestionBootstrap
) -> tuple[float | None, np.ndarray | None]:
    """Mean over questions of one value each, and its resamples (question-weighted)."""
    if not qids:
        return None, None
    point = sum(values) / len(values)
    if not boot.enabled:
        return point, None
    sums = boot.sums(qset, qids, np.column_stack([values, np.ones(len(values))]))
    return point, ratio_samples(sums[:, 0], sums[:, 1])


def _summary(
    questions: Mapping[str, _Question], qset: list[str], boot: QuestionBootstrap, cfg: MetricsConfig
) -> dict[str, Any]:
    """The epoch metrics of one set of questions (a condition, or one category of it)."""
    counts = [len(q.correct) for q in questions.values()]
    out: dict[str, Any] = {
        "n_questions": len(questions),
        "n_executions": sum(counts),
        "epochs_min": min(counts, default=0),
        "epochs_max": max(counts, default=0),
    }
    passes = []
    for k in _ks(out["epochs_max"]):
        eligible = [(qid, q) for qid, q in questions.items() if len(q.correct) >= k]
        ids = [qid for qid, _ in eligible]
        entry: dict[str, Any] = {"k": k, "n_questions": len(ids)}
        at = [pass_at_k(len(q.correct), sum(q.correct), k) for _, q in eligible]
        hat = [pass_hat_k(len(q.correct), sum(q.correct), k) for _, q in eligible]
        set_stat(entry, "pass_at_k", *_mean_stat(ids, at, qset, boot), cfg)
        set_stat(entry, "pass_hat_k", *_mean_stat(ids, hat, qset, boot), cfg)
        passes.append(entry)
    out["pass"] = passes
    repeated = [(qid, q) for qid, q in questions.items() if len(q.correct) >= 2]
    out["n_questions_repeated"] = len(repeated)
    flips = [float(0 < sum(q.correct) < len(q.correct)) for _, q in repeated]
    set_stat(out, "flip_rate", *_mean_stat([qid for qid, _ in repeated], flips, qset, boot), cfg)
    out["reliability"] = {d: _reliability(questions, d, qset, boot, cfg) for d in DECISIONS}
    return out


def _reliability(
    questions: Mapping[str, _Question], decision: str, qset: list[str], boot: QuestionBootstrap, cfg: MetricsConfig
) -> dict[str, Any]:
    """ICC(1) of one decision over the questions, with the ANOVA's mean squares and its interval."""
    groups = {qid: q.decisions[decision] for qid, q in questions.items() if q.decisions[decision]}
    rows = np.array([anova_row(v) for v in groups.values()]).reshape(len(groups), _ANOVA_COLUMNS)
    total = rows.sum(axis=0)
    a, n = int(total[0]), int(total[1])
    out: dict[str, Any] = {"n_questions": a, "n_executions": n, "mean": total[2] / n if n else None}
    out["ms_between"] = float((total[4] - total[2] ** 2 / n) / (a - 1)) if a >= 2 else None
    out["ms_within"] = float((total[3] - total[4]) / (n - a)) if n > a else None
    point = float(icc1_from_sums(total)) if n else math.nan
    samples = icc1_from_sums(boot.sums(qset, list(groups), rows)) if boot.enabled and groups else None
    set_stat(out, "icc", None if math.isnan(point) else point, samples, cfg)
    return out


def epoch_metrics(
    records: Iterable[ExecutionRecord],
    judge: str,
    questions: Mapping[str, list[str]],
    boot: QuestionBootstrap,
    cfg: MetricsConfig,
    order: Sequence[str] = (),
) -> dict[str, Any] | None:
    """The `epochs` section of metrics.json, or None when no question has more than one epoch.

    `questions` maps each condition label to the question set its other metrics resample (so
    these intervals use the same draws); `order` is the report order of the condition labels.
    """
    groups = epoch_groups(records, judge)
    if not has_epochs(groups):
        return None
    labels = [label for label in order if label in groups] + sorted(set(groups) - set(order))
    by_condition = {}
    for label in labels:
        qset = sorted(set(questions.get(label, [])) | set(groups[label]))
        entry = _summary(groups[label], qset, boot, cfg)
        rank = {k: i for i, k in enumerate(CATEGORY_ORDER)}
        cats = sorted({q.category for q in groups[label].values()}, key=lambda k: (rank.get(k, len(rank)), k))
        entry["by_category"] = {
            cat: _summary({qid: q for qid, q in groups[label].items() if q.category == cat}, qset, boot, cfg)
            for cat in cats
        }
        by_condition[label] = entry
    return {
        "epochs": max(len(q.correct) for qs in groups.values() for q in qs.values()),
        "decisions": list(DECISIONS),
        "by_condition": by_condition,
    }
