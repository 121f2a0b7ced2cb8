"""Confidence, entropy, novelty and evidence-gap routers: SEARCH when a public signal exceeds a
threshold chosen on development rows.

Search-value study, §4.2 ("Confidence, entropy, and novelty routers use public inputs and
development-selected thresholds") and Appendix B, "Text and public-signal models"
("Confidence, entropy, query/document novelty and evidence-gap signals use public observations
with development-selected thresholds"). The study leaves the feature definitions to the
implementation; here every signal is oriented so that a larger value is more reason to search,
and the router is

    choose SEARCH iff s(x) > τ,

with τ chosen per price on the dev rows (the scored rows, labelled in-sample, when there are
none) from `threshold_grid`: −∞ (always SEARCH), the midpoints between consecutive distinct
deciles of the signal on those rows, and +∞ (never SEARCH). Ties go to the larger τ (the rule
that searches less). Signals:

- `confidence:NAME`: doubt 1 − q_T of a raw forecast NAME (a forecasts file, the LLM forecaster,
  a given forecast): the forecaster's stated chance that answering now fails;
- `entropy:NAME`: the binary entropy H(q_T) = −q_T log₂ q_T − (1 − q_T) log₂(1 − q_T) in bits:
  how undecided the forecaster is about answering now;
- `novelty:query`, `novelty:document`: the public-prefix query novelty (1 − Jaccard of the
  last query with the earlier ones) and document novelty (share of new document ids in the
  last search), both 0 before two searches (`features.PREFIX_FEATURES`);
- `evidence_gap`: the share of question terms absent from the retrieved text;
- `logprob:p_search`, `logprob:entropy`: the agent's own search share and entropy at its
  decision token, where decide steps recorded log probabilities (`decision_logprobs`).

The chosen action is scored like every router (`routers.route`: its mean utility Ū_a over the
repeats), so these rows sit beside `threshold:NAME` in `utility.by_price`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from branchpoint.evaluation.value.decision_logprobs import DECISION_FEATURES
from branchpoint.evaluation.value.decision_logprobs import FEATURE as DECISION_FEATURE
from branchpoint.evaluation.value.features import PREFIX_FEATURES
from branchpoint.evaluation.value.forecasters import Forecast
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.routers import Routed, route
from branchpoint.evaluation.value.scores import balanced_mean

DECILES: tuple[float, ...] = tuple(k / 10 for k in range(11))

#: public-prefix signals by router name → column of `features.PREFIX_FEATURES`
PREFIX_SIGNALS: dict[str, str] = {
    "novelty:query": "query_novelty",
    "novelty:document": "document_novelty",
    "evidence_gap": "evidence_gap",
}

#: decision log-probability signals by router name → column of `decision_logprobs.DECISION_FEATURES`
#: (only where the parents' decide steps recorded log probabilities)
DECISION_SIGNALS: dict[str, str] = {
    "logprob:p_search": "p_search_share",
    "logprob:entropy": "decision_entropy",
}

SIGNAL_TEXT: dict[str, str] = {
    "logprob:p_search": "the agent's own P(search) / (P(search) + P(answer)) at its decision token",
    "logprob:entropy": "entropy in bits of the alternatives at the agent's decision token",
    "confidence": "1 − q_T of the raw forecast (doubt that answering now succeeds)",
    "entropy": "binary entropy H(q_T) in bits of the raw forecast",
    "novelty:query": "query novelty: 1 − Jaccard(last query, earlier queries); 0 before two searches",
    "novelty:document": "document novelty: share of new document ids in the last search; 0 before two searches",
    "evidence_gap": "evidence gap: share of question terms absent from the retrieved text",
}


def doubt(q_think: np.ndarray) -> np.ndarray:
    """The confidence signal, oriented to search: 1 − q_T."""
    return 1.0 - np.asarray(q_think, dtype=float)


def binary_entropy(q: np.ndarray) -> np.ndarray:
    """H(q) = −q log₂ q − (1 − q) log₂(1 − q) in bits, 0 at q ∈ {0, 1}."""
    q = np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(q * np.log2(q) + (1.0 - q) * np.log2(1.0 - q))
    return np.where((q <= 0.0) | (q >= 1.0), 0.0, h)


def threshold_grid(signal: np.ndarray) -> list[float]:
    """−∞, the midpoints between consecutive distinct deciles of `signal`, and +∞."""
    levels = np.unique(np.quantile(np.asarray(signal, dtype=float), DECILES)) if len(signal) else np.array([])
    mids = [float((a + b) / 2.0) for a, b in itertools.pairwise(levels)]
    return [-np.inf, *mids, np.inf]


def choose_tau(signal: np.ndarray, states: StateTable, rows: np.ndarray, price: float) -> tuple[float, int]:
    """The τ of `threshold_grid(signal[rows])` whose rule (SEARCH iff s > τ) has the highest
    stratum-balanced mean utility on `rows`; ties go to the larger τ. Returns (τ, grid size)."""
    sub = states.subset(rows)
    s = np.asarray(signal, dtype=float)[rows]
    grid = threshold_grid(s)
    scores = [float(balanced_mean(route(s > tau, sub, price).utility, sub.stratum)) for tau in grid]
    top = max(scores)
    best = max(t for t, v in zip(grid, scores) if v >= top - 1e-12)
    return best, len(grid)


def signals(
    states: StateTable, forecasts: Mapping[str, Forecast], raw_names: Sequence[str]
) -> dict[str, tuple[str, np.ndarray]]:
    """Every signal router's (signal kind, signal over every row): confidence and entropy of
    each raw forecast in `raw_names`, and the public-prefix signals when the states carry the
    "public_prefix" features."""
    out: dict[str, tuple[str, np.ndarray]] = {}
    for name in raw_names:
        q_t = forecasts[name].q_think
        out[f"confidence:{name}"] = ("confidence", doubt(q_t))
        out[f"entropy:{name}"] = ("entropy", binary_entropy(q_t))
    prefix = states.features.get("public_prefix")
    if prefix is not None:
        for router, column in PREFIX_SIGNALS.items():
            out[router] = (router, np.asarray(prefix[:, PREFIX_FEATURES.index(column)], dtype=float))
    decisions = states.features.get(DECISION_FEATURE)
    if decisions is not None:
        for router, column in DECISION_SIGNALS.items():
            out[router] = (router, np.asarray(decisions[:, DECISION_FEATURES.index(column)], dtype=float))
    return out


def signal_routes(
    states: StateTable,
    test: np.ndarray,
    choose_on: np.ndarray,
    forecasts: Mapping[str, Forecast],
    raw_names: Sequence[str],
    price: float,
    chosen_on: str,
) -> dict[str, Routed]:
    """The signal routers at one price on the test rows, each with τ chosen on `choose_on`
    (module doc); `info` records the signal, τ (±∞ as "inf" / "-inf" in value.json) and where
    it was chosen."""
    tt = states.subset(test)
    out: dict[str, Routed] = {}
    for name, (kind, signal) in signals(states, forecasts, raw_names).items():
        tau, size = choose_tau(signal, states, choose_on, price)
        r = route(signal[test] > tau, tt, price)
        r.info = {
            "signal": SIGNAL_TEXT[kind],
            "rule": "SEARCH iff signal > tau",
            "tau": tau if np.isfinite(tau) else ("inf" if tau > 0 else "-inf"),
            "grid_size": size,
            "tau_chosen_on": chosen_on,
            "in_sample": bool(np.array_equal(choose_on, test)),
        }
        out[name] = r
    return out
