"""Routers: rules that pick THINK (T role) or SEARCH (S role) at a state, scored by utility.

At price λ a branch's utility is U = Y − λ·T/1000 (`scores.utility`), T its own input + output
tokens. A router's value at a state is its expected utility there, estimated from the repeats:
choosing action a gives Ū_a = Ȳ_a − λ·T̄_a/1000. Every router returns per-state utility, tokens
and search rate; value.json reports their stratum-balanced means on the test rows.

- `constant`: always T or always S; `best_constant` picks the one with the higher dev utility.
- `threshold`: S when the forecast gain f = q_S − q_T exceeds τ; τ from a small grid, chosen on
  dev rows at each price (τ = 0, the sign of f, when there are no dev rows).
- `consistency`: the two-probe router. It answers with T twice (the state's first two T
  repeats); if the two answers agree (equal after SQuAD normalisation; two empty answers agree)
  it keeps that answer (reward: the mean of the two probes' rewards), else it runs S (reward Ȳ_S).
  It always pays for both probes: T = T_1 + T_2 (+ T̄_S when it searches). Scored states have at
  least two T repeats, so it is defined at every scored state.
- `sample_informed`: picks the action with the higher mean utility on one half of each
  action's repeats (the first ⌊m/2⌋ by repeat index) and is scored on the other half, and the
  same with the halves swapped; the two are averaged. The choosing draws are not charged: it
  says what knowing a few samples is worth, it is not a deployable router.
- `oracle`: per state the action with the higher Ū (plug-in, optimistic with few repeats).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from branchpoint.evaluation.judges import normalize_answer
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.scores import balanced_mean, utility

TAU_GRID: tuple[float, ...] = (-0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2)


@dataclass
class Routed:
    """Per-state expected utility, tokens and probability of choosing S under one router."""

    utility: np.ndarray
    tokens: np.ndarray
    search: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


def action_utilities(states: StateTable, price: float) -> tuple[np.ndarray, np.ndarray]:
    """(Ū_T, Ū_S) per state at price λ."""
    return (
        utility(states.think.mean_y, states.think.mean_tokens, price),
        utility(states.search.mean_y, states.search.mean_tokens, price),
    )


def route(choose_search: np.ndarray, states: StateTable, price: float) -> Routed:
    """The router that picks S where `choose_search` is true and T elsewhere."""
    u_t, u_s = action_utilities(states, price)
    pick = np.asarray(choose_search, dtype=bool)
    return Routed(
        utility=np.where(pick, u_s, u_t),
        tokens=np.where(pick, states.search.mean_tokens, states.think.mean_tokens),
        search=pick.astype(float),
    )


def constant(action: str, states: StateTable, price: float) -> Routed:
    """Always T (`action="T"`) or always S (`"S"`)."""
    return route(np.full(len(states), action == "S"), states, price)


def best_constant(states: StateTable, dev: np.ndarray, price: float) -> Routed:
    """The constant action with the higher stratum-balanced mean utility on dev rows."""
    u_t, u_s = action_utilities(states, price)
    mean_t, mean_s = balanced_mean(np.stack([u_t[dev], u_s[dev]], axis=1), states.stratum[dev])
    action = "S" if mean_s > mean_t else "T"
    out = constant(action, states, price)
    out.info["action"] = "search" if action == "S" else "think"
    return out


def threshold(f: np.ndarray, tau: float, states: StateTable, price: float) -> Routed:
    """S when the forecast gain q_S − q_T exceeds τ."""
    return route(f > tau, states, price)


def best_threshold(
    f: np.ndarray, states: StateTable, dev: np.ndarray, price: float, grid: tuple[float, ...] = TAU_GRID
) -> tuple[float, dict[str, float]]:
    """The τ of the grid with the highest balanced mean utility on dev rows, and the dev utility
    of each τ. Ties go to the τ nearest 0 (then the smaller): the plain sign rule unless the dev
    rows say otherwise."""
    scores = {}
    for tau in grid:
        scores[tau] = float(balanced_mean(threshold(f, tau, states, price).utility[dev], states.stratum[dev]))
    top = max(scores.values())
    best = min((t for t in grid if scores[t] >= top - 1e-12), key=lambda t: (abs(t), t))
    return best, {f"{t:g}": v for t, v in scores.items()}


def consistency(states: StateTable, price: float) -> Routed:
    """Two-probe consistency router: two T answers agree → keep T, else run S; pays for both probes."""
    n = len(states)
    util = np.empty(n)
    tokens = np.empty(n)
    search = np.empty(n)
    for i in range(n):
        y, tok, ans = states.think.y[i], states.think.tokens[i], states.think.answers[i]
        probes = tok[0] + tok[1]
        agree = normalize_answer(ans[0] or "") == normalize_answer(ans[1] or "")
        if agree:
            util[i] = utility(0.5 * (y[0] + y[1]), probes, price)
            tokens[i] = probes
        else:
            util[i] = utility(states.search.mean_y[i], probes + states.search.mean_tokens[i], price)
            tokens[i] = probes + states.search.mean_tokens[i]
        search[i] = 0.0 if agree else 1.0
    return Routed(util, tokens, search)


def _half_means(out: RoleOutcomes) -> np.ndarray:
    """(4 × n): mean reward and mean tokens of each state's first ⌊m/2⌋ repeats, then of the rest."""
    rows = []
    for y, tok in zip(out.y, out.tokens):
        cut = len(y) // 2
        rows.append((y[:cut].sum() / cut, tok[:cut].sum() / cut, y[cut:].sum() / (len(y) - cut),
                     tok[cut:].sum() / (len(y) - cut)))
    return np.array(rows, dtype=float).reshape(-1, 4).T


def sample_informed(states: StateTable, price: float) -> Routed:
    """Choose on one half of the repeats, score on the other half, both ways, averaged."""
    t_y0, t_tok0, t_y1, t_tok1 = _half_means(states.think)
    s_y0, s_tok0, s_y1, s_tok1 = _half_means(states.search)
    halves = (((t_y0, t_tok0), (s_y0, s_tok0)), ((t_y1, t_tok1), (s_y1, s_tok1)))
    util, tokens, search = np.zeros(len(states)), np.zeros(len(states)), np.zeros(len(states))
    for pick, score in ((0, 1), (1, 0)):
        (pt_y, pt_tok), (ps_y, ps_tok) = halves[pick]
        (et_y, et_tok), (es_y, es_tok) = halves[score]
        choose_s = utility(ps_y, ps_tok, price) > utility(pt_y, pt_tok, price)
        util += 0.5 * np.where(choose_s, utility(es_y, es_tok, price), utility(et_y, et_tok, price))
        tokens += 0.5 * np.where(choose_s, es_tok, et_tok)
        search += 0.5 * choose_s
    return Routed(util, tokens, search, {"charges_choosing_draws": False})


def oracle(states: StateTable, price: float) -> Routed:
    """Per state the action with the higher Ū (ties: T)."""
    u_t, u_s = action_utilities(states, price)
    return route(u_s > u_t, states, price)
