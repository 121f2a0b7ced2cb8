"""Over-searching metrics: accuracies, Tokens Per Correctness (TPC), cost channels, outcomes,
latency, evidence balance, cross-condition views, metrics of repeated epochs, each with a
bootstrap 95 % interval.

Metrics read judged records (see `judges.judge_records`) and the labels of one judge:

- a record is *correct* when it is answerable and its `answer` label is CORRECT, or
  unanswerable and its `abstention` label is ABSTAINED;
- records with status `incomplete` (transport failures, retried later) are never scored: they
  are excluded from every number and counted as `n_incomplete`; records whose deciding label
  is UNPARSEABLE (an LLM judge that never gave a readable label) likewise, as `n_unparseable`;
- when one `execution_id` appears more than once (an append-only run store after a retry), the
  last record in file order wins;
- token counts are the record totals; `output_tokens` is taken to include reasoning tokens
  (as OpenAI-compatible servers report them), so `reasoning_tokens` is never added on top.

Intervals: every statistic `x` has a sibling `x_ci: [lo, hi]` (None when `x` is undefined or the
bootstrap is off), a percentile interval over question resamples within each condition (see
`bootstrap`). The definitions of outcomes and latency are in `tally`, of cost and TPC in `cost`,
condition labels in `conditions`; the cross-condition views (search effect, search-cap sweep and
ROI, multi-turn, reasoning effort) in `studies`, over-search in `over_search`, the
reasoning-effort × search-cap frontier in `frontier`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from branchpoint.errors import InputError
from branchpoint.evaluation.bootstrap import QuestionBootstrap
from branchpoint.evaluation.conditions import DEFAULT_CONDITION, condition_label, natural_condition_key, search_disabled
from branchpoint.evaluation.cost import MetricsConfig, execution_cost, tpc_value
from branchpoint.evaluation.epochs import epoch_metrics
from branchpoint.evaluation.frontier import effort_cap_frontier
from branchpoint.evaluation.metrics_file import MetricsReport, metrics_file_text
from branchpoint.evaluation.over_search import over_search
from branchpoint.evaluation.studies import ConditionSet, multi_turn, reasoning_effort, search_cap_sweep, search_effect
from branchpoint.evaluation.tally import (
    CATEGORY_ORDER,
    EVIDENCE_GROUPS,
    OUTCOMES,
    Sums,
    budget_summary,
    category_key,
    cell_sums,
    evidence_summary,
    is_correct,
    is_unparseable,
    judgment_label,
    record_outcome,
    record_row,
    scored,
    summary,
)
from branchpoint.evaluation.tpc_sensitivity import tpc_sensitivity
from branchpoint.traces import ExecutionRecord

__all__ = [
    "CATEGORY_ORDER",
    "DEFAULT_CONDITION",
    "EVIDENCE_GROUPS",
    "OUTCOMES",
    "MetricsConfig",
    "by_category",
    "category_key",
    "compute_metrics",
    "condition_label",
    "is_correct",
    "judgment_label",
    "latest_records",
    "metrics_json",
    "record_outcome",
    "scored",
    "summarize",
    "tpc",
]


def tpc(records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig = MetricsConfig()) -> float:
    """Tokens Per Correctness: TPC = Σ_q (g_q + λ·x_q + μ·|S_q|) / Σ_q correct_q.

    g_q = output (generated) tokens, reasoning included; x_q = input tokens; |S_q| = search
    calls; the sums run over scored (non-`incomplete`, parseable) records. Returns +inf when
    nothing is correct.
    """
    rows = [r for r in scored(records) if not is_unparseable(r, judge)]
    total = sum(execution_cost(r.output_tokens, r.input_tokens, r.search_calls, cfg) for r in rows)
    return tpc_value(total, sum(is_correct(r, judge) for r in rows))


def latest_records(records: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
    """One record per execution_id, the last one in order (a retried execution replaces its failure)."""
    latest: dict[str, ExecutionRecord] = {}
    for r in records:
        latest.pop(r.execution_id, None)
        latest[r.execution_id] = r
    return list(latest.values())


def _category_sort(keys: Iterable[str]) -> list[str]:
    order = {k: i for i, k in enumerate(CATEGORY_ORDER)}
    return sorted(keys, key=lambda k: (order.get(k, len(order)), k))


class _Cells:
    """Sums per (condition label, category) cell, resampled per condition's question set."""

    def __init__(self, records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig) -> None:
        self.cfg = cfg
        self.boot = QuestionBootstrap(cfg.bootstrap, cfg.seed)
        self.conditions: dict[str, dict[str, Any]] = {}
        self.run_ids: dict[str, str] = {}
        rows: dict[tuple[str, str], list[tuple[str, Any]]] = {}
        excluded: dict[tuple[str, str], list[int]] = {}  # [incomplete, unparseable]
        labels = []
        for r in records:  # labels first: a collision is reported before any missing judgment
            label = condition_label(r.condition)
            seen = self.conditions.setdefault(label, r.condition)
            if seen != r.condition:
                raise InputError(
                    f'conditions {seen!r} and {r.condition!r} share the label "{label}"; give them distinct values'
                )
            self.run_ids.setdefault(label, r.run_id)
            labels.append(label)
        for label, r in zip(labels, records):
            cell = (label, category_key(r))
            rows.setdefault(cell, [])
            counts = excluded.setdefault(cell, [0, 0])
            if r.status == "incomplete":
                counts[0] += 1
            elif is_unparseable(r, judge):
                counts[1] += 1
            else:
                rows[cell].append((r.question_id, record_row(r, judge, cfg)))
        self.questions: dict[str, list[str]] = {label: [] for label in self.conditions}
        for (label, _), cell_rows in rows.items():
            self.questions.setdefault(label, []).extend(q for q, _ in cell_rows)
        self.rows = rows
        self.cells = {
            cell: cell_sums(cell_rows, self.questions[cell[0]], self.boot, *excluded[cell])
            for cell, cell_rows in rows.items()
        }

    def total(self, cells: Iterable[tuple[str, str]]) -> Sums:
        out = Sums.empty(self.boot.n_resamples)
        for cell in cells:
            out = out + self.cells[cell]
        return out

    def condition_rows(self) -> dict[str, list[tuple[str, Any]]]:
        """Each condition's scored (question id, row) pairs, over all its categories."""
        out: dict[str, list[tuple[str, Any]]] = {label: [] for label in self.conditions}
        for (label, _), cell_rows in self.rows.items():
            out[label].extend(cell_rows)
        return out

    def condition(self, label: str) -> Sums:
        return self.total(c for c in self.cells if c[0] == label)

    def categories(self, label: str | None = None) -> dict[str, Sums]:
        keys = _category_sort({c[1] for c in self.cells if label is None or c[0] == label})
        return {k: self.total(c for c in self.cells if c[1] == k and (label is None or c[0] == label)) for k in keys}


def summarize(records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig = MetricsConfig()) -> dict[str, Any]:
    """The flat metrics of one set of records (no breakdowns), conditions as bootstrap strata."""
    cells = _Cells(records, judge, cfg)
    return summary(cells.total(cells.cells), cfg)


def by_category(
    records: Sequence[ExecutionRecord], judge: str, cfg: MetricsConfig = MetricsConfig()
) -> dict[str, dict[str, Any]]:
    """Flat metrics per category bucket present in the records ("answerable", AU, FP, UC)."""
    cells = _Cells(records, judge, cfg)
    return {k: summary(s, cfg) for k, s in cells.categories().items()}


def _evidence_section(cells: _Cells, labels: list[str], overall: Sums, cfg: MetricsConfig) -> dict[str, Any]:
    judged = sum(
        overall.count(c)
        for c in (
            "ev_positive",
            "ev_negative",
            "ev_unparseable",
            "ev_ans_positive",
            "ev_ans_negative",
            "ev_ans_unparseable",
        )
    )
    if judged == 0:
        return {"available": False, "reason": "no evidence judgments (no retrieved documents, or the judge gave none)"}
    return {
        "available": True,
        **evidence_summary(overall, cfg),
        "by_condition": {label: evidence_summary(cells.condition(label), cfg) for label in labels},
    }


def compute_metrics(
    records: Iterable[ExecutionRecord],
    judge_name: str,
    cfg: MetricsConfig = MetricsConfig(),
    *,
    minimal_search: list[dict[str, Any]] | None = None,
    sweep: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """All over-searching metrics of judged records: overall, by category, by condition, and the
    cross-condition views.

    `tpc` is a float and `math.inf` when nothing is correct (`metrics_json` writes it as the
    string "inf"); accuracies and means are None when their set is empty. `minimal_search` are
    the rows of minimal_search.jsonl (None: the over-search section says there is no data);
    `sweep` the spec's sweep axes with their values in the spec's order (`frontier.spec_sweep`:
    the effort × cap frontier orders efforts by it).
    Every metric pools all epochs of a question (`run.epochs`: each epoch one execution, the
    question resampled with all of them); with more than one epoch, `epochs` adds pass@k, pass^k,
    flip rate and decision reliability (`evaluation.epochs`).
    """
    rows = latest_records(records)
    cells = _Cells(rows, judge_name, cfg)
    labels = sorted(cells.conditions, key=lambda label: (natural_condition_key(cells.conditions[label]), label))
    per_condition = {label: cells.condition(label) for label in labels}
    overall = cells.total(cells.cells)
    cs = ConditionSet(cells.conditions, per_condition, cells.run_ids)
    simulated = any(getattr(r, "model_provider", None) == "sim" for r in rows)
    out = {
        "judge": judge_name,
        "simulated": simulated,
        "lam": cfg.lam,
        "mu": cfg.mu,
        "bootstrap": {
            "resamples": cfg.bootstrap,
            "seed": cfg.seed,
            "confidence": cfg.confidence,
            "unit": "question_id, resampled within each condition (paired across conditions "
            "with the same questions); percentile intervals",
        },
        **summary(overall, cfg),
        "by_category": {k: summary(s, cfg) for k, s in cells.categories().items()},
        "by_condition": {
            label: {
                "condition": cells.conditions[label],
                **summary(per_condition[label], cfg),
                "by_category": {k: summary(s, cfg) for k, s in cells.categories(label).items()},
            }
            for label in labels
        },
        "search_effect": search_effect(cs, cfg),
        "search_cap_sweep": search_cap_sweep(cs, cfg, sweep),
        "over_search": over_search(
            minimal_search,
            cells.questions,
            cells.boot,
            cfg,
            no_search=_no_search_rows(rows, judge_name),
            model_of=cs.model,
        ),
        "evidence_balance": _evidence_section(cells, labels, overall, cfg),
        "multi_turn": multi_turn(cs, cfg),
        "reasoning_effort": reasoning_effort(cs, cfg, sweep),
        "effort_cap_frontier": effort_cap_frontier(
            cells.conditions,
            cells.condition_rows(),
            cells.boot,
            cfg,
            sweep=sweep,
            model_of=cs.model,
            simulated=simulated,
        ),
        "tpc_sensitivity": tpc_sensitivity(per_condition, cfg),
        "budgets": _budget_section(per_condition, overall, cfg),
    }
    epochs = epoch_metrics(rows, judge_name, cells.questions, cells.boot, cfg, labels)
    if epochs is not None:  # some question ran more than once under a condition (`run.epochs`)
        out["epochs"] = epochs
    return out


def _budget_section(per_condition: dict[str, Sums], overall: Sums, cfg: MetricsConfig) -> dict[str, Any]:
    """The use of each per-execution budget (search cap, token budget), overall and by condition
    (`tally.budget_summary`); unavailable when no record states its budgets (foreign traces,
    runs recorded before records carried a `budget` block)."""
    total = budget_summary(overall, cfg)
    if all(v is None for v in total.values()):
        return {"available": False, "reason": "no record states its budgets (no `budget` block)"}
    return {
        "available": True,
        **total,
        "by_condition": {label: budget_summary(sums, cfg) for label, sums in per_condition.items()},
    }


def _no_search_rows(records: Sequence[ExecutionRecord], judge: str) -> list[dict[str, Any]]:
    """Minimal-search rows (k = k* = 0) of the scored, correct executions that made no search
    although they could (conditions with search switched off are left out)."""
    return [
        {
            "execution_id": r.execution_id,
            "question_id": r.question_id,
            "condition": r.condition,
            "searches": 0,
            "minimal_searches": 0,
            "judge": judge,
        }
        for r in scored(records)
        if r.search_calls == 0
        and not search_disabled(r.condition)
        and not is_unparseable(r, judge)
        and is_correct(r, judge)
    ]


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def metrics_json(metrics: dict[str, Any] | MetricsReport) -> str:
    """Metrics as the text of metrics.json (indent 2), through `MetricsReport` (so the file is
    checked against its model and carries `schema_version`); infinities are written as the
    strings "inf" / "-inf", NaN as null."""
    return metrics_file_text(metrics if isinstance(metrics, MetricsReport) else _json_ready(metrics))
