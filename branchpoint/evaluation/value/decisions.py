"""Decision quality of the actor's own search decisions: did it search where search was needed?

Over-searching study §1 / §3.1 defines over-searching as invoking search "when doing so cannot
improve response quality"; the search-value study (§3) measures what search can improve at a
saved state x as the gain Δ(x) = p_S − p_T between its SEARCH and THINK continuations. Here:

- *Need* at a scored state x (`outcomes.StateTable`, `initial` or `after_search_k`): rule
  `gain` (the default): search is needed when the estimated gain Δ̄(x) = Ȳ_S − Ȳ_T > 0, i.e.
  search improves the reward there, the zero-price oracle's choice (a tie, Δ̄ = 0, is not a
  need: search cannot improve on THINK); rule `think_fails`: needed when THINK fails, Ȳ_T < 0.5.
  Both read the state's repeats (m per action), so a need is itself an estimate.
- *Decision* at x: what the parent execution (executions.jsonl) did at that boundary. At
  `initial` (step 0, its first decision) and `after_search_k` (step k), it *searched* when its
  `search_calls` exceed k, else it answered. States where it had no choice are left out and
  counted: the search was switched off in its condition, or it answered after k searches with
  a `forced_answer` step (the cap was spent); so are states whose parent is not in
  executions.jsonl (a fork of a fork) or whose parent stopped at k without a valid answer
  (status malformed / length: no decision recorded), and `pending_query` states (the search
  was decided already; STOP / SEARCH / SWITCH there is the fork's choice, not the policy's).
- *Scores*, "searched" against "needed": precision = TP / (TP + FP), recall = TP / (TP + FN),
  F1 = 2TP / (2TP + FP + FN); over-search rate = FP / (FP + TN) (searched where search was not
  needed, among the states that did not need it); under-search rate = FN / (FN + TP) (answered
  where search was needed, among the states that needed it; = 1 − recall). Pooled over the
  states (each state weighs one; strata are not balanced: these are rates of the actor's
  decisions, not stratum-balanced scores), and per step k.
- *Intervals*: percentile intervals over resamples of support components (questions clustered,
  questions sharing a supporting page together; `bootstrap.bootstrap_means` with one stratum,
  the seed and resamples of the study), each ratio formed within a resample; None where a
  resample leaves its denominator empty in every draw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from branchpoint.evaluation.conditions import search_disabled
from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.traces import BOUNDARY_INITIAL, ExecutionRecord, search_count

NeedRule = Literal["gain", "think_fails"]
NEED_DEFINITIONS: dict[str, str] = {
    "gain": "search needed when the state's estimated gain Δ̄ = Ȳ_S − Ȳ_T > 0 (ties: not needed)",
    "think_fails": "search needed when THINK fails at the state: Ȳ_T < 0.5",
}
_COUNTS = ("tp", "fp", "fn", "tn")
#: (name, numerator counts, denominator counts) of each score.
_RATES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("precision", ("tp",), ("tp", "fp")),
    ("recall", ("tp",), ("tp", "fn")),
    ("f1", ("tp", "tp"), ("tp", "tp", "fp", "fn")),
    ("over_search_rate", ("fp",), ("fp", "tn")),
    ("under_search_rate", ("fn",), ("fn", "tp")),
)


def needed(states: StateTable, rule: NeedRule = "gain") -> np.ndarray:
    """Whether search was needed at each state (see the module doc for the two rules)."""
    if rule == "gain":
        return np.asarray(states.dbar > 0, dtype=bool)
    if rule == "think_fails":
        return np.asarray(states.think.mean_y < 0.5, dtype=bool)
    raise ValueError(f"unknown need rule {rule!r} (expected one of: {', '.join(NEED_DEFINITIONS)})")


def decision_step(boundary: str) -> int | None:
    """The decision index of a boundary: 0 at `initial`, k at `after_search_k`, else None."""
    return 0 if boundary == BOUNDARY_INITIAL else search_count(boundary)


def parent_decision(parent: ExecutionRecord | None, step: int) -> str:
    """What the parent did at its decision after `step` searches: `search`, `answer`, or why
    there is no decision to score (`no_parent`, `search_off`, `forced`, `no_decision`,
    `fewer_searches_than_state`)."""
    if parent is None:
        return "no_parent"
    if search_disabled(parent.condition):
        return "search_off"
    if parent.search_calls > step:
        return "search"
    if parent.search_calls < step:
        return "fewer_searches_than_state"  # not this record's path (a foreign or rewritten trace)
    if any(s.kind == "forced_answer" for s in parent.steps):
        return "forced"
    return "answer" if parent.status == "ok" else "no_decision"


def _block(counts: np.ndarray, samples: np.ndarray | None, level: float) -> dict[str, Any]:
    """Counts and scores (with intervals) of one set of decisions; `counts` = [TP, FP, FN, TN]."""
    tp, fp, fn, tn = (int(c) for c in counts)
    out: dict[str, Any] = {
        "n": tp + fp + fn + tn,
        "n_needed": tp + fn,
        "n_searched": tp + fp,
        **dict(zip(_COUNTS, (tp, fp, fn, tn))),
    }
    index = {name: i for i, name in enumerate(_COUNTS)}
    for name, num, den in _RATES:
        d = sum(counts[index[c]] for c in den)
        value = float(sum(counts[index[c]] for c in num) / d) if d else None
        interval = None
        if samples is not None and value is not None:
            sd = sum(samples[:, index[c]] for c in den)
            sn = sum(samples[:, index[c]] for c in num)
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = np.where(sd > 0, sn / np.where(sd > 0, sd, 1.0), np.nan)
            if np.isfinite(ratio).any():
                lo, hi = percentile_interval(ratio[:, None], level)
                interval = [float(lo[0]), float(hi[0])]
        out[name] = {"value": value, "interval": interval}
    return out


def decision_quality(
    states: StateTable,
    parents: Mapping[str, ExecutionRecord],
    rows: np.ndarray,
    *,
    rule: NeedRule = "gain",
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """value.json's `decision_quality`: decision-F1 and over- / under-search rates of the parent
    executions' search decisions against each state's need, pooled and per step, on the states
    `rows` (a boolean mask: the test rows)."""
    need = needed(states, rule)
    excluded: dict[str, int] = {}
    kept: list[tuple[int, int, bool, bool]] = []  # (state, step, searched, needed)
    for i in np.flatnonzero(rows):
        step = decision_step(states.boundary[i])
        if step is None:
            excluded["pending_query"] = excluded.get("pending_query", 0) + 1
            continue
        decision = parent_decision(parents.get(states.keys[i][0]), step)
        if decision not in ("search", "answer"):
            excluded[decision] = excluded.get(decision, 0) + 1
            continue
        kept.append((int(i), step, decision == "search", bool(need[i])))
    head: dict[str, Any] = {"need_rule": rule, "need": NEED_DEFINITIONS[rule], "excluded": excluded}
    if not kept:
        return {
            **head,
            "available": False,
            "reason": "no scored initial / after_search_k state whose parent execution made the decision "
            "(executions.jsonl beside forks.jsonl holds the parents)",
        }
    steps = sorted({k for _, k, _, _ in kept})
    width = len(_COUNTS) * (1 + len(steps))
    values = np.zeros((len(kept), width))
    for r, (_, k, searched, need_i) in enumerate(kept):
        cell = _COUNTS.index(("t" if searched == need_i else "f") + ("p" if searched else "n"))
        values[r, cell] = 1.0
        values[r, len(_COUNTS) * (1 + steps.index(k)) + cell] = 1.0
    samples = None
    if resamples > 0:
        idx = [i for i, _, _, _ in kept]
        samples = bootstrap_means(
            values, states.component[idx], np.zeros(len(kept), dtype=int), resamples=resamples, seed=seed
        )
    total = values.sum(axis=0)
    four = len(_COUNTS)

    def part(j: int) -> dict[str, Any]:
        cols = slice(four * j, four * (j + 1))
        return _block(total[cols], None if samples is None else samples[:, cols], level)

    return {
        **head,
        "available": True,
        "n_states": len(kept),
        "all": part(0),
        "by_step": {str(k): part(1 + j) for j, k in enumerate(steps)},
    }
