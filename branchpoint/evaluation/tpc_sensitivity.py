"""TPC-coefficient sensitivity: TPC recomputed per condition over a grid of (λ, μ), and whether
the conditions' order by TPC survives the change.

Over-searching study, §3.4 "The TPC Metric: Formalizing the Cost-Correctness Trade-off" and
"Ablation Studies and Robustness Checks" (Appendix B.2, *TPC coefficient sensitivity*): TPC =
Σ_q (g_q + λ·x_q + μ·|S_q|) / Σ_q correct_q with λ = 0.25 (input-token price / output-token
price of GPT-4o-mini) and μ = 500 (one search call ≈ 500 output tokens). The seed notes that the
coefficients are "standardized but ultimately arbitrary", that TPC is meant as a *relative*
comparison, and that "relative TPC rankings are stable under reasonable coefficient variation —
this is not tested"; its limitations name free local retrieval (μ = 0) and expensive search
APIs. So the grid spans input tokens free to priced like output (λ ∈ {0, 0.1, 0.25, 0.5, 1})
and search free to four times the seed's price (μ ∈ {0, 100, 250, 500, 1000, 2000}), the
run's own (λ, μ) always included.

For each grid point and condition: TPC(λ, μ) = (Σ g + λ·Σ x + μ·Σ|S|) / Σ correct over the
condition's scored executions (the same sums as `tally.summary`'s TPC, so the run's own point
equals the condition's `tpc`), with its bootstrap interval from the same question resamples.
For each grid point: the conditions ranked by TPC (lowest first; ties share the better rank),
Kendall's τ_b against the order at the run's (λ, μ), and whether the order is the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from branchpoint.evaluation.bootstrap import percentile_ci, ratio_samples
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.evaluation.tally import COLUMNS, Sums

#: λ (weight of an input token): free, a tenth, the seed's quarter, half, as dear as output.
DEFAULT_LAMS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0)
#: μ (tokens per search call): free local retrieval up to four times the seed's 500.
DEFAULT_MUS: tuple[float, ...] = (0.0, 100.0, 250.0, 500.0, 1000.0, 2000.0)


def grid_values(defaults: Sequence[float], own: float) -> list[float]:
    """The grid's values of one coefficient: `defaults` with the run's own value added, sorted."""
    return sorted({float(v) for v in defaults} | {float(own)})


def tpc_at(s: Sums, lam: float, mu: float) -> tuple[float | None, np.ndarray | None]:
    """(TPC, resampled TPCs) of the executions summed in `s` at weights (λ, μ):
    (Σ g + λ·Σ x + μ·Σ|S|) / Σ correct; +inf when nothing is correct, None without executions."""
    if s.count("n") == 0:
        return None, None
    g, x, n_s, correct = (s.total(c) for c in ("output_tokens", "input_tokens", "search_calls", "correct"))
    cost = g + lam * x + mu * n_s
    point = math.inf if correct == 0 else cost / correct
    samples = None
    if s.boot is not None:
        cols = [s.boot[:, _column(c)] for c in ("output_tokens", "input_tokens", "search_calls", "correct")]
        samples = ratio_samples(cols[0] + lam * cols[1] + mu * cols[2], cols[3], zero_den_inf=True)
    return point, samples


def _column(name: str) -> int:
    return COLUMNS.index(name)


def tpc_ranks(tpcs: Mapping[str, float | None]) -> dict[str, int]:
    """Rank of each condition by TPC, 1 = lowest (best); ties share the better rank (1, 1, 3);
    conditions without a TPC are left out. +inf ranks last."""
    defined = {k: v for k, v in tpcs.items() if v is not None}
    return {k: 1 + sum(other < v for other in defined.values()) for k, v in defined.items()}


def rank_agreement(base: Mapping[str, int], other: Mapping[str, int]) -> float | None:
    """Kendall's τ_b between two rankings over the conditions both rank; None with fewer than two
    conditions or when either ranking is all ties (τ undefined)."""
    keys = sorted(base.keys() & other.keys())
    if len(keys) < 2:
        return None
    a, b = [base[k] for k in keys], [other[k] for k in keys]
    if len(set(a)) < 2 or len(set(b)) < 2:
        return None
    tau = kendalltau(a, b).statistic
    return None if tau is None or math.isnan(tau) else float(tau)


def tpc_sensitivity(
    per_condition: Mapping[str, Sums],
    cfg: MetricsConfig,
    lams: Sequence[float] = DEFAULT_LAMS,
    mus: Sequence[float] = DEFAULT_MUS,
) -> dict[str, Any]:
    """The sensitivity table of metrics.json: {"lams", "mus", "base": {lam, mu}, "points": [{lam,
    mu, by_condition: {label: {tpc, tpc_ci, rank}}, kendall_tau, same_order}], "by_condition":
    {label: {min_tpc, max_tpc, best_rank, worst_rank}}, "n_points", "n_same_order"}.

    `available` is False (with a reason) when there are no conditions."""
    labels = list(per_condition)
    if not labels:
        return {"available": False, "reason": "no conditions"}
    lam_grid, mu_grid = grid_values(lams, cfg.lam), grid_values(mus, cfg.mu)
    base_ranks = tpc_ranks({label: tpc_at(per_condition[label], cfg.lam, cfg.mu)[0] for label in labels})
    points = []
    spans: dict[str, dict[str, Any]] = {label: {"tpcs": [], "ranks": []} for label in labels}
    for lam in lam_grid:
        for mu in mu_grid:
            cells: dict[str, dict[str, Any]] = {}
            for label in labels:
                value, samples = tpc_at(per_condition[label], lam, mu)
                cells[label] = {
                    "tpc": value,
                    "tpc_ci": None if value is None else percentile_ci(samples, cfg.confidence),
                }
            ranks = tpc_ranks({label: cells[label]["tpc"] for label in labels})
            for label in labels:
                cells[label]["rank"] = ranks.get(label)
                if cells[label]["tpc"] is not None:
                    spans[label]["tpcs"].append(cells[label]["tpc"])
                    spans[label]["ranks"].append(ranks[label])
            points.append(
                {
                    "lam": lam,
                    "mu": mu,
                    "by_condition": cells,
                    "kendall_tau": rank_agreement(base_ranks, ranks),
                    "same_order": ranks == base_ranks,
                }
            )
    return {
        "available": True,
        "lams": lam_grid,
        "mus": mu_grid,
        "base": {"lam": cfg.lam, "mu": cfg.mu},
        "n_points": len(points),
        "n_same_order": sum(p["same_order"] for p in points),
        "points": points,
        "by_condition": {
            label: {
                "min_tpc": min(span["tpcs"]) if span["tpcs"] else None,
                "max_tpc": max(span["tpcs"]) if span["tpcs"] else None,
                "best_rank": min(span["ranks"]) if span["ranks"] else None,
                "worst_rank": max(span["ranks"]) if span["ranks"] else None,
            }
            for label, span in spans.items()
        },
    }
