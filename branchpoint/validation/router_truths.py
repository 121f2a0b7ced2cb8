"""The truth of seed 002's signal routers and of the two-probe router's token accounting, from
the simulator's truth of a study (`StudyTruth`), computed apart from the pipeline like `truths`.

- Signal routers (`evaluation.value.signal_routers`, search-value study §4.2 and Appendix B):
  SEARCH iff s(x) > τ with τ read back from value.json (chosen in-sample in the validation
  studies, which have no dev rows). For `confidence:truth` and `entropy:truth` the signal is a
  function of the exact forecaster's q_T = p_T: 1 − p_T and the binary entropy H(p_T) in bits
  (here by scipy), so the truth is the stratum-balanced mean of U_SEARCH where the signal
  exceeds τ and U_THINK elsewhere. The public-prefix signals (query / document novelty,
  evidence gap) are read from each parent's public history, which the truth's states do not
  carry: those rows are not applicable, with that reason.
- Two-probe accounting (§5.5): with a = P(two THINK answers agree) at a state (valid, not
  UNKNOWN, same folded answer: the truth's `agree_think`), and evaluation draws independent of
  the probes, the expected agreement rate is a, the success given up against always SEARCH is
  a·(p_S − p_T), the continuation tokens saved a·(E T_S − E T_T), the probe tokens 2·E T_T and
  the net their difference (tokens only where the simulator models costs).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import entropy

from branchpoint.validation import truths as T
from branchpoint.validation.study import StudyResult

PREFIX_NOT_APPLICABLE = (
    "its signal is read from each parent's public history (features.prefix_features), which the "
    "simulator's truth of the states does not carry"
)


def _tau(r: StudyResult, pk: str, router: str) -> float:
    tau = T._router_meta(r, pk, router).get("tau")
    if tau is None:
        raise KeyError(f"utility.by_price.{pk}.{router}.tau")
    return float(tau)  # "inf" / "-inf" are read as ±∞


def true_signal(r: StudyResult, kind: str) -> np.ndarray:
    """The signal of the exact forecaster (q_T = p_T) per truth state."""
    p_t = T.pt(r)
    if kind == "confidence":
        return 1.0 - p_t
    if kind == "entropy":
        return np.array([entropy([p, 1.0 - p], base=2) for p in p_t], dtype=float)
    raise T.NotApplicable(PREFIX_NOT_APPLICABLE)


def signal_router(r: StudyResult, price: float, pk: str, router: str) -> float:
    """The truth of a signal router's utility at the τ value.json chose."""
    kind = router.split(":", 1)[0] if router.startswith(("confidence:", "entropy:")) else router
    signal = true_signal(r, kind)
    u_t, u_s = T.utilities(r, price)
    return T.bal(np.where(signal > _tau(r, pk, router), u_s, u_t), r)


def consistency_accounting(r: StudyResult, key: str) -> float:
    """The truth of one column of value.json's `consistency_accounting` (module doc)."""
    a = r.truth.column("agree_think")
    if key == "agreement_rate":
        T.has_states(r)
        return T.bal(a, r)
    if key == "success_cost":
        return T.bal(a * (T.ps(r) - T.pt(r)), r)
    T.has_states(r)
    if not r.truth.costs_modelled:
        raise T.NotApplicable(T.NO_COSTS)
    tok_t, tok_s = r.truth.column("tokens", "T"), r.truth.column("tokens", "S")
    saved, probes = a * (tok_s - tok_t), 2.0 * tok_t
    return T.bal({"tokens_saved": saved, "probe_tokens": probes, "net_tokens_saved": saved - probes}[key], r)
