"""Scoring a fork study's test rows: per-state columns (θ̂, Δ̄, each forecaster's Brier parts and
gain risk, each router's utility per price), their stratum-balanced means, paired differences,
the level split, the decision factorial (`decision_factorial`), and bootstrap intervals over
support components.

`state_columns` builds the columns, `score` turns them into the score sections of value.json
(search-value study §3.3 for Brier, L and R²_Δ, §5.4 and Appendix E for utility and the
factorial). Rules that choose (best constant, τ, the factorial's fixed terms) choose on the dev
rows, or on the scored set when there are none, labelled in-sample.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from branchpoint.evaluation.value import routers, signal_routers
from branchpoint.evaluation.value.bootstrap import (
    bootstrap_means,
    few_component_strata,
    percentile_interval,
    single_component_strata,
)
from branchpoint.evaluation.value.config import ValueConfig, price_key
from branchpoint.evaluation.value.decision_factorial import FACTORIAL_CELLS, factorial_section, fixed_decision_terms
from branchpoint.evaluation.value.derived import accounting_section, task_prior_share
from branchpoint.evaluation.value.forecasters import Forecast
from branchpoint.evaluation.value.intervals import (
    SkillInterval,
    gain_r2_note,
    oracle_section,
    skill_interval,
    studentized_intervals,
)
from branchpoint.evaluation.value.json_numbers import interval_of, num
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.scores import (
    balanced_mean,
    brier_split,
    gain_r2,
    gain_risk,
    gain_variance,
    level_split,
    oracle_bound,
    theta_hat,
)
from branchpoint.evaluation.value.seed_analyses import ScoreColumns, seed_analyses


class _Columns:
    """Named per-state columns, averaged (stratum-balanced) and bootstrapped together."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.values: list[np.ndarray] = []

    def add(self, name: str, values: np.ndarray) -> None:
        self.names.append(name)
        self.values.append(np.asarray(values, dtype=float))

    def matrix(self) -> np.ndarray:
        return np.stack(self.values, axis=1)


class StateColumns(NamedTuple):
    """Per-state columns on the test rows (`names[j]` ↔ `values[:, j]`), the test table, what
    each router reported beside its utility, the routers left out (with the reason), and how
    the rules that choose something (best constant, τ, fixed factorial terms) chose it."""

    names: list[str]
    values: np.ndarray
    test: StateTable
    router_info: dict[str, dict[str, dict[str, Any]]]
    skipped_routers: dict[str, str]
    selection: dict[str, Any]


def constant_level(q_think: np.ndarray, q_search: np.ndarray) -> float | None:
    """ℓ₀ when the forecast's success level (q_T + q_S)/2 is the same at every row, else None."""
    level = 0.5 * (q_think + q_search)
    if len(level) and float(np.ptp(level)) <= 1e-12:
        return float(level[0])
    return None


def state_columns(
    states: StateTable,
    dev: np.ndarray,
    forecasts: Mapping[str, Forecast],
    config: ValueConfig,
    signal_forecasts: Sequence[str] = (),
) -> StateColumns:
    """Every per-state quantity whose stratum-balanced mean value.json reports: θ̂, Δ̄, |Δ̄|, ℓ̂*;
    per forecaster its Brier parts, L and the level moments; per price and router the utility.
    The scores are these means (or formulas of them), in the full sample and in each bootstrap
    resample.

    Rules that choose (the best constant, the threshold τ, the factorial's fixed terms) choose
    on the dev rows; with no dev rows (`--dev-split 0`) they choose on the scored set itself
    and say so (`selection["in_sample"]`): optimistic, labelled in-sample.

    `signal_forecasts` names the raw forecasts whose q_T feeds the confidence and entropy
    routers (`signal_routers`); the public-prefix signal routers need no forecast.
    """
    has_dev = bool(dev.any())
    test = ~dev if has_dev else np.ones(len(states), dtype=bool)
    choose_on = dev if has_dev else test
    selection: dict[str, Any] = {
        "rows": "dev" if has_dev else "scored (in-sample: no dev rows, --dev-split 0)",
        "in_sample": not has_dev,
    }
    tt = states.subset(test)
    cols = _Columns()
    theta = theta_hat(tt.think, tt.search)
    target = 0.5 * (tt.think.mean_y + tt.search.mean_y)
    cols.add("theta", theta)
    cols.add("dbar", tt.dbar)
    cols.add("abs_dbar", np.abs(tt.dbar))
    cols.add("target_level", target)
    names = list(forecasts)
    for name in names:
        fc = forecasts[name]
        q_t, q_s = fc.q_think[test], fc.q_search[test]
        split = brier_split(q_t, q_s, tt.think, tt.search)
        for part in ("brier", "level", "gain", "variance"):
            cols.add(f"{part}/{name}", getattr(split, part))
        cols.add(f"L/{name}", gain_risk(q_s - q_t, tt.dbar, theta))
        level = 0.5 * (q_t + q_s)
        cols.add(f"ell/{name}", level)
        cols.add(f"ell2/{name}", level * level)
        cols.add(f"ellt/{name}", level * target)

    fixed = fixed_decision_terms(states, choose_on)
    selection["factorial_fixed_terms"] = fixed
    skipped_routers: dict[str, str] = {}
    if not bool(routers.consistency_defined(tt).all()):
        short = int((~routers.consistency_defined(tt)).sum())
        skipped_routers["consistency"] = (
            f"needs at least 3 THINK repeats per state (2 probes + draws to score the choice on); "
            f"{short} test states have fewer: fork with --repeats 3 or more (4 in the study)"
        )
    if "consistency" not in skipped_routers:
        for key, column in routers.consistency_accounting(tt).items():
            cols.add(f"consistency/{key}", column)
    utility_meta: dict[str, dict[str, dict[str, Any]]] = {}
    for price in config.prices:
        pk = price_key(price)
        routed = routers.registered_routes(states, test, choose_on, price, selection["rows"])
        if "consistency" not in skipped_routers:
            r = routers.consistency(tt, price)
            agree = r.info.pop("agreement_by_state")
            r.info["agreement_rate"] = num(balanced_mean(agree, tt.stratum))
            r.info["scored_on"] = "draws disjoint from the probes, averaged over every paired split"
            routed["consistency"] = r
        routed["sample_informed"] = routers.sample_informed(tt, price)
        routed["oracle"] = routers.oracle(tt, price)
        full = routers.best_constant(states, choose_on, price)
        full.info["chosen_on"] = selection["rows"]
        full.info["in_sample"] = not has_dev
        routed["best_constant"] = routers.Routed(full.utility[test], full.tokens[test], full.search[test], full.info)
        for cell, query_gain, query_cost in FACTORIAL_CELLS:
            r = routers.split_rule(
                tt,
                price,
                fixed_gain=None if query_gain else fixed["gain"],
                fixed_cost=None if query_cost else fixed["incremental_tokens"],
            )
            r.info.update(
                {
                    "gain": "query-specific" if query_gain else "fixed",
                    "cost": "query-specific" if query_cost else "fixed",
                }
            )
            routed[f"factorial:{cell}"] = r
        for name in names:
            f = forecasts[name].q_search - forecasts[name].q_think
            tau, sel_scores = routers.best_threshold(f, states, choose_on, price, config.taus)
            r = routers.threshold(f[test], tau, tt, price)
            grid = {
                f"{t:g}": num(balanced_mean(routers.threshold(f[test], t, tt, price).utility, tt.stratum))
                for t in config.taus
            }
            r.info = {
                "tau": tau,
                "tau_chosen_on": selection["rows"],
                "in_sample": not has_dev,
                "test_utility_by_tau": grid,
                "dev_utility_by_tau": sel_scores if has_dev else None,
            }
            routed[f"threshold:{name}"] = r
        routed.update(
            signal_routers.signal_routes(states, test, choose_on, forecasts, signal_forecasts, price, selection["rows"])
        )
        utility_meta[pk] = {}
        for rname, r in routed.items():
            cols.add(f"U/{pk}/{rname}", r.utility)
            utility_meta[pk][rname] = {
                "search_rate": num(balanced_mean(r.search, tt.stratum)),
                "mean_tokens": num(balanced_mean(r.tokens, tt.stratum)),
                **r.info,
            }

    return StateColumns(cols.names, cols.matrix(), tt, utility_meta, skipped_routers, selection)


def score(
    states: StateTable,
    dev: np.ndarray,
    forecasts: Mapping[str, Forecast],
    config: ValueConfig,
    signal_forecasts: Sequence[str] = (),
) -> dict[str, Any]:
    """Scores, paired differences, utilities and bootstrap intervals on the test rows
    (`signal_forecasts`: the raw forecasts the confidence and entropy routers read)."""
    names = list(forecasts)
    cols, matrix, tt, utility_meta, skipped_routers, selection = state_columns(
        states, dev, forecasts, config, signal_forecasts
    )
    point = dict(zip(cols, balanced_mean(matrix, tt.stratum)))
    warnings: list[str] = []
    if selection["in_sample"]:
        warnings.append(
            "no dev rows (--dev-split 0): best_constant, the threshold routers' τ and the factorial's fixed "
            "terms are chosen on the scored states themselves (in-sample, optimistic)"
        )
    single = single_component_strata(tt.component, tt.stratum)
    withheld = None
    if single:
        withheld = (
            f"stratum {', '.join(repr(s) for s in single)} has a single support component, so a component "
            "bootstrap cannot resample its variation; every equal-stratum quantity depends on it, so no "
            "interval is reported (point estimates only)"
        )
        warnings.append(withheld)
    few = few_component_strata(tt.component, tt.stratum)
    if few:
        warnings.append(
            "few support components in stratum "
            + ", ".join(f"{s!r} ({k})" for s, k in few.items())
            + ": intervals may undercover (a bootstrap cannot learn a spread from so few clusters)"
        )
    boot: dict[str, np.ndarray] = {}
    if config.resamples > 0 and not single:
        samples = bootstrap_means(matrix, tt.component, tt.stratum, resamples=config.resamples, seed=config.seed)
        boot = {n: samples[:, j] for j, n in enumerate(cols)}

    def stat(fn: Any, *keys: str) -> tuple[float, np.ndarray | None]:
        """A statistic of column means: its point estimate and its value in every resample."""
        est = fn(*(point[k] for k in keys))
        return float(est), (fn(*(boot[k] for k in keys)) if boot else None)

    def interval(samples: np.ndarray | None) -> list[Any] | None:
        if samples is None:
            return None
        lo, hi = percentile_interval(samples, config.level)
        return interval_of(lo, hi)

    v_delta = stat(gain_variance, "theta", "dbar")
    undefined: list[SkillInterval] = []

    def skill(samples: np.ndarray | None) -> list[Any] | None:
        """An R²_Δ-type interval: undefined resamples (V_Δ ≤ 0) at both ends, withheld past a share."""
        if samples is None or v_delta[1] is None:
            return None
        out = skill_interval(samples, v_delta[1], config.level, v_delta[0])
        undefined.append(out)
        return interval_of(*out.interval) if out.interval is not None else None

    result: dict[str, Any] = {"brier": {}, "gain_risk": {}, "gain_r2": {}}
    intervals: dict[str, Any] = {"brier": {}, "gain_risk": {}, "gain_r2": {}}
    per_forecaster: dict[str, dict[str, tuple[float, np.ndarray | None]]] = {}
    for name in names:
        brier = stat(lambda x: x, f"brier/{name}")
        risk = stat(lambda x: x, f"L/{name}")
        boot_r2 = gain_r2(risk[1], v_delta[1]) if risk[1] is not None and v_delta[1] is not None else None
        assert not isinstance(boot_r2, float)  # of resampled columns: an array
        r2 = (float(gain_r2(risk[0], v_delta[0])), boot_r2)
        per_forecaster[name] = {"brier": brier, "gain_risk": risk, "gain_r2": r2}
        result["brier"][name] = {part: num(point[f"{part}/{name}"]) for part in ("brier", "level", "gain", "variance")}
        result["gain_risk"][name] = num(risk[0])
        result["gain_r2"][name] = num(r2[0])
        for key, value in per_forecaster[name].items():
            intervals[key][name] = skill(value[1]) if key == "gain_r2" else interval(value[1])
    theta_stat = stat(lambda x: x, "theta")
    result["theta"] = num(theta_stat[0])
    result["mean_gain"] = num(point["dbar"])
    result["gain_variance"] = num(v_delta[0])
    intervals["theta"] = interval(theta_stat[1])
    intervals["mean_gain"] = interval(boot["dbar"]) if boot else None
    intervals["gain_variance"] = interval(v_delta[1])
    result["oracle_range"] = oracle_section(point, boot, config.level)
    if boot:  # offered beside the percentile intervals: see docs/search-value.md, "Intervals"
        stud = studentized_intervals(
            matrix[:, cols.index("theta")],
            tt.dbar,
            tt.component,
            tt.stratum,
            resamples=config.resamples,
            seed=config.seed,
            level=config.level,
        )
        intervals["studentized"] = {k: interval_of(*iv) for k, iv in stud.items()}

    paired: dict[str, Any] = {}
    for a, b in itertools.combinations(names, 2):
        entry = {}
        for key in ("brier", "gain_risk", "gain_r2"):
            (ea, sa), (eb, sb) = per_forecaster[a][key], per_forecaster[b][key]
            diff_iv = (skill if key == "gain_r2" else interval)(sa - sb) if sa is not None else None
            entry[key] = {"difference": num(ea - eb), "interval": diff_iv}
        paired[f"{a} - {b}"] = entry
    result["paired"] = paired
    result["level_split"] = _level_splits(names, forecasts, tt, dev, point, boot, interval)

    by_price: dict[str, Any] = {}
    intervals["utility"] = {}
    for pk, per_router in utility_meta.items():
        by_price[pk] = {}
        intervals["utility"][pk] = {}
        for rname, meta in per_router.items():
            est, u_samples = stat(lambda x: x, f"U/{pk}/{rname}")
            by_price[pk][rname] = {"utility": num(est), **meta}
            intervals["utility"][pk][rname] = interval(u_samples)
    result["utility"] = {
        "prices": list(config.prices),
        "tau_grid": list(config.taus),
        "chosen_on": selection["rows"],
        "in_sample": selection["in_sample"],
        "oracle_range": result["oracle_range"],
        "oracle_plugin_optimistic": num(oracle_bound(point["abs_dbar"], point["dbar"])),
        "skipped_routers": skipped_routers,
        "by_price": by_price,
    }
    result["decision_factorial"] = factorial_section(utility_meta, point, boot, interval, selection)
    columns = ScoreColumns(cols, matrix, point, boot, tt, names, list(utility_meta), states.counts.incomplete)
    result.update(seed_analyses(columns, config, num, withheld=withheld is not None))
    result["consistency_accounting"] = accounting_section(point, boot, interval, skipped_routers)
    result["task_prior_share"] = task_prior_share(names, point, boot, config.level)
    r2_note = gain_r2_note(undefined, config.level)
    if r2_note["withheld"]:
        warnings.append(f"R²_Δ intervals withheld: {r2_note['withheld']}")
    result["intervals"] = {
        "method": "percentile bootstrap over support components, resampled within strata; strata weighted "
        "equally in each resample",
        "gain_r2_undefined": r2_note,
        "resamples": config.resamples,
        "seed": config.seed,
        "level": config.level,
        "withheld": withheld,
        **intervals,
    }
    result["warnings"] = warnings
    return result


def _level_splits(
    names: Sequence[str],
    forecasts: Mapping[str, Forecast],
    tt: StateTable,
    dev: np.ndarray,
    point: dict[str, float],
    boot: dict[str, np.ndarray],
    interval: Any,
) -> dict[str, Any]:
    """`level_split` of every forecaster against each constant-level forecaster (ℓ the same at
    every test row, e.g. `historical_mean`): the level contrast, its mean-bias and variation
    parts, and the gain part ¼ΔL beside it, each with its interval."""
    test = ~dev if dev.any() else np.ones(len(dev), dtype=bool)
    refs = {
        n: lv
        for n in names
        if (lv := constant_level(forecasts[n].q_think[test], forecasts[n].q_search[test])) is not None
    }
    out: dict[str, Any] = {}
    for ref, level0 in refs.items():
        for name in names:
            if name == ref:
                continue
            keys = (f"ell/{name}", f"ell2/{name}", f"ellt/{name}", "target_level")

            def parts(src: dict[str, Any]) -> Any:
                ell, ell2, ellt, target = (src[k] for k in keys)
                return level_split(ell, ell2, ellt, target, level0)

            est = parts(point)
            samples = parts(boot) if boot else None
            gain_part = point[f"gain/{name}"] - point[f"gain/{ref}"]
            gain_samples = boot[f"gain/{name}"] - boot[f"gain/{ref}"] if boot else None
            entry: dict[str, Any] = {"reference_level": level0}
            for field_name in ("total", "mean_bias", "variation"):
                entry[f"level_{field_name}"] = {
                    "value": num(getattr(est, field_name)),
                    "interval": interval(getattr(samples, field_name)) if samples is not None else None,
                }
            entry["gain_quarter"] = {"value": num(gain_part), "interval": interval(gain_samples)}
            out[f"{name} - {ref}"] = entry
    return out
