"""Per-execution quantities, their sums over any set of executions, and bootstrap resamples of them.

Every number in metrics.json is a ratio of two sums over executions (accuracy = Σcorrect / Σn,
TPC = Σcost / Σcorrect, mean latency = Σwall_s / Σn, …). So the metrics turn each scored
execution into one row of named quantities (`COLUMNS`), sum rows per (condition, category)
cell, and resample those sums by question (`bootstrap.QuestionBootstrap`); pooled numbers add
cells. `Sums` carries a point sum and B resampled sums of every column.

Definitions (each written once, here or in the module named):

- *correct*: answerable and `answer` label CORRECT, or unanswerable and `abstention` label
  ABSTAINED (`is_correct`);
- *cost* of an execution and *TPC* (Σ cost / Σ correct) are defined in `cost` (`execution_cost`,
  `tpc_value`, the weights λ and μ);
- *outcome*: `correct_answer` (answerable, CORRECT), `wrong_answer` (answerable, INCORRECT or
  NOT_ATTEMPTED), `correct_abstention` (unanswerable, ABSTAINED), `failed_abstention`
  (unanswerable, ANSWERED); TPC by outcome is Σ cost / n within each outcome (cost per
  execution of that outcome), not a ratio to correct answers;
- *latency*: `wall_s` per execution; model-call latency = Σ `latency_s` of the execution's
  model steps (decide / answer / forced_answer), per execution with at least one model step
  and per call; search latency = Σ `latency_s` of search steps per execution;
- executions with status `incomplete` are never scored (counted as `n_incomplete`); those whose
  deciding label is UNPARSEABLE are left out too (counted as `n_unparseable`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.bootstrap import QuestionBootstrap, percentile_ci, ratio_samples
from branchpoint.evaluation.cost import COST_CHANNELS, MetricsConfig, cost_channels, execution_cost
from branchpoint.evaluation.judges import UNPARSEABLE, needed_kind
from branchpoint.traces import STEP_KINDS, ExecutionRecord

# Keys of a category bucket, in report order; unanswerable records without a category go under
# "unanswerable".
CATEGORY_ORDER: tuple[str, ...] = ("answerable", "AU", "FP", "UC", "unanswerable")
OUTCOMES: tuple[str, ...] = ("correct_answer", "wrong_answer", "correct_abstention", "failed_abstention")
MODEL_STEP_KINDS: frozenset[str] = frozenset({"decide", "answer", "forced_answer"})


def is_model_step(step: Any) -> bool:
    """A model call: one of our model step kinds, or a step of a kind we do not know (a foreign
    trace's) that carries usage."""
    if step.kind in MODEL_STEP_KINDS:
        return True
    return step.kind not in STEP_KINDS and step.usage is not None


#: Evidence-balance groups of an unanswerable execution by its positive (P) and negative (N)
#: documents: only positive (P > 0 = N), positive ≥ negative (P ≥ N > 0), negative > positive
#: (N > P > 0), only negative (N > 0 = P), and no judged evidence (P = N = 0).
EVIDENCE_GROUPS: tuple[str, ...] = (
    "only_positive",
    "positive_ge_negative",
    "negative_gt_positive",
    "only_negative",
    "no_evidence",
)


# --------------------------------------------------------------------------------------------
# Labels, keys and the formulas
# --------------------------------------------------------------------------------------------


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


def is_unparseable(record: ExecutionRecord, judge: str) -> bool:
    """True when the label that decides correctness is UNPARSEABLE (left out of the metrics)."""
    return judgment_label(record, judge, needed_kind(record)) == UNPARSEABLE


def outcome_of(answerable: bool, correct: bool) -> str:
    """correct_answer / wrong_answer (incl. not attempted) / correct_abstention / failed_abstention."""
    if answerable:
        return "correct_answer" if correct else "wrong_answer"
    return "correct_abstention" if correct else "failed_abstention"


def record_outcome(record: ExecutionRecord, judge: str) -> str:
    """The outcome of a judged record (see `outcome_of`)."""
    return outcome_of(record.answerable, is_correct(record, judge))


def scored(records: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
    """The records that count: every status except `incomplete`."""
    return [r for r in records if r.status != "incomplete"]


def category_key(record: ExecutionRecord) -> str:
    """Bucket of a record: "answerable", its category (AU / FP / UC), or "unanswerable"."""
    if record.answerable:
        return "answerable"
    return record.category or "unanswerable"


# --------------------------------------------------------------------------------------------
# Rows and sums
# --------------------------------------------------------------------------------------------

#: The per-execution budgets a record's `budget` block reports (`agents.budget.budget_block`):
#: the search cap and the token budget, each with its limit field and its use field.
BUDGETS: dict[str, tuple[str, str]] = {
    "search_cap": ("search_cap", "searches"),
    "token_budget": ("token_budget", "tokens"),
}
#: Per budget: executions that had it, the limit and the use (summed), executions that reached
#: it (use ≥ limit), executions whose answer it forced (`forced_by`).
BUDGET_QUANTITIES: tuple[str, ...] = ("n", "limit", "used", "hit", "forced")

COLUMNS: tuple[str, ...] = (
    "n",
    "answerable",
    "unanswerable",
    "correct_answer",
    "correct_abstention",
    "correct",
    "generated",
    "input",
    "search",
    "cost",
    "search_calls",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "wall_s",
    "model_latency_s",
    "model_calls",
    "search_latency_s",
    "has_model_steps",
    *(f"n_{o}" for o in OUTCOMES),
    *(f"cost_{o}" for o in OUTCOMES),
    "ev_positive",
    "ev_negative",
    "ev_unparseable",
    "ev_ans_positive",
    "ev_ans_negative",
    "ev_ans_unparseable",
    *(f"ev_{g}" for g in EVIDENCE_GROUPS),
    *(f"ev_{g}_abstained" for g in EVIDENCE_GROUPS),
    *(f"{b}_{q}" for b in BUDGETS for q in BUDGET_QUANTITIES),
)
_INDEX = {name: i for i, name in enumerate(COLUMNS)}


def evidence_counts(record: ExecutionRecord, judge: str) -> tuple[int, int, int]:
    """(positive, negative, unparseable) evidence documents the judge labelled on this record.

    One label per document: the judge's last evidence judgment for each `doc_id`.
    """
    labels: dict[str, str] = {}
    for i, j in enumerate(record.judgments):
        if j.judge == judge and j.kind == "evidence":
            labels[str(getattr(j, "doc_id", None) or f"#{i}")] = j.label.strip().upper()
    values = list(labels.values())
    return values.count("POSITIVE"), values.count("NEGATIVE"), values.count(UNPARSEABLE)


def evidence_group(positive: int, negative: int) -> str:
    """The evidence-balance group of P positive and N negative documents (see EVIDENCE_GROUPS)."""
    if positive == 0 and negative == 0:
        return "no_evidence"
    if negative == 0:
        return "only_positive"
    if positive == 0:
        return "only_negative"
    return "positive_ge_negative" if positive >= negative else "negative_gt_positive"


def record_row(record: ExecutionRecord, judge: str, cfg: MetricsConfig) -> np.ndarray:
    """The quantities of one scored execution, in `COLUMNS` order."""
    row = np.zeros(len(COLUMNS))

    def put(name: str, value: float) -> None:
        row[_INDEX[name]] = value

    correct = is_correct(record, judge)
    outcome = outcome_of(record.answerable, correct)
    g, x, s = record.output_tokens, record.input_tokens, record.search_calls
    gen, inp, search = cost_channels(g, x, s, cfg)
    cost = execution_cost(g, x, s, cfg)
    model_steps = [st for st in record.steps if is_model_step(st)]
    put("n", 1)
    put("answerable", record.answerable)
    put("unanswerable", not record.answerable)
    put("correct_answer", record.answerable and correct)
    put("correct_abstention", (not record.answerable) and correct)
    put("correct", correct)
    put("generated", gen)
    put("input", inp)
    put("search", search)
    put("cost", cost)
    put("search_calls", s)
    put("input_tokens", x)
    put("output_tokens", g)
    put("reasoning_tokens", record.reasoning_tokens)
    put("wall_s", record.wall_s)
    put("model_latency_s", sum(st.latency_s for st in model_steps))
    put("model_calls", len(model_steps))
    put("search_latency_s", sum(st.latency_s for st in record.steps if st.kind == "search"))
    put("has_model_steps", bool(model_steps))
    put(f"n_{outcome}", 1)
    put(f"cost_{outcome}", cost)
    if not record.answerable:
        pos, neg, bad = evidence_counts(record, judge)
        group = evidence_group(pos, neg)
        put("ev_positive", pos)
        put("ev_negative", neg)
        put("ev_unparseable", bad)
        put(f"ev_{group}", 1)
        put(f"ev_{group}_abstained", correct)
    else:
        pos, neg, bad = evidence_counts(record, judge)
        put("ev_ans_positive", pos)
        put("ev_ans_negative", neg)
        put("ev_ans_unparseable", bad)
    for name, value in budget_row(record).items():
        put(name, value)
    return row


def budget_row(record: ExecutionRecord) -> dict[str, float]:
    """The budget quantities of one record from its `budget` block (none without one, or for a
    budget it did not have): per budget `n` = 1, `limit`, `used`, `hit` (used ≥ limit) and
    `forced` (its answer forced by that budget)."""
    block = (record.model_extra or {}).get("budget")
    out: dict[str, float] = {}
    if not isinstance(block, dict):
        return out
    for name, (limit_key, used_key) in BUDGETS.items():
        limit, used = block.get(limit_key), block.get(used_key)
        if not isinstance(limit, (int, float)) or limit <= 0 or not isinstance(used, (int, float)):
            continue
        out[f"{name}_n"] = 1
        out[f"{name}_limit"] = float(limit)
        out[f"{name}_used"] = float(used)
        out[f"{name}_hit"] = float(used >= limit)
        out[f"{name}_forced"] = float(block.get("forced_by") == name)
    return out


class Sums:
    """Point sums of every column over a set of executions, with B resampled sums (or none)."""

    def __init__(
        self, point: np.ndarray, boot: np.ndarray | None, n_incomplete: int = 0, n_unparseable: int = 0
    ) -> None:
        self.point = point
        self.boot = boot
        self.n_incomplete = n_incomplete
        self.n_unparseable = n_unparseable

    @classmethod
    def empty(cls, n_resamples: int) -> Sums:
        return cls(np.zeros(len(COLUMNS)), np.zeros((n_resamples, len(COLUMNS))) if n_resamples else None)

    def __add__(self, other: Sums) -> Sums:
        boot = None if self.boot is None or other.boot is None else self.boot + other.boot
        return Sums(
            self.point + other.point,
            boot,
            self.n_incomplete + other.n_incomplete,
            self.n_unparseable + other.n_unparseable,
        )

    def total(self, name: str) -> float:
        return float(self.point[_INDEX[name]])

    def count(self, name: str) -> int:
        return round(self.total(name))

    def ratio(self, num: str, den: str, *, zero_den_inf: bool = False) -> tuple[float | None, np.ndarray | None]:
        """(point, resampled values) of Σnum / Σden; where Σden = 0: None, or +inf if `zero_den_inf`."""
        n, d = self.total(num), self.total(den)
        point: float | None
        if d == 0:
            point = math.inf if zero_den_inf else None
        else:
            point = n / d
        samples = None
        if self.boot is not None:
            samples = ratio_samples(self.boot[:, _INDEX[num]], self.boot[:, _INDEX[den]], zero_den_inf=zero_den_inf)
        return point, samples


def cell_sums(
    rows: list[tuple[str, np.ndarray]],
    question_set: list[str],
    boot: QuestionBootstrap,
    n_incomplete: int = 0,
    n_unparseable: int = 0,
) -> Sums:
    """Sums of (question_id, row) pairs, resampled with the question set's bootstrap draws."""
    values = np.array([r for _, r in rows]).reshape(len(rows), len(COLUMNS))
    point = values.sum(axis=0)
    resampled = boot.sums(question_set, [q for q, _ in rows], values) if boot.enabled else None
    return Sums(point, resampled, n_incomplete, n_unparseable)


def set_stat(
    out: dict[str, Any], name: str, value: float | None, samples: np.ndarray | None, cfg: MetricsConfig
) -> None:
    """out[name] = value and out[name + "_ci"] = its percentile interval (None when undefined)."""
    out[name] = value
    out[f"{name}_ci"] = None if value is None else percentile_ci(samples, cfg.confidence)


def summary(s: Sums, cfg: MetricsConfig) -> dict[str, Any]:
    """The flat metrics of one set of executions, each with a sibling `<name>_ci` interval."""
    n = s.count("n")
    out: dict[str, Any] = {
        "n": n,
        "n_answerable": s.count("answerable"),
        "n_unanswerable": s.count("unanswerable"),
        "n_incomplete": s.n_incomplete,
        "n_unparseable": s.n_unparseable,
        "n_correct": s.count("correct"),
    }
    set_stat(out, "answer_accuracy", *s.ratio("correct_answer", "answerable"), cfg)
    set_stat(out, "abstention_accuracy", *s.ratio("correct_abstention", "unanswerable"), cfg)
    set_stat(out, "overall_accuracy", *s.ratio("correct", "n"), cfg)
    if n:
        set_stat(out, "tpc", *s.ratio("cost", "correct", zero_den_inf=True), cfg)
    else:
        set_stat(out, "tpc", None, None, cfg)
    for name in ("search_calls", "input_tokens", "output_tokens", "reasoning_tokens"):
        set_stat(out, f"mean_{name}", *s.ratio(name, "n"), cfg)
    set_stat(out, "mean_cost", *s.ratio("cost", "n"), cfg)
    channels: dict[str, Any] = {}
    for channel in COST_CHANNELS:
        entry: dict[str, Any] = {"total": s.total(channel)}
        set_stat(entry, "share", *s.ratio(channel, "cost"), cfg)
        if n:
            set_stat(entry, "per_correct", *s.ratio(channel, "correct", zero_den_inf=True), cfg)
        else:
            set_stat(entry, "per_correct", None, None, cfg)
        channels[channel] = entry
    out["tpc_channels"] = channels
    by_outcome: dict[str, Any] = {}
    for outcome in OUTCOMES:
        entry = {"n": s.count(f"n_{outcome}")}
        set_stat(entry, "cost_per_execution", *s.ratio(f"cost_{outcome}", f"n_{outcome}"), cfg)
        entry["cost_share"] = s.ratio(f"cost_{outcome}", "cost")[0]
        by_outcome[outcome] = entry
    out["tpc_by_outcome"] = by_outcome
    set_stat(out, "mean_wall_s", *s.ratio("wall_s", "n"), cfg)
    set_stat(out, "mean_model_latency_s", *s.ratio("model_latency_s", "has_model_steps"), cfg)
    set_stat(out, "mean_model_call_latency_s", *s.ratio("model_latency_s", "model_calls"), cfg)
    set_stat(out, "mean_search_latency_s", *s.ratio("search_latency_s", "n"), cfg)
    return out


def budget_summary(s: Sums, cfg: MetricsConfig) -> dict[str, Any]:
    """How much of each per-execution budget was used (`agent.search_cap`, `agent.token_budget`),
    over the executions whose record states that budget (its `budget` block), TPC-style: ratios
    of sums, each with its interval. Per budget: `n`, `mean_limit`, `mean_used` (Σ used / n),
    `use_share` (Σ used / Σ limit), `hit_share` (share with used ≥ limit), `forced_share` (share
    whose answer that budget forced); None for a budget no execution had."""
    out: dict[str, Any] = {}
    for name in BUDGETS:
        n = s.count(f"{name}_n")
        if n == 0:
            out[name] = None
            continue
        entry: dict[str, Any] = {"n": n, "mean_limit": s.total(f"{name}_limit") / n}
        set_stat(entry, "mean_used", *s.ratio(f"{name}_used", f"{name}_n"), cfg)
        set_stat(entry, "use_share", *s.ratio(f"{name}_used", f"{name}_limit"), cfg)
        set_stat(entry, "hit_share", *s.ratio(f"{name}_hit", f"{name}_n"), cfg)
        set_stat(entry, "forced_share", *s.ratio(f"{name}_forced", f"{name}_n"), cfg)
        out[name] = entry
    return out


def negative_share(s: Sums, positive: str, negative: str) -> tuple[float | None, np.ndarray | None]:
    """Negative-evidence share = Σ negative documents / Σ (positive + negative) documents.

    Over-searching study §5.2, Table 10 (share of retrieved documents containing negative
    evidence, per model, for unanswerable and for answerable queries). Documents are counted
    once per execution (distinct doc_id); unparseable judgments are left out. None without
    judged documents; resampled by question like every other ratio.
    """
    docs = s.total(positive) + s.total(negative)
    point = s.total(negative) / docs if docs else None
    samples = None
    if s.boot is not None:
        i_pos, i_neg = _INDEX[positive], _INDEX[negative]
        samples = ratio_samples(s.boot[:, i_neg], s.boot[:, i_pos] + s.boot[:, i_neg])
    return point, samples


def evidence_summary(s: Sums, cfg: MetricsConfig) -> dict[str, Any]:
    """Evidence balance of the unanswerable executions in `s` (groups, abstention per group,
    negative share) and the negative share of the answerable executions' documents."""
    out: dict[str, Any] = {
        "n_unanswerable": s.count("unanswerable"),
        "n_with_evidence": s.count("unanswerable") - s.count("ev_no_evidence"),
        "n_documents": s.count("ev_positive") + s.count("ev_negative"),
        "n_negative": s.count("ev_negative"),
        "n_unparseable_documents": s.count("ev_unparseable"),
    }
    set_stat(out, "negative_share", *negative_share(s, "ev_positive", "ev_negative"), cfg)
    groups = {}
    for group in EVIDENCE_GROUPS:
        entry: dict[str, Any] = {"n": s.count(f"ev_{group}")}
        set_stat(entry, "abstention_accuracy", *s.ratio(f"ev_{group}_abstained", f"ev_{group}"), cfg)
        groups[group] = entry
    out["groups"] = groups
    answerable: dict[str, Any] = {
        "n_answerable": s.count("answerable"),
        "n_documents": s.count("ev_ans_positive") + s.count("ev_ans_negative"),
        "n_negative": s.count("ev_ans_negative"),
        "n_unparseable_documents": s.count("ev_ans_unparseable"),
    }
    set_stat(answerable, "negative_share", *negative_share(s, "ev_ans_positive", "ev_ans_negative"), cfg)
    out["answerable"] = answerable
    return out
