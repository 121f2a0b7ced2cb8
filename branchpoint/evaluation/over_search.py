"""Over-search % from the fork engine's minimal searches (`minimal_search.jsonl`, written by
`branchpoint fork --minimal-search`): `read_minimal_search`, `over_search_pct`, `model_average`,
`over_search` (the metrics.json block).

Over-search % = 100 · (mean searches / mean minimal searches − 1) per condition; +inf when every
minimal count is 0. The means run over *all* correct executions, those that needed no search
(searches = minimal = 0, taken from the judged records) included, as the study reports them
(conditions with search switched off take no part: there was nothing to over-search); per model
the conditions of a model are pooled, and `model_average` is the unweighted mean of the
per-model figures (the study's "70.5 % on average" over six models). The bootstrap draws a
question with all its epochs (question-clustered intervals), as every other view does.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.bootstrap import QuestionBootstrap, ratio_samples
from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.evaluation.tally import set_stat
from branchpoint.traces import MINIMAL_SEARCH_FILE, TraceError, iter_json_lines

_MINIMAL_FIELDS = {"question_id": str, "condition": dict, "searches": int, "minimal_searches": int}


def read_minimal_search(path: str | Path) -> list[dict[str, Any]]:
    """Rows of minimal_search.jsonl, checked; errors name the file, line and field."""
    rows: list[dict[str, Any]] = []
    try:
        for lineno, obj in iter_json_lines(path):
            for name, kind in _MINIMAL_FIELDS.items():
                value = obj.get(name)
                ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
                if not ok or (isinstance(value, int) and kind is int and value < 0):
                    raise InputError(
                        f'{path} line {lineno}: field "{name}" missing or invalid '
                        f"(expected {kind.__name__}{' >= 0' if kind is int else ''}; rows are "
                        "{execution_id, question_id, condition, searches, minimal_searches, judge})"
                    )
            rows.append(obj)
    except TraceError as exc:
        raise InputError(str(exc)) from None
    return rows


def _over_search_entry(
    rows: list[dict[str, Any]], questions: list[str], boot: QuestionBootstrap, cfg: MetricsConfig
) -> tuple[dict[str, Any], np.ndarray, np.ndarray | None]:
    values = np.array([[r["searches"], r["minimal_searches"], 1.0, r["searches"] > 0] for r in rows], dtype=float)
    point = values.sum(axis=0)
    resampled = None
    if boot.enabled:
        qset = sorted(set(questions) | {r["question_id"] for r in rows})
        resampled = boot.sums(qset, [r["question_id"] for r in rows], values)
    return _over_search_stats(point, resampled, cfg), point, resampled


def over_search_pct(searches: float, minimal: float) -> float:
    """Over-search % = 100 · (k̄ / k̄* − 1) = 100 · (Σ k / Σ k* − 1) over correct executions.

    Over-searching study, Appendix A.1 (Table 8): k = searches an execution made, k* = the
    fewest searches (a truncation of its search sequence) that still reach the correct outcome;
    both averaged over the queries the model got right. +inf when Σ k* = 0 and Σ k > 0; 0 when
    nothing searched at all.
    """
    if minimal == 0:
        return 0.0 if searches == 0 else math.inf
    return 100.0 * (searches / minimal - 1.0)


def _over_search_stats(point: np.ndarray, resampled: np.ndarray | None, cfg: MetricsConfig) -> dict[str, Any]:
    """Columns: Σk, Σk*, n (correct executions), n that searched."""
    n = int(point[2])
    out: dict[str, Any] = {
        "n": n,
        "n_searched": int(point[3]),
        "n_no_search": n - int(point[3]),
        "mean_searches": point[0] / n if n else None,
        "mean_minimal_searches": point[1] / n if n else None,
    }
    if not n:
        set_stat(out, "over_search_pct", None, None, cfg)
        return out
    samples = None
    if resampled is not None:
        samples = 100.0 * (ratio_samples(resampled[:, 0], resampled[:, 1], zero_den_inf=True) - 1.0)
        samples[(resampled[:, 0] == 0) & (resampled[:, 1] == 0)] = 0.0
    set_stat(out, "over_search_pct", over_search_pct(point[0], point[1]), samples, cfg)
    return out


def model_average(per_model: dict[str, tuple[np.ndarray, np.ndarray | None]], cfg: MetricsConfig) -> dict[str, Any]:
    """The study's average over models: the unweighted mean of per-model over-search % (and of
    per-model mean searches), Appendix A.1 / Table 8 ("70.5 % more searches on average").

    (1/M) Σ_m 100 · (k̄_m / k̄*_m − 1) — not the pooled ratio, which weights models by their
    number of correct executions. Its interval averages the per-model resamples (models as
    strata). +inf when some model's k̄* is 0.
    """
    models = sorted(m for m, (point, _) in per_model.items() if point[2] > 0)
    out: dict[str, Any] = {"n_models": len(models), "models": models}
    if not models:
        set_stat(out, "over_search_pct", None, None, cfg)
        return out
    pcts = [over_search_pct(per_model[m][0][0], per_model[m][0][1]) for m in models]
    out["mean_searches"] = sum(per_model[m][0][0] / per_model[m][0][2] for m in models) / len(models)
    out["mean_minimal_searches"] = sum(per_model[m][0][1] / per_model[m][0][2] for m in models) / len(models)
    samples = None
    if all(per_model[m][1] is not None for m in models):
        stacked = []
        for m in models:
            res = per_model[m][1]
            assert res is not None
            with np.errstate(invalid="ignore", divide="ignore"):
                s_ = 100.0 * (ratio_samples(res[:, 0], res[:, 1], zero_den_inf=True) - 1.0)
            s_[(res[:, 0] == 0) & (res[:, 1] == 0)] = 0.0
            s_[res[:, 2] == 0] = math.nan  # no correct execution of the model drawn
            stacked.append(s_)
        with np.errstate(invalid="ignore"):
            samples = np.mean(np.vstack(stacked), axis=0)
    set_stat(out, "over_search_pct", sum(pcts) / len(pcts), samples, cfg)
    return out


def over_search(
    rows: list[dict[str, Any]] | None,
    questions: dict[str, list[str]],
    boot: QuestionBootstrap,
    cfg: MetricsConfig,
    *,
    no_search: list[dict[str, Any]] | None = None,
    model_of: Any = None,
) -> dict[str, Any]:
    """Over-search % per condition, per model, averaged over models, and pooled (conditions as
    strata), from minimal-search rows plus the correct executions that made no search.

    `questions` maps each condition label to its questions, so a condition resamples the same
    questions as its other metrics. `no_search` are rows {execution_id, question_id, condition,
    searches: 0, minimal_searches: 0} of correct executions without a search (the fork study
    skips them: nothing to truncate); `model_of(label)` names a condition's model.
    """
    if rows is None:
        return {
            "available": False,
            "reason": f"no {MINIMAL_SEARCH_FILE} beside the traces (run `branchpoint fork RUN_DIR --minimal-search`)",
        }
    seen = {r.get("execution_id") for r in rows}
    extra = [r for r in (no_search or []) if r.get("execution_id") not in seen]
    if not rows and not extra:
        return {"available": False, "reason": f"{MINIMAL_SEARCH_FILE} is empty (no correct execution searched)"}
    by_label: dict[str, list[dict[str, Any]]] = {}
    for r in [*rows, *extra]:
        by_label.setdefault(condition_label(r["condition"]), []).append(r)
    per_condition = {}
    width = 4
    total_point = np.zeros(width)
    total_boot = np.zeros((boot.n_resamples, width)) if boot.enabled else None
    per_model: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for label in sorted(by_label):
        entry, point, resampled = _over_search_entry(by_label[label], questions.get(label, []), boot, cfg)
        model = str(model_of(label)) if model_of is not None else label
        entry["model"] = model
        per_condition[label] = entry
        total_point += point
        if total_boot is not None and resampled is not None:
            total_boot += resampled
        m_point, m_boot = per_model.get(
            model, (np.zeros(width), np.zeros((boot.n_resamples, width)) if boot.enabled else None)
        )
        per_model[model] = (m_point + point, None if m_boot is None or resampled is None else m_boot + resampled)
    judges = sorted({str(r.get("judge")) for r in rows if r.get("judge")})
    return {
        "available": True,
        "source": MINIMAL_SEARCH_FILE,
        "judges": judges,
        **_over_search_stats(total_point, total_boot, cfg),
        "by_condition": per_condition,
        "by_model": {m: _over_search_stats(p, b, cfg) for m, (p, b) in sorted(per_model.items())},
        "model_average": model_average(per_model, cfg),
    }
