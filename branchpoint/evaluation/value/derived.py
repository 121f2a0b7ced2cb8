"""Scores of value.json formed from the per-state column means: the two-probe router's token
accounting and the share of a forecaster's Brier improvement that task priors recover.

Both read the stratum-balanced means of `scoring.state_columns` (`point`) and, with intervals
on, the same means in every support-component resample (`boot`), so their intervals are the
component bootstrap's like every other one.

- `consistency_accounting` (search-value study, §5.5, "Useful decision signals must cover
  their acquisition cost"): agreement rate, continuation tokens saved against always SEARCH
  before the probes are charged, the probes' tokens, the net tokens saved, and the success
  given up for them (`routers.consistency_accounting`).
- `task_prior_share` (§5.1, "Task-stratum means score 0.1836 and recover 88.9% of that observed
  improvement"): for a forecaster F against the global means (`historical_mean`, G) and the
  task-stratum means (`stratum_prior`, S),

      share_F = (Brier_G − Brier_S) / (Brier_G − Brier_F),

  and beside it the share of F's improvement carried by its success-level term (§5.1: "success-
  level error contributes −0.034763 of the map's −0.034800 Brier difference, or 99.9%"),

      level_share_F = (level_F − level_G) / (Brier_F − Brier_G).

  A ratio is undefined where its denominator is ≤ 0 (F does not improve on G): its point value
  is then null with the reason; in the resamples where it is undefined the interval counts it at
  both ends (−∞ below, +∞ above, as `intervals.skill_interval` does for R²_Δ), and past a share
  of (1 − level)/2 of them the interval is withheld and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.value.routers import ACCOUNTING_COLUMNS

GLOBAL_MEANS = "historical_mean"
TASK_PRIOR = "stratum_prior"


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def accounting_section(
    point: Mapping[str, float],
    boot: Mapping[str, np.ndarray],
    interval: Callable[[np.ndarray | None], list[Any] | None],
    skipped_routers: Mapping[str, str],
) -> dict[str, Any]:
    """value.json's `consistency_accounting`: each column of `routers.ACCOUNTING_COLUMNS` as
    {value, interval} (tokens per state, success in reward units), or `skipped` with the reason
    the two-probe router was not scored."""
    if "consistency" in skipped_routers:
        return {"skipped": skipped_routers["consistency"]}
    out: dict[str, Any] = {
        "against": "always_search",
        "note": "tokens per state averaged over probe pairs; tokens_saved is before the probes are charged, "
        "net_tokens_saved after; success_cost = Ȳ_S − reward of the chosen action",
    }
    for key in ACCOUNTING_COLUMNS:
        col = f"consistency/{key}"
        out[key] = {"value": _num(point[col]), "interval": interval(boot[col]) if boot else None}
    return out


def ratio_interval(
    num: np.ndarray, den: np.ndarray, level: float
) -> tuple[list[float | None] | None, float, str | None]:
    """Percentile interval of num/den over resamples, an undefined resample (den ≤ 0) counted
    at both ends (−∞ for the lower limit, +∞ for the upper), the limits taken as the order
    statistics just outside (numpy's "lower" / "higher" quantiles); (interval or None,
    undefined share, why withheld or None)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    alpha = (1.0 - level) / 2.0
    defined = den > 0
    share = float(1.0 - defined.mean()) if len(den) else 1.0
    if share > alpha:
        return (
            None,
            share,
            (
                f"the denominator is ≤ 0 (no improvement over {GLOBAL_MEANS}) in {share:.1%} of resamples, "
                f"more than {alpha:.1%}: a limit would be infinite"
            ),
        )
    ratio = np.where(defined, num / np.where(defined, den, 1.0), 0.0)
    low = np.where(defined, ratio, -np.inf)
    high = np.where(defined, ratio, np.inf)
    # order statistics on the outside ("lower" / "higher"): interpolating towards ±∞ gives NaN
    lo = float(np.quantile(low, alpha, method="lower"))
    hi = float(np.quantile(high, 1.0 - alpha, method="higher"))
    return [lo, hi], share, None


def task_prior_share(
    names: Sequence[str], point: Mapping[str, float], boot: Mapping[str, np.ndarray], level: float
) -> dict[str, Any]:
    """value.json's `task_prior_share` (module doc): per forecaster other than the two priors,
    `share` (of its Brier improvement over the global means that the task prior recovers) and
    `level_share` (of that improvement carried by the success-level term), each {value,
    interval, undefined_share, withheld}; `skipped` when either prior was not scored."""
    if GLOBAL_MEANS not in names or TASK_PRIOR not in names:
        return {"skipped": f"needs {GLOBAL_MEANS} and {TASK_PRIOR}, which are fitted on dev rows (--dev-split > 0)"}
    g, s = f"brier/{GLOBAL_MEANS}", f"brier/{TASK_PRIOR}"
    out: dict[str, Any] = {
        "global_means": GLOBAL_MEANS,
        "task_prior": TASK_PRIOR,
        "brier_global_means": _num(point[g]),
        "brier_task_prior": _num(point[s]),
        "formula": "share = (Brier_G − Brier_S) / (Brier_G − Brier_F); "
        "level_share = (level_F − level_G) / (Brier_F − Brier_G)",
        "forecasters": {},
    }

    def entry(num_of: Callable[[Mapping[str, Any]], Any], den_of: Callable[[Mapping[str, Any]], Any]) -> dict[str, Any]:
        n0, d0 = float(num_of(point)), float(den_of(point))
        value = n0 / d0 if d0 > 0 else None
        e: dict[str, Any] = {"value": value, "interval": None, "undefined_share": None, "withheld": None}
        if value is None:
            e["withheld"] = f"the forecaster does not improve on {GLOBAL_MEANS} (Brier difference {-d0:+.4g})"
        if boot:
            iv, share, why = ratio_interval(num_of(boot), den_of(boot), level)
            e.update({"interval": iv, "undefined_share": share})
            if why and e["withheld"] is None:
                e["withheld"] = why
        return e

    for name in names:
        if name in (GLOBAL_MEANS, TASK_PRIOR):
            continue
        f = f"brier/{name}"

        def prior_gain(src: Mapping[str, Any]) -> Any:
            return src[g] - src[s]

        def improvement(src: Mapping[str, Any], f: str = f) -> Any:
            return src[g] - src[f]

        def level_gain(src: Mapping[str, Any], name: str = name) -> Any:
            return src[f"level/{GLOBAL_MEANS}"] - src[f"level/{name}"]

        out["forecasters"][name] = {
            "share": entry(prior_gain, improvement),
            "level_share": entry(level_gain, improvement),
        }
    return out
