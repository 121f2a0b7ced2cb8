"""`value`: score forecasters and routers on a fork study and write value.json.

Steps: read RUN_DIR/forks.jsonl → states (`outcomes.build_states`) → dev/test split by support
component (`outcomes.dev_split`) → forecasts: every registered forecaster, each `--forecasts`
file, the LLM forecaster when a client is given, and each calibration map applied to the raw
ones (files, LLM) → per-state scores on the test rows → stratum-balanced means → bootstrap
intervals over support components → routers' utility at each price.

Every number in value.json is computed on the test rows (all rows when there is no dev split),
so fitted and unfitted forecasters are compared on the same states.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from branchpoint.errors import InputError
from branchpoint.evaluation.value import routers
from branchpoint.evaluation.value.bootstrap import (
    bootstrap_means,
    few_component_strata,
    percentile_interval,
    single_component_strata,
)
from branchpoint.evaluation.value import fitted  # noqa: F401  (registers the fitted forecasters and maps)
from branchpoint.evaluation.value.objectives import LEXICAL_OBJECTIVES, align, objective_comparison
from branchpoint.evaluation.value.forecasters import (
    Forecast,
    ForecasterUnavailable,
    calibrators,
    registered_forecasters,
    read_forecasts,
    run_forecaster,
)
from branchpoint.evaluation.value.outcomes import Roles, StateTable, build_states, dev_split, get_reward
from branchpoint.evaluation.value.scores import (
    balanced_mean,
    brier_split,
    gain_r2,
    gain_risk,
    gain_variance,
    level_split,
    oracle_bound,
    oracle_range,
    theta_hat,
)
from branchpoint.evaluation.value.value_file import VALUE_FILE, VALUE_SCHEMA_VERSION, value_file_text
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, ExecutionRecord, TraceError, read_records

if TYPE_CHECKING:
    from branchpoint.models.call import ModelClient

DEFAULT_PRICES: tuple[float, ...] = (0.0, 0.001, 0.005, 0.01, 0.02)


class ValueConfig(BaseModel):
    """Settings of a search-value scoring run (all have the defaults the CLI shows)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge: str = "rule"
    reward: str = "correct"
    dev_split: float = Field(0.3, ge=0.0, lt=1.0, description="fraction of support components used to fit")
    seed: int = 0
    resamples: int = Field(10_000, ge=0, description="bootstrap resamples (0: no intervals)")
    level: float = Field(0.95, gt=0.0, lt=1.0)
    prices: tuple[float, ...] = DEFAULT_PRICES
    taus: tuple[float, ...] = routers.TAU_GRID
    pending_roles: tuple[str, str] = ("STOP", "SEARCH")
    text_head: bool = Field(False, description="embed each state's public text with `encoder` for minilm_ridge")
    audit_judges: tuple[str, str] | None = Field(None, description="two judges whose disagreements bound the labels")
    learning_curves: bool = Field(False, description="matched-configuration gain learning curves (curves.py)")
    curve_budgets: tuple[int, ...] = (20, 40, 80, 120, 240, 480, 800, 1100)
    curve_samples: int = Field(10, ge=1)
    encoder: str = "minilm-onnx"

    @field_validator("prices")
    @classmethod
    def _prices(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v or any(p < 0 or not math.isfinite(p) for p in v):
            raise ValueError("prices must be one or more non-negative numbers")
        return v


def price_key(price: float) -> str:
    """The key of a price in value.json: `0`, `0.001`, ..."""
    return f"{price:g}"


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def fork_paths(path: Path) -> tuple[Path, Path | None]:
    """(forks file, parent executions file or None) of a run directory or a forks .jsonl file."""
    path = Path(path)
    if path.is_dir():
        forks = path / FORKS_FILE
        if not forks.is_file():
            raise InputError(
                f"{forks}: not found; this run has no forked executions yet "
                f"(run `branchpoint fork {path}` first)"
            )
        execs = path / EXECUTIONS_FILE
        return forks, execs if execs.is_file() else None
    if not path.is_file():
        raise InputError(f"{path}: not found (expected a run directory or a forks .jsonl file)")
    sibling = path.parent / EXECUTIONS_FILE
    return path, sibling if sibling.is_file() and sibling != path else None


def _read(path: Path) -> list[ExecutionRecord]:
    try:
        return read_records(path)
    except TraceError as exc:
        raise InputError(str(exc)) from None


def load_states(path: Path, config: ValueConfig) -> tuple[StateTable, dict[str, ExecutionRecord], Path]:
    """The state table of a run (or forks file), the parent records by id, and the forks path."""
    forks_path, execs_path = fork_paths(path)
    get_reward(config.reward)  # unknown names fail before any work
    records = _read(forks_path)
    forked = [r for r in records if r.parent is not None]
    if not forked:
        raise InputError(f"{forks_path}: no forked executions (records with a parent); run `branchpoint fork` first")
    roles = Roles(tuple(config.pending_roles))
    states = build_states(forked, reward_name=config.reward, judge=config.judge, roles=roles)
    if len(states) == 0:
        c = states.counts
        raise InputError(
            f"{forks_path}: no state can be scored: of {c.groups} forked states, {c.missing_role} lack one of the "
            f"two actions and {c.few_repeats} have fewer than 2 repeats of one ({c.incomplete} incomplete records "
            "left out); fork with both actions and --repeats 2 or more"
        )
    parents: dict[str, ExecutionRecord] = {}
    if execs_path is not None:
        for r in _read(execs_path):
            parents[r.execution_id] = r
    return states, parents, forks_path


# --------------------------------------------------------------------------------------------
# Forecasts
# --------------------------------------------------------------------------------------------


def collect_forecasts(
    states: StateTable,
    dev: np.ndarray,
    *,
    files: Sequence[Path] = (),
    extra: Mapping[str, Forecast] | None = None,
    seed: int = 0,
) -> tuple[dict[str, Forecast], dict[str, dict[str, Any]], dict[str, str]]:
    """Every forecast to score, what each is, and the forecasters skipped (with the reason)."""
    out: dict[str, Forecast] = {}
    meta: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    raw: list[str] = []
    for entry in registered_forecasters():
        if entry.fitted and not dev.any():
            skipped[entry.name] = "fitted on dev rows, and there are none (--dev-split 0)"
            continue
        try:
            out[entry.name] = run_forecaster(entry, states, dev)
        except ForecasterUnavailable as exc:
            skipped[entry.name] = str(exc)
            continue
        meta[entry.name] = {"kind": "registered", "fitted": entry.fitted}
        if entry.calibrate:
            raw.append(entry.name)
    for path in files:
        name = f"file:{Path(path).stem}"
        while name in out:
            name += "'"
        out[name] = read_forecasts(Path(path), states)
        meta[name] = {"kind": "file"}
        raw.append(name)
    for name, fc in (extra or {}).items():
        fc.check(name, len(states))
        out[name] = fc
        meta[name] = {"kind": "given"}
        raw.append(name)
    for base in raw:
        for cal_name, cal in calibrators().items():
            name = f"{base}+{cal_name}"
            if dev.sum() < 2:
                skipped[name] = "calibration needs at least 2 dev rows (--dev-split > 0)"
                continue
            try:
                fc = cal(out[base], states, dev, seed=seed)
            except ForecasterUnavailable as exc:
                skipped[name] = str(exc)
                continue
            fc.check(name, len(states))
            out[name] = fc
            meta[name] = {"kind": "calibrated", "raw": base, "map": cal_name}
    for name, fc in out.items():
        if fc.info:
            meta[name]["info"] = fc.info
    return out, meta, skipped


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


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


def _num(x: Any) -> Any:
    """A JSON-safe number: NaN → null, ±inf → "inf" / "-inf" (as in metrics.json)."""
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _interval(lo: float, hi: float) -> list[Any]:
    return [_num(lo), _num(hi)]


class StateColumns(NamedTuple):
    """Per-state columns on the test rows (`names[j]` ↔ `values[:, j]`), the test table, what
    each router reported beside its utility, the routers left out (with the reason), and how
    the rules that choose something (best constant, τ, fixed factorial terms) chose it."""

    names: list[str]
    values: np.ndarray
    test: StateTable
    router_info: dict[str, dict[str, dict[str, Any]]]
    skipped_routers: dict[str, str] = {}
    selection: dict[str, Any] = {}


FACTORIAL_CELLS: tuple[tuple[str, bool, bool], ...] = (
    # (name, query-specific gain, query-specific cost)
    ("fixed_gain_fixed_cost", False, False),
    ("query_gain_fixed_cost", True, False),
    ("fixed_gain_query_cost", False, True),
    ("query_gain_query_cost", True, True),
)


def fixed_decision_terms(states: StateTable, rows: np.ndarray) -> dict[str, float]:
    """The fixed terms of the decision factorial, from `rows` (dev rows, or the scored set when
    there are none): the stratum-balanced mean reward of each action, their difference (the
    fixed gain) and the mean incremental tokens T̄_S − T̄_T (the fixed cost). Search-value study,
    Appendix E ("Fixed action rewards are 0.68125 and 0.725 …; the fixed incremental token cost
    is 7,007.49375")."""
    cols = np.stack([states.think.mean_y[rows], states.search.mean_y[rows],
                     states.think.mean_tokens[rows], states.search.mean_tokens[rows]], axis=1)  # fmt: skip
    r_t, r_s, t_t, t_s = balanced_mean(cols, states.stratum[rows])
    return {"reward_think": float(r_t), "reward_search": float(r_s), "gain": float(r_s - r_t),
            "incremental_tokens": float(t_s - t_t)}  # fmt: skip


def constant_level(q_think: np.ndarray, q_search: np.ndarray) -> float | None:
    """ℓ₀ when the forecast's success level (q_T + q_S)/2 is the same at every row, else None."""
    level = 0.5 * (q_think + q_search)
    if len(level) and float(np.ptp(level)) <= 1e-12:
        return float(level[0])
    return None


def state_columns(
    states: StateTable, dev: np.ndarray, forecasts: Mapping[str, Forecast], config: ValueConfig
) -> StateColumns:
    """Every per-state quantity whose stratum-balanced mean value.json reports: θ̂, Δ̄, |Δ̄|, ℓ̂*;
    per forecaster its Brier parts, L and the level moments; per price and router the utility.
    The scores are these means (or formulas of them), in the full sample and in each bootstrap
    resample.

    Rules that choose (the best constant, the threshold τ, the factorial's fixed terms) choose
    on the dev rows; with no dev rows (`--dev-split 0`) they choose on the scored set itself
    and say so (`selection["in_sample"]`): optimistic, labelled in-sample.
    """
    has_dev = bool(dev.any())
    test = ~dev if has_dev else np.ones(len(states), dtype=bool)
    choose_on = dev if has_dev else test
    selection = {
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
    utility_meta: dict[str, dict[str, dict[str, Any]]] = {}
    for price in config.prices:
        pk = price_key(price)
        routed: dict[str, routers.Routed] = {
            "always_think": routers.constant("T", tt, price),
            "always_search": routers.constant("S", tt, price),
        }
        if "consistency" not in skipped_routers:
            r = routers.consistency(tt, price)
            agree = r.info.pop("agreement_by_state")
            r.info["agreement_rate"] = _num(balanced_mean(agree, tt.stratum))
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
                tt, price, fixed_gain=None if query_gain else fixed["gain"],
                fixed_cost=None if query_cost else fixed["incremental_tokens"],
            )  # fmt: skip
            r.info.update({"gain": "query-specific" if query_gain else "fixed",
                           "cost": "query-specific" if query_cost else "fixed"})  # fmt: skip
            routed[f"factorial:{cell}"] = r
        for name in names:
            f = forecasts[name].q_search - forecasts[name].q_think
            tau, sel_scores = routers.best_threshold(f, states, choose_on, price, config.taus)
            r = routers.threshold(f[test], tau, tt, price)
            grid = {
                f"{t:g}": _num(balanced_mean(routers.threshold(f[test], t, tt, price).utility, tt.stratum))
                for t in config.taus
            }
            r.info = {"tau": tau, "tau_chosen_on": selection["rows"], "in_sample": not has_dev,
                      "test_utility_by_tau": grid, "dev_utility_by_tau": sel_scores if has_dev else None}  # fmt: skip
            routed[f"threshold:{name}"] = r
        utility_meta[pk] = {}
        for rname, r in routed.items():
            cols.add(f"U/{pk}/{rname}", r.utility)
            utility_meta[pk][rname] = {
                "search_rate": _num(balanced_mean(r.search, tt.stratum)),
                "mean_tokens": _num(balanced_mean(r.tokens, tt.stratum)),
                **r.info,
            }

    return StateColumns(cols.names, cols.matrix(), tt, utility_meta, skipped_routers, selection)


def score(
    states: StateTable,
    dev: np.ndarray,
    forecasts: Mapping[str, Forecast],
    config: ValueConfig,
) -> dict[str, Any]:
    """Scores, paired differences, utilities and bootstrap intervals on the test rows."""
    names = list(forecasts)
    cols, matrix, tt, utility_meta, skipped_routers, selection = state_columns(states, dev, forecasts, config)
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
            "few support components in stratum " + ", ".join(f"{s!r} ({k})" for s, k in few.items())
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
        return _interval(lo, hi)

    v_delta = stat(gain_variance, "theta", "dbar")
    result: dict[str, Any] = {"brier": {}, "gain_risk": {}, "gain_r2": {}}
    intervals: dict[str, Any] = {"brier": {}, "gain_risk": {}, "gain_r2": {}}
    per_forecaster: dict[str, dict[str, tuple[float, np.ndarray | None]]] = {}
    for name in names:
        b = stat(lambda x: x, f"brier/{name}")
        risk = stat(lambda x: x, f"L/{name}")
        r2 = (
            float(gain_r2(risk[0], v_delta[0])),
            gain_r2(risk[1], v_delta[1]) if risk[1] is not None else None,
        )
        per_forecaster[name] = {"brier": b, "gain_risk": risk, "gain_r2": r2}
        result["brier"][name] = {part: _num(point[f"{part}/{name}"]) for part in ("brier", "level", "gain", "variance")}
        result["gain_risk"][name] = _num(risk[0])
        result["gain_r2"][name] = _num(r2[0])
        for key, value in per_forecaster[name].items():
            intervals[key][name] = interval(value[1])
    theta_stat = stat(lambda x: x, "theta")
    result["theta"] = _num(theta_stat[0])
    result["mean_gain"] = _num(point["dbar"])
    result["gain_variance"] = _num(v_delta[0])
    intervals["theta"] = interval(theta_stat[1])
    intervals["mean_gain"] = interval(boot["dbar"]) if boot else None
    intervals["gain_variance"] = interval(v_delta[1])
    rng_lo, rng_hi = oracle_range(point["theta"], point["dbar"])
    range_iv = None
    if boot:  # from the lower bound's lower end to the upper bound's upper end
        b_lo, b_hi = oracle_range(boot["theta"], boot["dbar"])
        range_iv = [interval(b_lo)[0], interval(b_hi)[1]]  # type: ignore[index]
    result["oracle_range"] = {
        "lower": _num(rng_lo), "upper": _num(rng_hi), "interval": range_iv,
        "formula": "max{0, (Eθ̂ − |EΔ̄|)/2} ≤ H = (E|Δ| − |EΔ|)/2 ≤ (√Eθ̂ − |EΔ̄|)/2",
    }  # fmt: skip

    paired: dict[str, Any] = {}
    for a, b in itertools.combinations(names, 2):
        entry = {}
        for key in ("brier", "gain_risk", "gain_r2"):
            (ea, sa), (eb, sb) = per_forecaster[a][key], per_forecaster[b][key]
            entry[key] = {"difference": _num(ea - eb), "interval": interval(sa - sb) if sa is not None else None}
        paired[f"{a} - {b}"] = entry
    result["paired"] = paired
    result["level_split"] = _level_splits(names, forecasts, tt, dev, point, boot, interval)

    by_price: dict[str, Any] = {}
    intervals["utility"] = {}
    for pk, per_router in utility_meta.items():
        by_price[pk] = {}
        intervals["utility"][pk] = {}
        for rname, meta in per_router.items():
            est, samples = stat(lambda x: x, f"U/{pk}/{rname}")
            by_price[pk][rname] = {"utility": _num(est), **meta}
            intervals["utility"][pk][rname] = interval(samples)
    result["utility"] = {
        "prices": list(config.prices),
        "tau_grid": list(config.taus),
        "chosen_on": selection["rows"],
        "in_sample": selection["in_sample"],
        "oracle_range": result["oracle_range"],
        "oracle_plugin_optimistic": _num(oracle_bound(point["abs_dbar"], point["dbar"])),
        "skipped_routers": skipped_routers,
        "by_price": by_price,
    }
    result["decision_factorial"] = _factorial(utility_meta, point, boot, interval, selection)
    result["intervals"] = {
        "method": "percentile bootstrap over support components, resampled within strata; strata weighted "
                  "equally in each resample",
        "resamples": config.resamples,
        "seed": config.seed,
        "level": config.level,
        "withheld": withheld,
        **intervals,
    }  # fmt: skip
    result["warnings"] = warnings
    return result


def _level_splits(
    names: Sequence[str], forecasts: Mapping[str, Forecast], tt: StateTable, dev: np.ndarray,
    point: dict[str, float], boot: dict[str, np.ndarray], interval: Any,
) -> dict[str, Any]:
    """`level_split` of every forecaster against each constant-level forecaster (ℓ the same at
    every test row, e.g. `historical_mean`): the level contrast, its mean-bias and variation
    parts, and the gain part ¼ΔL beside it, each with its interval."""
    test = ~dev if dev.any() else np.ones(len(dev), dtype=bool)
    refs = {n: lv for n in names if (lv := constant_level(forecasts[n].q_think[test], forecasts[n].q_search[test])) is not None}
    out: dict[str, Any] = {}
    for ref, level0 in refs.items():
        for name in names:
            if name == ref:
                continue
            keys = (f"ell/{name}", f"ell2/{name}", f"ellt/{name}", "target_level")

            def parts(src: dict[str, Any]) -> Any:
                return level_split(*(src[k] for k in keys), level0)

            est = parts(point)
            samples = parts(boot) if boot else None
            gain_part = point[f"gain/{name}"] - point[f"gain/{ref}"]
            gain_samples = boot[f"gain/{name}"] - boot[f"gain/{ref}"] if boot else None
            entry: dict[str, Any] = {"reference_level": level0}
            for field_name in ("total", "mean_bias", "variation"):
                entry[f"level_{field_name}"] = {
                    "value": _num(getattr(est, field_name)),
                    "interval": interval(getattr(samples, field_name)) if samples is not None else None,
                }
            entry["gain_quarter"] = {"value": _num(gain_part), "interval": interval(gain_samples)}
            out[f"{name} - {ref}"] = entry
    return out


def _factorial(
    utility_meta: dict[str, dict[str, dict[str, Any]]], point: dict[str, float], boot: dict[str, np.ndarray],
    interval: Any, selection: dict[str, Any],
) -> dict[str, Any]:
    """The decision factorial per price: each cell's utility over the best constant, and the
    contrasts of adding one kind of information to the other (search-value study §5.4)."""
    out: dict[str, Any] = {
        "fixed_terms": selection["factorial_fixed_terms"],
        "fixed_terms_from": selection["rows"],
        "selection_draws": "free (not charged); ⌊m/2⌋ per action select, the rest evaluate; all splits averaged",
        "by_price": {},
    }
    contrasts = {
        "cost_added_to_gain": ("query_gain_query_cost", "query_gain_fixed_cost"),
        "gain_added_to_cost": ("query_gain_query_cost", "fixed_gain_query_cost"),
    }
    for pk in utility_meta:
        col = lambda cell: f"U/{pk}/factorial:{cell}"  # noqa: E731
        best = f"U/{pk}/best_constant"
        entry: dict[str, Any] = {"over_best_constant": {}, "contrasts": {}}
        for cell, _, _ in FACTORIAL_CELLS:
            diff = point[col(cell)] - point[best]
            entry["over_best_constant"][cell] = {
                "utility": _num(point[col(cell)]), "difference": _num(diff),
                "interval": interval(boot[col(cell)] - boot[best]) if boot else None,
            }  # fmt: skip
        for cname, (a, b) in contrasts.items():
            entry["contrasts"][cname] = {
                "difference": _num(point[col(a)] - point[col(b)]),
                "interval": interval(boot[col(a)] - boot[col(b)]) if boot else None,
            }
        qq, qf, fq, ff = (col(c) for c in ("query_gain_query_cost", "query_gain_fixed_cost",
                                            "fixed_gain_query_cost", "fixed_gain_fixed_cost"))  # fmt: skip
        inter = lambda src: src[qq] - src[qf] - src[fq] + src[ff]  # noqa: E731
        entry["contrasts"]["interaction"] = {"difference": _num(inter(point)),
                                             "interval": interval(inter(boot)) if boot else None}  # fmt: skip
        out["by_price"][pk] = entry
    return out


def state_summary(states: StateTable, dev: np.ndarray) -> dict[str, Any]:
    """How many records and states were read, scored, split and left out."""
    c = states.counts
    test = ~dev if dev.any() else np.ones(len(states), dtype=bool)
    strata, sizes = np.unique(states.stratum[test].astype(str), return_counts=True)
    return {
        "records": c.records,
        "incomplete_records": c.incomplete,
        "other_action_records": c.other_action,
        "judged_records": c.judged_records,
        "judge_calls": c.judge_calls,
        "forked_states": c.groups,
        "scored": len(states),
        "dev": int(dev.sum()),
        "test": int(test.sum()),
        "excluded": {"missing_action": c.missing_role, "fewer_than_2_repeats": c.few_repeats},
        "components": {
            "dev": len(set(states.component[dev].tolist())),
            "test": len(set(states.component[test].tolist())),
        },
        "test_strata": {str(s): int(n) for s, n in zip(strata, sizes)},
        "mean_repeats": {"think": float(states.think.m.mean()), "search": float(states.search.m.mean())},
    }


def compare_objectives(states: StateTable, dev: np.ndarray, forks_path: Path, config: ValueConfig) -> dict[str, Any]:
    """The scoring-objective comparison (`objectives.objective_comparison`): the main `correct`
    reward (reference equivalence under `config.judge`) beside normalised containment and
    exact match, on the same executions and test states. Only for the `correct` reward."""
    if config.reward != "correct":
        return {"skipped": f'compares answer-correctness objectives; the reward here is "{config.reward}"'}
    forked = [r for r in _read(forks_path) if r.parent is not None]
    roles = Roles(tuple(config.pending_roles))
    tables: dict[str, StateTable] = {"correct": states}
    for name in LEXICAL_OBJECTIVES:
        tables[name] = align(states, build_states(forked, reward_name=name, judge=config.judge, roles=roles))
    test = ~dev if dev.any() else np.ones(len(states), dtype=bool)
    out = objective_comparison(tables, test, reference="correct", resamples=config.resamples, seed=config.seed,
                               level=config.level)  # fmt: skip
    out["reference_judge"] = config.judge
    return out


def audit_bounds(
    states: StateTable, dev: np.ndarray, forecasts: Mapping[str, Forecast], forks_path: Path, config: ValueConfig
) -> dict[str, Any]:
    """Shared-label audit bounds (`audit.shared_label_bounds`): the labels of two judges
    (`config.audit_judges`) fix the answers they agree on and leave the others in [0, 1]; for
    every forecaster, the gain-risk contrast against the mean-gain comparator
    (`historical_mean`) and against zero gain, and the Brier contrast against
    `historical_mean`, under the original labels and at both bounds, with an interval from
    the lower bound's lower end to the upper bound's upper end."""
    from branchpoint.evaluation.value.audit import (
        bound_summary, brier_contrast, gain_contrast, label_intervals, shared_label_bounds,
    )  # fmt: skip

    forked = [r for r in _read(forks_path) if r.parent is not None]
    roles = Roles(tuple(config.pending_roles))
    panels = [align(states, build_states(forked, reward_name="correct", judge=j, roles=roles))
              for j in config.audit_judges or ()]  # fmt: skip
    low, high = label_intervals(*((p.think.y, p.search.y) for p in panels))
    test = ~dev if dev.any() else np.ones(len(states), dtype=bool)
    tt = states.subset(test)
    idx = np.flatnonzero(test)
    low_t = tuple([side[i] for i in idx] for side in low)
    high_t = tuple([side[i] for i in idx] for side in high)
    single = single_component_strata(tt.component, tt.stratum)

    def summarise(contrast: Any) -> dict[str, Any]:
        b = shared_label_bounds(tt, contrast, low_t, high_t)
        samples = None
        if config.resamples > 0 and not single:
            boot = bootstrap_means(np.stack([b.lower, b.upper], axis=1), tt.component, tt.stratum,
                                   resamples=config.resamples, seed=config.seed)  # fmt: skip
            samples = {"lower": boot[:, 0], "upper": boot[:, 1]}

        def iv(x: np.ndarray) -> list[Any]:
            lo, hi = percentile_interval(x, config.level)
            return _interval(lo, hi)

        return bound_summary(b, tt.stratum, samples, iv)

    out: dict[str, Any] = {"judges": list(config.audit_judges or ()), "gain_vs_mean_gain": {}, "gain_vs_zero": {},
                           "brier_vs_mean": {}}  # fmt: skip
    ref = forecasts.get("historical_mean")
    for name, fc in forecasts.items():
        q_t, q_s = fc.q_think[test], fc.q_search[test]
        f = q_s - q_t
        out["gain_vs_zero"][name] = summarise(gain_contrast(f, np.zeros_like(f)))
        if ref is not None and name != "historical_mean":
            rt, rs = ref.q_think[test], ref.q_search[test]
            out["gain_vs_mean_gain"][name] = summarise(gain_contrast(f, rs - rt))
            out["brier_vs_mean"][name] = summarise(brier_contrast(q_t, q_s, rt, rs))
    if single:
        out["intervals_withheld"] = f"single-component strata: {', '.join(single)}"
    return out


TextEncoder = Callable[[list[str]], np.ndarray]


def three_action_study(states: StateTable, dev: np.ndarray, forks_path: Path, config: ValueConfig) -> dict[str, Any] | None:
    """STOP / SAME / SWITCH at pending queries (`three_action`): outcome error and two-action
    gain loss of the dev references, and constant / best-constant / sample-informed utility per
    price, with intervals; None when no pending_query state has all three actions. Dev rows
    are the main split's (by state key)."""
    from branchpoint.evaluation.value.three_action import three_action_columns, three_action_table

    forked = [r for r in _read(forks_path) if r.parent is not None]
    if not any(r.branch == "SWITCH" and r.parent.boundary == "pending_query" for r in forked):
        return None
    same = build_states(forked, reward_name=config.reward, judge=config.judge, roles=Roles(("STOP", "SEARCH")))
    switch = build_states(forked, reward_name=config.reward, judge=config.judge, roles=Roles(("STOP", "SWITCH")))
    table = three_action_table(same, switch)
    if table is None:
        return None
    dev_keys = {k for k, d in zip(states.keys, dev) if d}
    t_dev = np.array([k in dev_keys for k in table.states.keys], dtype=bool)
    t_test = ~t_dev if t_dev.any() else np.ones(len(t_dev), dtype=bool)
    names, matrix, chosen = three_action_columns(table, t_dev, t_test, config.prices)
    strata = chosen.pop("strata")
    comps = table.states.component[t_test]
    point = dict(zip(names, balanced_mean(matrix, strata)))
    single = single_component_strata(comps, strata)
    samples: dict[str, np.ndarray] = {}
    if config.resamples > 0 and not single:
        boot = bootstrap_means(matrix, comps, strata, resamples=config.resamples, seed=config.seed)
        samples = {n: boot[:, j] for j, n in enumerate(names)}

    def entry(name: str) -> dict[str, Any]:
        iv = None
        if samples:
            lo, hi = percentile_interval(samples[name], config.level)
            iv = _interval(lo, hi)
        return {"value": _num(point[name]), "interval": iv}

    forecasts = sorted({n.split("/", 1)[1] for n in names if n.startswith("outcome/")})
    return {
        "states": {"dev": int(t_dev.sum()), "test": int(t_test.sum())},
        "forecasts": {f: {"outcome_error": entry(f"outcome/{f}"), "gain_loss": entry(f"gain/{f}")} for f in forecasts},
        "utility": {pk: {n.split("/", 2)[2]: entry(n) for n in names if n.startswith(f"U/{pk}/")}
                    for pk in (price_key(p) for p in config.prices)},  # fmt: skip
        "best_constant": {k: v for k, v in chosen.items() if k != "chosen_on"},
        "chosen_on": chosen["chosen_on"],
        "intervals_withheld": f"single-component strata: {', '.join(single)}" if single else None,
    }


def attach_features(
    states: StateTable, parents: Mapping[str, ExecutionRecord], config: ValueConfig,
    text_encoder: TextEncoder | None = None,
) -> None:
    """Attach the public per-state features the fitted forecasters read: "public_prefix" always
    (`features.prefix_features`), "minilm" (frozen embeddings of `features.state_texts`) when
    `config.text_head`. The encoder is passed in (`text_encoder`: texts → (n, d) array; the CLI
    passes the packaged MiniLM ONNX encoder's `encode`), since the evaluation never imports the
    retrieval package."""
    from branchpoint.evaluation.value.features import prefix_features, state_texts

    states.features["public_prefix"] = prefix_features(states, parents)
    if config.text_head:
        if text_encoder is None:
            raise InputError("text_head needs a text encoder (`branchpoint value --text-head` passes the packaged MiniLM)")
        states.features["minilm"] = np.asarray(text_encoder(state_texts(states, parents)), dtype=float)


def value_study(
    path: str | Path,
    *,
    config: ValueConfig = ValueConfig(),
    forecast_files: Sequence[Path] = (),
    extra_forecasts: Mapping[str, Forecast] | None = None,
    llm_client: ModelClient | None = None,
    llm_actor: str | None = None,
    llm_style: str = "chat",
    text_encoder: TextEncoder | None = None,
    out_dir: Path | None = None,
    write: bool = True,
    progress: bool = False,
) -> dict[str, Any]:
    """Score every forecaster and router on a fork study; write value.json; return its content.

    `path` is a run directory (its forks.jsonl) or a forks .jsonl file. `extra_forecasts` adds
    forecasts computed elsewhere (arrays over the scored states, in `load_states` row order);
    `llm_client` adds the LLM forecaster (`llm.llm_forecasts`, endpoint style `llm_style`) under
    the name "llm". `text_encoder` (texts → embeddings) is needed with `config.text_head`.
    """
    states, parents, forks_path = load_states(Path(path), config)
    attach_features(states, parents, config, text_encoder)
    dev = dev_split(states, config.dev_split, config.seed)
    extra = dict(extra_forecasts or {})
    if llm_client is not None:
        from branchpoint.evaluation.value.llm import llm_forecasts

        actor = llm_actor or getattr(llm_client, "name", None) or "a search-augmented LLM agent"
        extra["llm"] = llm_forecasts(llm_client, states, parents, actor=actor, style=llm_style, progress=progress)
    fcs, meta, skipped = collect_forecasts(states, dev, files=forecast_files, extra=extra, seed=config.seed)
    scores = score(states, dev, fcs, config)
    scores["scoring_objectives"] = compare_objectives(states, dev, forks_path, config)
    if config.audit_judges:
        scores["audit_bounds"] = audit_bounds(states, dev, fcs, forks_path, config)
    three = three_action_study(states, dev, forks_path, config)
    if three is not None:
        scores["three_action"] = three
    if config.learning_curves:
        from branchpoint.evaluation.value.curves import curve_families, learning_curves

        raw = {name: fcs[name] for name, m in meta.items() if m["kind"] in ("file", "given")}
        scores["learning_curves"] = learning_curves(
            states, curve_families(states, raw), budgets=config.curve_budgets, samples=config.curve_samples,
            seed=config.seed, resamples=config.resamples, level=config.level,
        )  # fmt: skip
    report: dict[str, Any] = {
        "schema_version": VALUE_SCHEMA_VERSION,
        "source": str(forks_path),
        "settings": {**config.model_dump(mode="json"), "roles": {
            "initial": ["THINK", "SEARCH"], "after_search_k": ["THINK", "SEARCH"],
            "pending_query": list(config.pending_roles)}},
        "states": state_summary(states, dev),
        "forecasters": meta,
        "skipped_forecasters": skipped,
        **scores,
    }  # fmt: skip
    if write:
        from branchpoint.traces import write_files_atomically

        out = Path(out_dir) if out_dir is not None else forks_path.parent
        write_files_atomically({out / VALUE_FILE: value_file_text(report)})
    return report
