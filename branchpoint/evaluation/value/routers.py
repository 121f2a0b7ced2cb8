"""Routers: rules that pick THINK (T role) or SEARCH (S role) at a state, scored by utility.

At price λ a branch's utility is U = Y − λ·T/1000 (`scores.utility`), T its own input + output
tokens. A router's value at a state is its expected utility there, estimated from the repeats:
choosing action a gives Ū_a = Ȳ_a − λ·T̄_a/1000. Every router returns per-state utility, tokens
and search rate; value.json reports their stratum-balanced means on the test rows.

- `constant`: always T or always S; `best_constant` picks the one with the higher dev utility.
- `threshold`: S when the forecast gain f = q_S − q_T exceeds τ; τ from a small grid, chosen on
  dev rows at each price (τ = 0, the sign of f, when there are no dev rows).
- `consistency`: the two-probe router. Two T probes that agree (both valid, equal after SQuAD
  normalisation; UNKNOWN, empty and failed outputs disagree) → T, else S. The chosen action is
  scored on the *other* draws (the remaining T repeats, or the S repeats), averaged over every
  probe pair (36 paired splits with 4 repeats); it pays for both probes and one continuation.
  Needs at least 3 T repeats.
- `sample_informed`: picks the action with the higher mean utility on ⌊m/2⌋ selection draws
  of each action and is scored on the remaining draws, averaged over every paired split (36
  with 4 repeats). The selection draws are not charged: it says what knowing a few samples is
  worth, it is not a deployable router. `split_rule` is the general form (fixed or
  query-specific gain × fixed or query-specific cost: the decision factorial).
- `oracle`: per state the action with the higher Ū (plug-in, optimistic with few repeats).

Registered routers (kind `router` of `branchpoint.registry`, `@router("name")`, so a plug-in
adds one) are routing rules: `fn(states: DevView, dev, price) -> P(SEARCH) per state`. They see
the development view, as forecasters do (public columns of every state, outcomes of the rows
they may choose on only), and `value` scores each on the test rows like the others
(`registered_routes`): Ū = p·Ū_S + (1 − p)·Ū_T per state. The built-in `always_think` and
`always_search` are such rules; the rules above that read the scored states' own draws
(consistency, sample_informed, split_rule, oracle) or a forecast (threshold) are scored by
`value` directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.judges import normalize_answer
from branchpoint.evaluation.value.dev_view import DevView, OutcomesNotInView
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.rewards import is_unknown_answer
from branchpoint.evaluation.value.scores import balanced_mean, utility
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.registry_kinds import Kind

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


#: Probe answers that commit to nothing (normalised, `normalize_answer`): a hedge such as "Not
#: sure", "idk" or "N/A" is not an answer, so two of them do not agree (search-value study,
#: Appendix E: "UNKNOWN and failed outputs count as disagreement"; seed 000 lists the vague
#: replies "Not sure", "idk", "N/A" beside "I don't know"). Explicit UNKNOWN answers are caught
#: by `is_unknown_answer`; these are the short non-answers it lets through. "N/A" is matched on
#: the raw text (`VAGUE_RAW`): it normalises to "na", which is also sodium's symbol.
VAGUE_RAW: frozenset[str] = frozenset({"n/a", "n.a.", "n.a", "n / a"})
VAGUE_PROBES: frozenset[str] = frozenset(
    {
        "not sure",
        "im not sure",
        "i am not sure",
        "i m not sure",
        "unsure",
        "idk",
        "dunno",
        "not applicable",
        "no clue",
        "no idea",
        "cannot say",
        "cant say",
        "hard to say",
        "not certain",
        "uncertain",
    }
)


def is_vague_probe(answer: str | None) -> bool:
    """True for a probe answer that commits to nothing: UNKNOWN or empty (`is_unknown_answer`),
    or a vague non-answer of `VAGUE_PROBES` ("Not sure", "idk", "N/A", ...) after normalisation."""
    raw = (answer or "").strip().lower()
    return raw in VAGUE_RAW or is_unknown_answer(answer) or normalize_answer(answer or "") in VAGUE_PROBES


def valid_probe_answer(answer: str | None, status: str) -> str | None:
    """The normalised answer of a probe that can agree with another, or None: a probe whose
    record failed (status other than `ok`: malformed, length) or whose answer is empty, UNKNOWN
    or vague ("Not sure", "idk", "N/A": `is_vague_probe`) is not valid and counts as
    disagreement."""
    if status != "ok" or is_vague_probe(answer):
        return None
    return normalize_answer(answer or "")


def probes_agree(answers: tuple[str | None, str | None], statuses: tuple[str, str]) -> bool:
    """Two-probe agreement: both probes valid (`valid_probe_answer`) and equal after SQuAD
    normalisation. Two failed, two UNKNOWN or two vague ("Not sure", "idk") probes do *not* agree."""
    a = valid_probe_answer(answers[0], statuses[0])
    b = valid_probe_answer(answers[1], statuses[1])
    return a is not None and a == b


class ProbeSplit(NamedTuple):
    """One probe pair of the two-probe router at one state: whether the probes agree, the reward
    and continuation tokens of the chosen action's evaluation draws, and the probes' tokens."""

    agree: bool
    reward: float
    continuation: float
    probes: float


def probe_splits(states: StateTable, i: int) -> list[ProbeSplit]:
    """Every probe pair of the THINK repeats at state i (C(m_T, 2) of them; none when m_T < 3),
    with the choice the router makes and what scores it (`consistency`): agreement → THINK,
    scored on the remaining THINK draws; otherwise SEARCH, scored on Ȳ_S, T̄_S."""
    y, tok, ans = states.think.y[i], states.think.tokens[i], states.think.answers[i]
    status = states.think.statuses(i)
    m = len(y)
    if m < 3:
        return []
    s_y, s_tok = float(states.search.mean_y[i]), float(states.search.mean_tokens[i])
    out = []
    for a, b in itertools.combinations(range(m), 2):
        rest = [k for k in range(m) if k not in (a, b)]
        probes = float(tok[a] + tok[b])
        if probes_agree((ans[a], ans[b]), (status[a], status[b])):
            out.append(ProbeSplit(True, float(np.mean(y[rest])), float(np.mean(tok[rest])), probes))
        else:
            out.append(ProbeSplit(False, s_y, s_tok, probes))
    return out


def consistency(states: StateTable, price: float) -> Routed:
    """Two-probe consistency router, scored on draws disjoint from its probes.

    Search-value study, Appendix E ("Two-probe consistency compares two valid normalized THINK
    answers…"): two THINK probes agree (`probes_agree`: both valid, equal after normalisation;
    UNKNOWN, vague ("Not sure", "idk", "N/A") and failed outputs count as disagreement) → THINK,
    else SEARCH. The *remaining*
    THINK draws and the SEARCH draws evaluate the selected action, never the probes themselves.
    Every paired split is averaged: each of the C(m_T, 2) probe pairs of the THINK repeats,
    crossed with each split of the SEARCH repeats into a (free, unused) selection pair and an
    evaluation pair (with m = 4 repeats: 6 × 6 = 36 splits). The SEARCH selection pair plays no
    part in the choice, so averaging the SEARCH evaluation pair over its 6 splits gives exactly
    Ȳ_S and T̄_S, which is what is computed. Per split

        U = Ȳ_eval(chosen) − λ · (T_probe1 + T_probe2 + T̄_eval(chosen)) / 1000,

    cost = both probes + one selected continuation (the mean tokens of the evaluation draws of
    the chosen action). With m_T = 4 the THINK evaluation draws are the other two repeats.

    States need m_T ≥ 3 (two probes and at least one THINK draw to evaluate with); the router's
    utility is NaN at a state with fewer (`consistency_defined` says where it is defined).
    `info["agreement_rate"]` is the mean share of agreeing probe pairs.
    """
    n = len(states)
    util = np.full(n, np.nan)
    tokens = np.full(n, np.nan)
    search = np.full(n, np.nan)
    agree_rate = np.full(n, np.nan)
    for i in range(n):
        splits = probe_splits(states, i)
        if not splits:
            continue
        util[i] = float(np.mean([utility(s.reward, s.probes + s.continuation, price) for s in splits]))
        tokens[i] = float(np.mean([s.probes + s.continuation for s in splits]))
        search[i] = float(np.mean([0.0 if s.agree else 1.0 for s in splits]))
        agree_rate[i] = float(np.mean([1.0 if s.agree else 0.0 for s in splits]))
    return Routed(util, tokens, search, {"agreement_by_state": agree_rate})


#: The per-state columns of the two-probe router's token accounting (`consistency_accounting`).
ACCOUNTING_COLUMNS: tuple[str, ...] = (
    "agreement_rate",
    "tokens_saved",
    "probe_tokens",
    "net_tokens_saved",
    "success_cost",
)


def consistency_accounting(states: StateTable) -> dict[str, np.ndarray]:
    """The two-probe router's token accounting against always SEARCH, per state, averaged over
    its probe pairs (search-value study, §5.5: "Before charging probes, the selected continuation
    saves 3,451 tokens relative to always SEARCH. The probes consume 2,210, leaving 1,241 net
    tokens saved at a 1.87-point success cost"). Per probe pair (`probe_splits`):

        tokens_saved     = T̄_S − T̄_eval(chosen)       (0 where it chose SEARCH)
        probe_tokens     = T_probe1 + T_probe2
        net_tokens_saved = tokens_saved − probe_tokens
        success_cost     = Ȳ_S − Ȳ_eval(chosen)       (reward given up against always SEARCH)
        agreement_rate   = 1 if the probes agree, else 0 (§5.5: "Agreement occurs in 65.0%")

    Price-free; NaN where the router is undefined (m_T < 3)."""
    n = len(states)
    out = {k: np.full(n, np.nan) for k in ACCOUNTING_COLUMNS}
    for i in range(n):
        splits = probe_splits(states, i)
        if not splits:
            continue
        s_y, s_tok = float(states.search.mean_y[i]), float(states.search.mean_tokens[i])
        saved = np.array([s_tok - s.continuation for s in splits])
        probes = np.array([s.probes for s in splits])
        out["agreement_rate"][i] = float(np.mean([1.0 if s.agree else 0.0 for s in splits]))
        out["tokens_saved"][i] = saved.mean()
        out["probe_tokens"][i] = probes.mean()
        out["net_tokens_saved"][i] = (saved - probes).mean()
        out["success_cost"][i] = float(np.mean([s_y - s.reward for s in splits]))
    return out


def consistency_defined(states: StateTable) -> np.ndarray:
    """Where the consistency router can be scored on disjoint draws: m_T ≥ 3."""
    return states.think.m >= 3


MAX_SPLITS = 70  # splits of one action's repeats: all of them up to m = 8 (C(8, 4) = 70)


def selection_splits(m: int, max_splits: int = MAX_SPLITS) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every split of m repeats into a selection set of ⌊m/2⌋ draws and the evaluation set of
    the rest, as (selection indices, evaluation indices); with m = 4: the 6 pairs and their
    complements. Above `max_splits` splits (m > 8) a fixed, seeded sample of `max_splits` of
    them (deterministic: the same m gives the same splits)."""
    k = m // 2
    combos = list(itertools.combinations(range(m), k))
    if len(combos) > max_splits:
        pick = np.random.default_rng(m).choice(len(combos), size=max_splits, replace=False)
        combos = [combos[j] for j in sorted(pick)]
    return [(c, tuple(j for j in range(m) if j not in c)) for c in combos]


def split_means(out: RoleOutcomes, i: int) -> np.ndarray:
    """(4 × splits) at state i: mean reward and mean tokens of each split's selection draws, then
    of its evaluation draws (`selection_splits`)."""
    y, tok = out.y[i], out.tokens[i]
    rows = [
        (y[list(sel)].mean(), tok[list(sel)].mean(), y[list(ev)].mean(), tok[list(ev)].mean())
        for sel, ev in selection_splits(len(y))
    ]
    return np.array(rows, dtype=float).T


def split_rule(
    states: StateTable, price: float, *, fixed_gain: float | None = None, fixed_cost: float | None = None
) -> Routed:
    """A selector that picks S when its gain estimate beats its priced cost estimate, scored on
    draws disjoint from its selection draws, averaged over every paired split.

    Search-value study, §5.4 and Appendix E ("The information factorial crosses query-specific
    gains and query-specific costs"): per split (a of the T repeats, b of the S repeats; 36 with
    4 repeats each),

        ĝ = Ȳ_S,sel(b) − Ȳ_T,sel(a)   (query-specific gain)     or  ĝ = `fixed_gain`,
        ĉ = T̄_S,sel(b) − T̄_T,sel(a)   (query-specific cost)     or  ĉ = `fixed_cost`,
        choose S iff ĝ − λ·ĉ/1000 > 0 (ties: T),
        U = Ȳ_eval(chosen) − λ·T̄_eval(chosen)/1000.

    The selection draws are free (not charged). With both query-specific this is the
    sample-informed selector; with both fixed it is a constant action.
    """
    n = len(states)
    util, tokens, search = np.zeros(n), np.zeros(n), np.zeros(n)
    for i in range(n):
        t_sel_y, t_sel_tok, t_ev_y, t_ev_tok = split_means(states.think, i)
        s_sel_y, s_sel_tok, s_ev_y, s_ev_tok = split_means(states.search, i)
        gain = (
            (s_sel_y[None, :] - t_sel_y[:, None])
            if fixed_gain is None
            else np.full((len(t_sel_y), len(s_sel_y)), fixed_gain)
        )
        cost = (
            (s_sel_tok[None, :] - t_sel_tok[:, None])
            if fixed_cost is None
            else np.full((len(t_sel_y), len(s_sel_y)), fixed_cost)
        )
        choose_s = gain - price * cost / 1000.0 > 0
        u_t = utility(t_ev_y, t_ev_tok, price)[:, None]
        u_s = utility(s_ev_y, s_ev_tok, price)[None, :]
        util[i] = float(np.where(choose_s, u_s, u_t).mean())
        tokens[i] = float(np.where(choose_s, s_ev_tok[None, :], t_ev_tok[:, None]).mean())
        search[i] = float(choose_s.mean())
    return Routed(util, tokens, search, {"charges_selection_draws": False})


def sample_informed(states: StateTable, price: float) -> Routed:
    """Sample-informed selector (search-value study, Appendix E): choose the action with the
    higher mean utility on ⌊m/2⌋ selection draws per action, score it on the remaining draws;
    averaged over every paired split (`split_rule` with query-specific gain and cost). The
    selection draws are free: it measures what a few samples are worth; not deployable."""
    return split_rule(states, price)


def oracle(states: StateTable, price: float) -> Routed:
    """Per state the action with the higher Ū (ties: T)."""
    u_t, u_s = action_utilities(states, price)
    return route(u_s > u_t, states, price)


class Router(Protocol):
    """A routing rule (kind `router`): the probability of choosing SEARCH at every state (an
    array of shape (n,), booleans or numbers in [0, 1]), from the development view `states`
    (outcomes of the `dev` rows only), at token price `price`."""

    def __call__(self, states: DevView, dev: np.ndarray, price: float) -> np.ndarray: ...


#: The typed handle of the registry kind: `REGISTRY.get(ROUTER, name).obj` is a `Router`.
ROUTER: Final = Kind[Router]("router")
#: Names `value` gives the routers it scores directly: a registered router may not take one.
DIRECT_ROUTERS: frozenset[str] = frozenset(
    {"best_constant", "consistency", "sample_informed", "oracle", "evidence_gap"}
)


def router(name: str) -> Callable[[Router], Router]:
    """Register a routing rule `fn(states, dev, price) -> P(SEARCH) per state` under `name`."""
    if name in DIRECT_ROUTERS:
        raise RegistryError(f'router "{name}": the name of a router value scores itself; choose another')
    return REGISTRY.register("router", name)


def route_share(p_search: np.ndarray, states: StateTable, price: float) -> Routed:
    """The router that picks S with probability `p_search` at each state, T otherwise:
    Ū = p·Ū_S + (1 − p)·Ū_T, its tokens likewise."""
    u_t, u_s = action_utilities(states, price)
    p = np.asarray(p_search, dtype=float)
    return Routed(
        utility=p * u_s + (1.0 - p) * u_t,
        tokens=p * states.search.mean_tokens + (1.0 - p) * states.think.mean_tokens,
        search=p,
    )


def run_router(name: str, fn: Router, view: DevView, price: float) -> np.ndarray:
    """A routing rule's P(SEARCH) over every row of `view`, checked: one number in [0, 1] per
    state; one that reaches for outcomes outside the view is an InputError naming it."""
    try:
        out = fn(view, view.dev, price)
    except OutcomesNotInView as exc:
        raise InputError(f'router "{name}": {exc}') from None
    p = np.asarray(out, dtype=float)
    if p.shape != (len(view),):
        raise InputError(f'router "{name}": returned shape {p.shape}, expected ({len(view)},) (P(SEARCH) per state)')
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise InputError(f'router "{name}": P(SEARCH) must be numbers in [0, 1]')
    return p


def registered_routes(
    states: StateTable, test: np.ndarray, choose_on: np.ndarray, price: float, chosen_on: str
) -> dict[str, Routed]:
    """Every registered router (built-in and plug-in, in registration order; each counts as
    used) at one price, on the test rows: it sees the development view of the rows it may
    choose on (`choose_on`: the dev rows, or the scored rows in-sample when there are none)."""
    view = DevView.of(states, choose_on)
    tt = states.subset(test)
    in_sample = bool(np.array_equal(choose_on, test))
    out: dict[str, Routed] = {}
    for entry in REGISTRY.entries(ROUTER, registration_order=True):
        if entry.name in DIRECT_ROUTERS:
            raise InputError(f'router "{entry.name}" ({entry.origin}): the name of a router value scores itself')
        REGISTRY.note_used(entry)
        routed = route_share(run_router(entry.name, entry.obj, view, price)[test], tt, price)
        routed.info = {"chosen_on": chosen_on, "in_sample": in_sample}
        out[entry.name] = routed
    return out


@router("always_think")
def always_think(states: DevView, dev: np.ndarray, price: float) -> np.ndarray:
    """Never SEARCH."""
    return np.zeros(len(states))


@router("always_search")
def always_search(states: DevView, dev: np.ndarray, price: float) -> np.ndarray:
    """Always SEARCH."""
    return np.ones(len(states))
