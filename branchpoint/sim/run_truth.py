"""The truth of repeated executions (`run.epochs`) and of the budget they use, from the
simulator's exact per-question values alone.

A question q of a run has, under one condition, an exact success probability p_q
(`truth.TruthModel.natural`) and an exact distribution of its search count
(`TruthModel.search_counts`); its n_q epochs are independent draws (each sends its own seed,
and the simulator seeds every reply from a hash of the request body). So, with c_q ~
Binomial(n_q, p_q) the correct epochs:

- pass@k: E[1 − C(n − c, k)/C(n, k)] = 1 − (1 − p)^k (the estimator is unbiased: Chen et al. 2021);
- pass^k: E[C(c, k)/C(n, k)] = p^k;
- flip rate: P(0 < c < n) = 1 − p^n − (1 − p)^n (n the question's own epochs);

each a mean over the questions with n_q ≥ k (n_q ≥ 2 for the flip rate), and each estimator's
exact variance given the p's is a finite sum over c (`estimator_variance`), which gives the
intervals validate builds for them (conditional on the run's questions, like its truth).

Budget use: P(an execution reaches its search cap) = P(k searches = cap) from the search-count
distribution; the use share Σ k / Σ cap = E[k] / cap.

Like `study_truth`, this module imports nothing from `branchpoint.evaluation` or
`branchpoint.experiments`: the epochs are counted from the raw lines of executions.jsonl.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from scipy import stats as sps

from branchpoint.sim.study_truth import latest, read_lines


def pass_at_k(p: float, k: int) -> float:
    """P(at least one of k independent epochs succeeds): 1 − (1 − p)^k."""
    return 1.0 - (1.0 - p) ** k


def pass_hat_k(p: float, k: int) -> float:
    """P(all k independent epochs succeed): p^k."""
    return p**k


def flip(p: float, n: int) -> float:
    """P(n epochs neither all succeed nor all fail): 1 − p^n − (1 − p)^n (0 for n < 2)."""
    return 0.0 if n < 2 else 1.0 - p**n - (1.0 - p) ** n


#: The estimators of one question's n epochs with c correct, as metrics.json defines them
#: (written here from their definitions: the truth does not call the pipeline's code).
def est_pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def est_pass_hat_k(n: int, c: int, k: int) -> float:
    return math.comb(c, k) / math.comb(n, k)


def est_flip(n: int, c: int, k: int) -> float:
    return float(0 < c < n)


def estimator_variance(estimator: Callable[[int, int, int], float], n: int, p: float, k: int) -> float:
    """Var[estimator(n, c, k)] for c ~ Binomial(n, p): Σ_c pmf(c)·f(c)² − (Σ_c pmf(c)·f(c))²."""
    pmf = sps.binom.pmf(range(n + 1), n, p)
    values = [estimator(n, c, k) for c in range(n + 1)]
    mean = sum(w * v for w, v in zip(pmf, values))
    return max(0.0, float(sum(w * v * v for w, v in zip(pmf, values)) - mean * mean))


def mean_and_se(
    truth: Callable[[float, int, int], float],
    estimator: Callable[[int, int, int], float],
    p: Mapping[str, float],
    epochs: Mapping[str, int],
    k: int,
    least: int,
) -> tuple[float, float, int] | None:
    """(truth, standard error of the estimator's mean, questions) over the questions with at
    least `least` epochs; `truth(p, n, k)`; None when no question qualifies."""
    qs = [q for q, n in epochs.items() if n >= least and q in p]
    if not qs:
        return None
    mean = sum(truth(p[q], epochs[q], k) for q in qs) / len(qs)
    var = sum(estimator_variance(estimator, epochs[q], p[q], k) for q in qs) / len(qs) ** 2
    return mean, math.sqrt(var), len(qs)


def reach_share(counts: Sequence[Mapping[int, float]], cap: int) -> float:
    """Mean over executions of P(k searches ≥ cap): the share expected to reach the search cap."""
    return sum(sum(w for k, w in c.items() if k >= cap) for c in counts) / len(counts)


def epochs_by_condition(run_dir: Path) -> dict[str, tuple[dict[str, Any], dict[str, int]]]:
    """Per condition (its JSON, sorted keys): (the condition, question id → epochs), counted
    from the raw run records of executions.jsonl (latest line per execution; no branch, no
    replay, none left incomplete)."""
    out: dict[str, tuple[dict[str, Any], dict[str, int]]] = {}
    for r in latest(read_lines(Path(run_dir) / "executions.jsonl")):
        if r.get("parent") is not None or r.get("kind") is not None or r.get("status") == "incomplete":
            continue
        cond = dict(r.get("condition") or {})
        entry = out.setdefault(json.dumps(cond, sort_keys=True), (cond, {}))
        qid = str(r["question_id"])
        entry[1][qid] = entry[1].get(qid, 0) + 1
    return out
