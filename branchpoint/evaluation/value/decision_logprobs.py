"""Decision log probabilities as state features, and the `logprob` forecaster built on them.

Where the parent executions' decide steps carry log probabilities (`Step.logprobs`, recorded
with `model.logprobs: N`), each state gets the agent's own decision distribution at it: the
decide step the parent made *from* the state (the first decide step at or after the checkpoint's
step count; at a `pending_query` state, the decide step that chose the pending query, the last
one before it). Only that step's distribution is read, never what the parent did after it, and
no outcome. Features (`DECISION_FEATURES`, the matrix "decision_logprobs" of `states.features`,
attached only when some state has them):

- `p_search_share`: P(search) / (P(search) + P(answer)) over the alternatives seen at the
  decision token (the model's own probability of searching, renormalised over the two actions);
- `decision_entropy`: entropy in bits of the alternatives at the decision token;
- `no_logprobs`: 1 for a state whose decide step has none (its other two columns then hold the
  mean over the states that have them).

They are offered to the feature-based forecasters (`public_prefix_ridge`, and the
`public_prefix` and `residual` maps take them beside the public-prefix features: `prefix_inputs`)
and to the signal routers (`logprob:p_search`, `logprob:entropy`).

The `logprob` forecaster (search-value study, Appendix B, "Logistic ... controls provide
standard calibration alternatives", applied to the decision probability as the raw input):
q_a = σ(α_a + β_a · z) for both actions a, z = logit(p_search_share) standardised on the dev rows
that have it, (α_a, β_a) by maximum likelihood on every dev repeat (`forecasters.logistic_fit`:
rewards in [0, 1] as fractional targets, weights = repeats, a 1e-3 ridge). So its gain q_S − q_T
is a monotone function of how much the agent itself wanted to search. States without log
probabilities get each action's dev mean (stratum-balanced, as `historical_mean`). It is
unavailable (skipped, with the reason) when fewer than 2 dev states have them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import (
    Forecast,
    ForecasterUnavailable,
    dev_means,
    forecaster,
    logistic_fit,
    logit,
    standardise,
)
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.traces import BOUNDARY_PENDING, ExecutionRecord, Step

FEATURE = "decision_logprobs"
DECISION_FEATURES: tuple[str, ...] = ("p_search_share", "decision_entropy", "no_logprobs")


def decision_step(parent: ExecutionRecord | None, prefix_steps: int | None, boundary_kind: str) -> Step | None:
    """The parent's decide step made from the state (module doc), or None when it is unknown."""
    if parent is None or prefix_steps is None:
        return None
    steps = parent.steps
    if boundary_kind == BOUNDARY_PENDING:
        before = [s for s in steps[:prefix_steps] if s.kind == "decide"]
        return before[-1] if before else None
    group: list[Step] = []
    for s in steps[prefix_steps:]:
        if s.kind != "decide":
            break
        group.append(s)  # a decision and its retries (the last carries the action)
    with_lp = [s for s in group if s.logprobs is not None]
    return with_lp[-1] if with_lp else (group[-1] if group else None)


def search_share(step: Step | None) -> tuple[float, float] | None:
    """(P(search) share of the two actions, entropy in bits) of a decide step's log
    probabilities; None without them (or when neither action was seen among the alternatives)."""
    lp = step.logprobs if step is not None else None
    if lp is None or lp.p_search is None or lp.p_answer is None:
        return None
    total = lp.p_search + lp.p_answer
    if total <= 0:
        return None
    return lp.p_search / total, float(lp.entropy or 0.0)


def decision_features(states: StateTable, parents: Mapping[str, ExecutionRecord]) -> np.ndarray | None:
    """(n states × 3) `DECISION_FEATURES`, or None when no state's decide step has log probabilities."""
    found = [
        search_share(decision_step(parents.get(parent_id), states.prefix_steps[i], str(states.boundary_kind[i])))
        for i, (parent_id, _) in enumerate(states.keys)
    ]
    have = [f for f in found if f is not None]
    if not have:
        return None
    mean = np.mean(np.array(have, dtype=float), axis=0)
    rows = [[*f, 0.0] if f is not None else [float(mean[0]), float(mean[1]), 1.0] for f in found]
    return np.array(rows, dtype=float).reshape(len(states), len(DECISION_FEATURES))


def prefix_inputs(states: StateTable | DevView, prefix: np.ndarray) -> np.ndarray:
    """The public-prefix features with the decision log-probability features beside them, where
    the states have those (`prefix` unchanged otherwise)."""
    extra = states.features.get(FEATURE)
    return prefix if extra is None else np.concatenate([prefix, extra], axis=1)


@forecaster("logprob", fitted=True)
def logprob_forecaster(states: DevView, dev: np.ndarray) -> Forecast:
    """Logistic calibration of the agent's own P(search) at the decision token, per action, on
    the dev rows (module doc)."""
    x = states.features.get(FEATURE)
    if x is None:
        raise ForecasterUnavailable(
            "needs log probabilities on the parent executions' decide steps (run with model.logprobs: N "
            "on a server that returns them)"
        )
    has = x[:, DECISION_FEATURES.index("no_logprobs")] == 0.0
    fit_rows = np.asarray(dev, dtype=bool) & has
    if int(fit_rows.sum()) < 2:
        raise ForecasterUnavailable("needs at least 2 dev states whose decide step has log probabilities")
    z = standardise(logit(x[:, 0])[:, None], fit_rows)[:, 0]
    pick = fit_rows[states.dev_rows]  # the fitting rows among the dev states, in their order
    d = states.dev_states
    base = dev_means(states, dev)
    out: list[np.ndarray] = []
    info: dict[str, Any] = {"rows_without_logprobs": int((~has).sum()), "fitted_on": int(fit_rows.sum())}
    for k, (name, role) in enumerate((("think", d.think), ("search", d.search))):
        alpha, beta = logistic_fit(z[fit_rows], role.mean_y[pick], role.m[pick])
        q = 1.0 / (1.0 + np.exp(-(alpha + beta * z)))
        out.append(np.where(has, q, base[k]))
        info[name] = {"alpha": float(alpha), "beta": float(beta)}
    return Forecast(out[0], out[1], info)
