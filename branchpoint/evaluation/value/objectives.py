"""Scoring objectives compared on the same executions: reference equivalence vs lexical targets.

Search-value study, Appendix C ("Answer scoring", "Deterministic containment") and Figure 7:
the same executions are scored under reference equivalence (the study's main target: the
judge's `correct` reward here), normalised containment and exact match, and the mean gain
E[Δ̄] and each action's success are reported under each, with intervals.

- `containment` reward: 1 when a nonempty reference alias occurs as a contiguous token
  sequence of the answer after normalisation (case, punctuation and articles removed,
  whitespace collapsed: `judges.normalize_answer`); no aliases are added.
- `exact_match` reward: 1 when the normalised answer equals a normalised alias.
- Both give 0 to failed outputs (status `malformed`, `length`) and to empty or UNKNOWN answers
  (`outcomes.is_unknown_answer`) on answerable questions; on an unanswerable question (no gold
  answers) an UNKNOWN answer scores 1, as under `correct`.
- Missing transport stays incomplete until recovery: `incomplete` records are never scored
  (not as 0 either); `build_states` leaves them out and counts them, under every objective.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.judges import contained_gold, normalize_answer
from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval, single_component_strata
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.rewards import is_unknown_answer, reward
from branchpoint.evaluation.value.scores import balanced_mean
from branchpoint.traces import ExecutionRecord

LEXICAL_OBJECTIVES: tuple[str, ...] = ("containment", "exact_match")
FAILED = ("malformed", "length")


def _lexical(record: ExecutionRecord, match: Any) -> float:
    if record.status in FAILED:
        return 0.0
    unknown = is_unknown_answer(record.final_answer)
    if not record.answerable or not record.gold_answers:
        return 1.0 if unknown else 0.0
    if unknown:
        return 0.0
    return 1.0 if match(record.final_answer or "", record.gold_answers) else 0.0


def contains_reference(answer: str, gold_answers: Sequence[str]) -> bool:
    """A nonempty normalised alias occurs as a contiguous token sequence of the normalised answer."""
    return contained_gold(answer, gold_answers) is not None


def exact_reference(answer: str, gold_answers: Sequence[str]) -> bool:
    """The normalised answer equals a nonempty normalised alias."""
    norm = normalize_answer(answer)
    return any(norm == g for a in gold_answers if (g := normalize_answer(a)))


@reward("containment")
def containment_reward(records: Sequence[ExecutionRecord], judge: str) -> np.ndarray:
    """Normalised containment of a reference alias (search-value study, Appendix C,
    "Deterministic containment"); failed and UNKNOWN outputs score 0. The judge is not used."""
    return np.array([_lexical(r, contains_reference) for r in records], dtype=float)


@reward("exact_match")
def exact_match_reward(records: Sequence[ExecutionRecord], judge: str) -> np.ndarray:
    """Normalised exact match with a reference alias; failed and UNKNOWN outputs score 0."""
    return np.array([_lexical(r, exact_reference) for r in records], dtype=float)


def align(states: StateTable, other: StateTable) -> StateTable:
    """`other`'s rows in `states`' row order (same forked records, another reward: same states)."""
    index = other.index()
    missing = [k for k in states.keys if k not in index]
    if missing:
        raise ValueError(f"objective tables differ: {len(missing)} states missing (first {missing[0]})")
    return _reorder(other, [index[k] for k in states.keys])


def _reorder(table: StateTable, rows: list[int]) -> StateTable:
    """`table` with its rows in the order `rows` (a permutation of a subset of its rows)."""
    return table.rows(np.asarray(rows, dtype=int))


def objective_comparison(
    tables: Mapping[str, StateTable], test: np.ndarray, *, reference: str, resamples: int, seed: int, level: float
) -> dict[str, Any]:
    """Mean success per action and mean gain E[Δ̄] under each scoring objective on the same test
    states, with support-component bootstrap intervals (the same resamples for every objective,
    so the paired gain differences against `reference` have intervals too).

    `tables` maps objective name → state table (rows aligned, `align`); the reference objective
    is the main reward. Search-value study, Appendix C: on Test-1632, mean gain +0.0486
    [0.0331, 0.0664] under containment; the main evaluation uses reference equivalence.
    """
    names = list(tables)
    first = tables[names[0]].subset(test)
    cols, labels = [], []
    for name in names:
        t = tables[name].subset(test)
        for part, v in (("think", t.think.mean_y), ("search", t.search.mean_y), ("gain", t.dbar)):
            cols.append(v)
            labels.append((name, part))
    matrix = np.stack(cols, axis=1)
    point = balanced_mean(matrix, first.stratum)
    single = single_component_strata(first.component, first.stratum)
    samples = None
    if resamples > 0 and not single:
        samples = bootstrap_means(matrix, first.component, first.stratum, resamples=resamples, seed=seed)

    def iv(j: int | None, k: int | None = None) -> list[Any] | None:
        if samples is None or j is None:
            return None
        s = samples[:, j] - (samples[:, k] if k is not None else 0.0)
        lo, hi = percentile_interval(s, level)
        return [float(lo), float(hi)]

    out: dict[str, Any] = {"reference": reference, "objectives": {}}
    pos = {lab: j for j, lab in enumerate(labels)}
    for name in names:
        entry = {}
        for part in ("think", "search", "gain"):
            j = pos[(name, part)]
            entry[part] = {"value": float(point[j]), "interval": iv(j)}
        if name != reference:
            j, k = pos[(name, "gain")], pos[(reference, "gain")]
            entry["gain_minus_reference"] = {"value": float(point[j] - point[k]), "interval": iv(j, k)}
        out["objectives"][name] = entry
    c = tables[reference].counts
    out["incomplete_records"] = c.incomplete
    out["note"] = (
        "incomplete (transport) records are not scored under any objective: they stay incomplete "
        "until recovered (re-run them), never counted as wrong"
    )
    if single:
        out["intervals_withheld"] = f"single-component strata: {', '.join(single)}"
    return out
