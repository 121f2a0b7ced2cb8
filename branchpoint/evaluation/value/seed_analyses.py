"""The search-value study's remaining analyses, from the columns `scoring.score` bootstraps:
paired router-vs-router differences, simultaneous (max-standardised) intervals, per-stratum
panels, the spread of gains, the power calculation and failure-rate tables.

Each is a value.json key (`router_differences`, `simultaneous`, `strata_panels`,
`gain_spread`, `power`, `failure_rates`), computed on the test rows:

- `router_differences` (§5.4 "the selector's difference is −0.36 points with interval
  [−1.42, 0.55]", §5.5 "Utility is −1.25 points at 0.005, with interval [−2.38, −0.35]"): every
  router's utility minus each reference router's (always SEARCH, the accuracy reference; the
  best constant, the factorial's), per price. Paired: both utilities are per-state columns of
  the same test states, and the interval is the percentile interval of the difference in each
  of the *same* resamples (never two intervals combined).
- `simultaneous` (Appendix B, "maximum-standardized bootstrap across the declared methods"):
  `simultaneous.max_standardised` over three declared families — every router's difference
  from always SEARCH at every price; every forecaster's gain risk, and Brier, minus the
  comparator `historical_mean`'s.
- `strata_panels` (Figure 3): `strata_panels.strata_panels`.
- `gain_spread` (§5.2, Figure 4 left, Appendix B): `gain_spread.gain_spread`.
- `power` (§4.2): per paired contrast, σ of its per-state differences, the difference 80%
  power detects at this study's n, and the questions needed for given differences
  (`power.required_n`), beside the design effect of the component bootstrap.
- `failure_rates` (Appendices A, C–E): `failures.failure_rates`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from branchpoint.evaluation.value import power as pw
from branchpoint.evaluation.value.bootstrap import percentile_interval
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.failures import failure_rates
from branchpoint.evaluation.value.gain_spread import gain_spread
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.simultaneous import max_standardised
from branchpoint.evaluation.value.strata_panels import strata_panels

#: Reference routers of the paired differences: the accuracy reference and the best constant.
REFERENCES: tuple[str, ...] = ("always_search", "best_constant")
#: The comparator of the forecaster families (simultaneous intervals, power).
COMPARATOR = "historical_mean"
#: The reference of the per-stratum Brier panel: the study's task prior ("map-minus-prior").
STRATUM_REFERENCE = ("stratum_prior", "historical_mean")
#: Differences the power table sizes for (utility points or gain-risk units).
DELTAS: tuple[float, ...] = (0.005, 0.01, 0.02)
ALPHA, POWER = 0.05, 0.8


class ScoreColumns(NamedTuple):
    """What `scoring.score` computed: per-state columns on the test rows (`names[j]` ↔
    `values[:, j]`), their balanced means (`point`) and resampled means (`boot`: empty when
    intervals are off or withheld), the test table, the forecasters and the prices' keys."""

    names: list[str]
    values: np.ndarray
    point: Mapping[str, float]
    boot: Mapping[str, np.ndarray]
    test: StateTable
    forecasters: Sequence[str]
    price_keys: Sequence[str]
    incomplete_records: int


def _routers(names: Sequence[str], pk: str) -> list[str]:
    prefix = f"U/{pk}/"
    return [n[len(prefix) :] for n in names if n.startswith(prefix)]


def _interval(samples: np.ndarray | None, level: float, num: Any) -> list[Any] | None:
    if samples is None:
        return None
    lo, hi = percentile_interval(samples, level)
    return [num(lo), num(hi)]


def router_differences(sc: ScoreColumns, level: float, num: Any) -> dict[str, Any]:
    """`router_differences`: per price, 'R - reference' for every router R and reference."""
    out: dict[str, Any] = {
        "references": list(REFERENCES),
        "paired_over": "the same test states and the same component resamples (the difference in each resample)",
        "by_price": {},
    }
    for pk in sc.price_keys:
        routers = _routers(sc.names, pk)
        block: dict[str, Any] = {}
        for ref in REFERENCES:
            if ref not in routers:
                continue
            b = f"U/{pk}/{ref}"
            for r in routers:
                if r == ref:
                    continue
                a = f"U/{pk}/{r}"
                samples = sc.boot[a] - sc.boot[b] if sc.boot else None
                block[f"{r} - {ref}"] = {
                    "difference": num(sc.point[a] - sc.point[b]),
                    "interval": _interval(samples, level, num),
                }
        out["by_price"][pk] = block
    return out


def _family(
    members: Mapping[str, tuple[str, str]], sc: ScoreColumns, level: float, num: Any, what: str
) -> dict[str, Any]:
    """One declared family: members name → (column a, column b), contrast a − b."""
    keys = list(members)
    point = [sc.point[a] - sc.point[b] for a, b in members.values()]
    entry: dict[str, Any] = {"what": what, "critical": None, "members": {}, "excluded": {}}
    if not sc.boot or not keys:
        for k, p in zip(keys, point):
            entry["members"][k] = {"difference": num(p), "se": None, "interval": None}
        return entry
    samples = np.column_stack([sc.boot[a] - sc.boot[b] for a, b in members.values()])
    sim = max_standardised(point, samples, level)
    entry["critical"] = num(sim.critical) if sim.critical is not None else None
    for j, k in enumerate(keys):
        iv = sim.intervals[j]
        entry["members"][k] = {
            "difference": num(point[j]),
            "se": num(sim.se[j]) if sim.se[j] is not None else None,
            "interval": [num(iv[0]), num(iv[1])] if iv is not None else None,
        }
    entry["excluded"] = {keys[j]: why for j, why in sim.excluded.items()}
    return entry


def simultaneous(sc: ScoreColumns, level: float, num: Any) -> dict[str, Any]:
    """`simultaneous`: max-standardised intervals over each declared family."""
    from scipy.stats import norm

    routers_family = {
        f"{pk}: {r} - always_search": (f"U/{pk}/{r}", f"U/{pk}/always_search")
        for pk in sc.price_keys
        for r in _routers(sc.names, pk)
        if r != "always_search" and "always_search" in _routers(sc.names, pk)
    }
    families = {
        "utility - always_search": _family(
            routers_family, sc, level, num, "every router's utility minus always SEARCH's, at every price"
        )
    }
    if COMPARATOR in sc.forecasters:
        others = [f for f in sc.forecasters if f != COMPARATOR]
        for score, col in (("gain_risk", "L"), ("brier", "brier")):
            fam = {f"{f} - {COMPARATOR}": (f"{col}/{f}", f"{col}/{COMPARATOR}") for f in others}
            families[f"{score} - {COMPARATOR}"] = _family(
                fam, sc, level, num, f"every forecaster's {score.replace('_', ' ')} minus {COMPARATOR}'s"
            )
    return {
        "method": "θ̂_k ± c·se_k, c the level quantile over resamples of max_k |θ*_k − θ̂_k| / se_k "
        "(se_k the SD of θ*_k); the family's intervals hold together",
        "level": level,
        "marginal_critical": float(norm.ppf((1.0 + level) / 2.0)),
        "families": families,
    }


def _opt(x: float | None, num: Any) -> Any:
    return None if x is None else num(x)


def _power_entry(diff: np.ndarray, boot_diff: np.ndarray | None, point: float, num: Any) -> dict[str, Any]:
    n = len(diff)
    sd = float(np.std(diff, ddof=1)) if n > 1 else float("nan")
    entry: dict[str, Any] = {
        "difference": num(point),
        "sd": num(sd),
        "n": n,
        "detectable_difference": _opt(pw.detectable_difference(sd, n, ALPHA, POWER), num),
        "power_at_difference": _opt(pw.power_at(sd, n, point, ALPHA), num),
        "required_n": {f"{d:g}": pw.required_n(sd, d, ALPHA, POWER) for d in DELTAS},
        "design_effect": None,
    }
    if boot_diff is not None and n > 1 and sd > 0:
        deff = float(np.nanvar(boot_diff, ddof=1)) / (sd * sd / n)
        entry["design_effect"] = num(deff)
    return entry


def power_section(sc: ScoreColumns, num: Any) -> dict[str, Any]:
    """`power`: the normal-approximation power calculation of each paired contrast."""
    idx = {n: j for j, n in enumerate(sc.names)}

    def contrast(a: str, b: str) -> dict[str, Any]:
        diff = sc.values[:, idx[a]] - sc.values[:, idx[b]]
        boot = sc.boot[a] - sc.boot[b] if sc.boot else None
        return _power_entry(diff, boot, sc.point[a] - sc.point[b], num)

    contrasts: dict[str, Any] = {}
    if COMPARATOR in sc.forecasters:
        for f in sc.forecasters:
            if f != COMPARATOR:
                contrasts[f"gain_risk: {f} - {COMPARATOR}"] = contrast(f"L/{f}", f"L/{COMPARATOR}")
    for pk in sc.price_keys:
        routers = _routers(sc.names, pk)
        if "always_search" not in routers:
            continue
        for r in routers:
            if r != "always_search" and not r.startswith("factorial:"):
                contrasts[f"utility {pk}: {r} - always_search"] = contrast(f"U/{pk}/{r}", f"U/{pk}/always_search")
    return {
        "alpha": ALPHA,
        "power": POWER,
        "deltas": list(DELTAS),
        "formula": "n(δ) = ⌈((z_{1−α/2} + z_power)·σ/δ)²⌉; detectable δ = (z_{1−α/2} + z_power)·σ/√n; "
        "σ = SD of the per-state paired differences",
        "assumption": "independent questions; design_effect = bootstrap variance of the balanced mean difference "
        "/ (σ²/n): multiply required_n by it for this study's strata and support components",
        "contrasts": contrasts,
    }


def panels_spec(sc: ScoreColumns) -> dict[str, dict[str, str | tuple[str, str]]]:
    """The per-stratum panels: utility per price, Brier, gain risk, Brier minus the task prior."""
    spec: dict[str, dict[str, str | tuple[str, str]]] = {"mean_gain": {"mean_gain": "dbar"}}
    for pk in sc.price_keys:
        spec[f"utility:{pk}"] = {r: f"U/{pk}/{r}" for r in _routers(sc.names, pk)}
    spec["brier"] = {f: f"brier/{f}" for f in sc.forecasters}
    spec["gain_risk"] = {f: f"L/{f}" for f in sc.forecasters}
    ref = next((r for r in STRATUM_REFERENCE if r in sc.forecasters), None)
    if ref is not None:
        spec["brier_minus_reference"] = {
            f"{f} - {ref}": (f"brier/{f}", f"brier/{ref}") for f in sc.forecasters if f != ref
        }
    return spec


def seed_analyses(sc: ScoreColumns, config: ValueConfig, num: Any, *, withheld: bool) -> dict[str, Any]:
    """Every section of this module, as value.json keys. `withheld`: the study reports no
    equal-stratum interval (a single-component stratum), so none of these has one either,
    except the per-stratum panels of strata with several components."""
    resamples = 0 if withheld else config.resamples
    tt = sc.test
    return {
        "router_differences": router_differences(sc, config.level, num),
        "simultaneous": simultaneous(sc, config.level, num),
        "strata_panels": strata_panels(
            sc.names,
            sc.values,
            tt.component,
            tt.stratum,
            panels=panels_spec(sc),
            resamples=config.resamples,
            seed=config.seed,
            level=config.level,
            num=num,
        ),
        "gain_spread": gain_spread(tt, resamples=resamples, seed=config.seed, level=config.level, num=num),
        "power": power_section(sc, num),
        "failure_rates": failure_rates(
            tt, incomplete=sc.incomplete_records, resamples=resamples, seed=config.seed, level=config.level, num=num
        ),
    }
