"""Step labels of a fork study: per saved state, was search needed, redundant or missing?

Definitions (seed 002 §3.1, eq. (1): at a state x, p_a(x) = E[Y^a | x] for the THINK role T and
the SEARCH role S, and the search gain Δ(x) = p_S(x) − p_T(x); §3.3: repeated executions of each
action from the same checkpoint estimate them). Per state, from the m_T and m_S repeats:

- p̂_T = Ȳ_T, p̂_S = Ȳ_S (rewards in [0, 1], `outcomes.build_states`), each with its Wilson
  score interval (`evaluation.wilson.wilson_interval`: the seeds give no per-state interval, theirs
  resample support components across states; Wilson keeps its coverage for a handful of repeats
  where the normal one collapses at 0 or 1);
- Δ̂ = p̂_S − p̂_T with Newcombe's hybrid score interval for a difference of two independent
  proportions (Newcombe 1998, method 10), built from the two Wilson intervals: the repeats of T
  and S are independent draws from the same checkpoint;
- **needed**: SEARCH is significantly better than THINK, the interval of Δ lies above 0
  (lower bound > 0);
- **harmful**: the interval of Δ lies below 0 (search made the outcome worse: seed 000's
  over-searching can lower quality through misleading evidence);
- what the policy did at the state (`searched`: it searched next on its own path) refines
  need into the row's `label`:
  - `needed`: the policy searched and search was needed;
  - `redundant`: the policy searched and search was not needed (Δ's interval not above 0, which
    includes THINK already succeeding: p̂_T = 1 leaves no room for a gain). This is seed 000's
    over-searching (§3.1: a search "when doing so cannot improve response quality") at one state;
  - `missing`: the policy did not search and search was needed;
  - `not_needed`: the policy did not search and search was not needed;
  - when what the policy did is not known, `needed` or `not_needed` by Δ alone.

`search_redundant` and `search_missing` are None when what the policy did is not known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from branchpoint.errors import InputError
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.wilson import wilson_interval

LABELS = ("needed", "redundant", "missing", "not_needed")


@dataclass(frozen=True)
class StepLabel:
    """The label of one state (row i of a `StateTable`); see the module docstring."""

    m_think: int
    m_search: int
    p_think: float
    p_search: float
    p_think_interval: tuple[float, float]
    p_search_interval: tuple[float, float]
    delta: float
    delta_interval: tuple[float, float]
    tokens_think: float
    tokens_search: float
    search_needed: bool
    search_harmful: bool
    searched: bool | None
    search_redundant: bool | None
    search_missing: bool | None
    label: str


def z_of(level: float) -> float:
    """The two-sided normal quantile of a confidence `level` in (0, 1)."""
    if not 0.0 < level < 1.0:
        raise InputError(f"level: expected a confidence level in (0, 1), got {level}")
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


def newcombe_interval(
    sum_s: float, m_s: int, sum_t: float, m_t: int, z: float
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """(Wilson interval of p_S, Wilson interval of p_T, Newcombe hybrid score interval of
    Δ = p_S − p_T): Δ̂ − sqrt((p̂_S − l_S)² + (u_T − p̂_T)²), Δ̂ + sqrt((u_S − p̂_S)² + (p̂_T − l_T)²)."""
    ws, wt = wilson_interval(sum_s, m_s, z), wilson_interval(sum_t, m_t, z)
    if ws is None or wt is None:
        raise InputError("a state needs at least one repeat of each action for an interval")
    ps, pt = sum_s / m_s, sum_t / m_t
    d = ps - pt
    lower = d - math.sqrt((ps - ws[0]) ** 2 + (wt[1] - pt) ** 2)
    upper = d + math.sqrt((ws[1] - ps) ** 2 + (pt - wt[0]) ** 2)
    return (ws[0], ws[1]), (wt[0], wt[1]), (max(-1.0, lower), min(1.0, upper))


def label_of(needed: bool, searched: bool | None) -> str:
    """The row's label from need and what the policy did (module docstring)."""
    if searched is None:
        return "needed" if needed else "not_needed"
    if searched:
        return "needed" if needed else "redundant"
    return "missing" if needed else "not_needed"


def step_labels(states: StateTable, searched: Sequence[bool | None], level: float = 0.95) -> list[StepLabel]:
    """One `StepLabel` per state of `states` (in row order); `searched[i]`: whether the policy
    searched next at state i on its own path (None: not known)."""
    if len(searched) != len(states):
        raise InputError(f"step_labels: {len(searched)} actions for {len(states)} states")
    z = z_of(level)
    out = []
    for i in range(len(states)):
        m_t, m_s = int(states.think.m[i]), int(states.search.m[i])
        sum_t, sum_s = float(states.think.sum_y[i]), float(states.search.sum_y[i])
        ci_s, ci_t, ci_d = newcombe_interval(sum_s, m_s, sum_t, m_t, z)
        needed = ci_d[0] > 0
        did = searched[i]
        out.append(
            StepLabel(
                m_think=m_t,
                m_search=m_s,
                p_think=sum_t / m_t,
                p_search=sum_s / m_s,
                p_think_interval=ci_t,
                p_search_interval=ci_s,
                delta=sum_s / m_s - sum_t / m_t,
                delta_interval=ci_d,
                tokens_think=float(states.think.mean_tokens[i]),
                tokens_search=float(states.search.mean_tokens[i]),
                search_needed=needed,
                search_harmful=ci_d[1] < 0,
                searched=did,
                search_redundant=None if did is None else bool(did and not needed),
                search_missing=None if did is None else bool(not did and needed),
                label=label_of(needed, did),
            )
        )
    return out
