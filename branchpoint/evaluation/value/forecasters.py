"""Forecasters of (q_T, q_S) per state, found by name; calibration maps fitted on dev rows only.

A forecaster is one function registered with `@forecaster("name")`:

    @forecaster("more_evidence_less_search", fitted=False)
    def my_rule(states: DevView, dev: np.ndarray) -> Forecast:
        q_t = np.where(states.boundary_kind == "initial", 0.2, 0.6)
        return Forecast(q_t, np.full(len(states), 0.7))

It gets the development view of the state table (`dev_view.DevView`: every row's public columns
and features, and the outcomes of the dev rows only, `states.dev_states`; the test rows'
outcomes are not in it) and the boolean mask of development rows, and returns q_T and q_S for
every row (`fitted=True` says it needs dev rows; it is skipped when there are none). Registered
with `settings=Model` (a pydantic model), it is called with its validated settings as a third
argument (`fn(states, dev, settings)`), set from the spec's `value.forecasters.NAME` or
`branchpoint value --forecaster-arg NAME.KEY=VALUE`. `branchpoint value` scores every registered
forecaster on the test rows (import your module with `--forecaster-module`), beside the
`--forecasts` files, with paired differences between all.

Shipped baselines: `historical_mean` (each action's mean outcome over dev rows, the same for
every state), `stratum_prior` (the same per stratum, falling back to the historical mean for a
stratum without dev rows) and `boundary_prior` (per boundary kind: initial, after_search_k,
pending_query). Where a stratum names a task (e.g. the question set), the stratum prior is the
task prior.

Calibration maps (`@calibrator("name")`) re-map a raw forecaster's (q_T, q_S), fitted on dev
rows only (they get the same development view) and applied to every row. Targets are each dev state's mean outcomes (Ȳ_T, Ȳ_S);
outputs are clipped to [0, 1].
- `ridge`: shared-input affine ridge: q'_a = α_a + β_a · z with z = (q_T, q_S) standardised on
  the training rows, for both actions a; the intercept is not penalised; the penalty is chosen
  from {0.01, 0.1, 1, 10, 100} by grouped K-fold over support components (K = min(5, dev
  components); held-out squared error against Ȳ; ties go to the larger penalty).
- `affine`: independent affine: q'_a = α_a + β_a q_a by least squares.
- `logistic`: q'_a = σ(α_a + β_a · logit q_a), maximum likelihood on all dev repeats (rewards in
  [0, 1] as fractional targets), with a 1e-3 ridge for stability.
- `isotonic`: q'_a = a non-decreasing map of q_a by pool-adjacent-violators, weighted by
  repeats; linear between fitted blocks, constant beyond them.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic import BaseModel

from branchpoint.errors import InputError, check_nesting
from branchpoint.evaluation.value.dev_view import DevView, OutcomesNotInView
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.scores import balanced_mean
from branchpoint.registry import REGISTRY, validate_settings
from branchpoint.registry_kinds import Kind
from branchpoint.traces import TraceError, iter_json_lines

RIDGE_PENALTIES: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
FORECAST_FIELDS: tuple[str, ...] = ("parent_execution_id", "checkpoint_id", "q_think", "q_search")
NEUTRAL = 0.5  # the forecast given for a malformed reply or a state a forecasts file lacks


class ForecasterUnavailable(Exception):
    """A forecaster or calibration map cannot run on this study (e.g. it needs text features that
    were not computed); the study lists it under `skipped_forecasters` with the message."""


@dataclass
class Forecast:
    """q_T and q_S for every state row, and what producing them counted (malformed replies, ...)."""

    q_think: np.ndarray
    q_search: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.q_think = np.asarray(self.q_think, dtype=float)
        self.q_search = np.asarray(self.q_search, dtype=float)

    def check(self, name: str, n: int) -> None:
        """InputError unless both arrays have one finite probability per state."""
        for label, q in (("q_think", self.q_think), ("q_search", self.q_search)):
            if q.shape != (n,):
                raise InputError(f'forecaster "{name}": {label} has shape {q.shape}, expected ({n},)')
            if not np.all(np.isfinite(q)) or np.any((q < 0) | (q > 1)):
                raise InputError(f'forecaster "{name}": {label} must be probabilities in [0, 1]')


ForecasterFn = Callable[..., "Forecast | tuple[np.ndarray, np.ndarray]"]  # fn(states: DevView, dev[, settings])
CalibratorFn = Callable[..., Forecast]  # fn(raw: Forecast, states: DevView, dev, seed: int = 0) -> Forecast
#: The typed handles of the registry kinds: `REGISTRY.get(FORECASTER, name).obj` is a `ForecasterFn`.
FORECASTER: Kind[ForecasterFn] = Kind("forecaster")
CALIBRATOR: Kind[CalibratorFn] = Kind("calibrator")


@dataclass(frozen=True)
class Registered:
    """A registered forecaster: its function, whether it needs dev rows, whether to calibrate it,
    and the pydantic model of its settings (None: it takes none)."""

    name: str
    fn: ForecasterFn
    fitted: bool = False
    calibrate: bool = False
    settings: type[BaseModel] | None = None


def forecaster(
    name: str, *, fitted: bool = False, calibrate: bool = False, settings: type[BaseModel] | None = None
) -> Callable[[ForecasterFn], ForecasterFn]:
    """Register a forecaster `fn(states, dev) -> Forecast | (q_T, q_S)` under `name`.

    `fitted`: it learns from dev rows (skipped when there are none). `calibrate`: also score
    it after each calibration map (for raw scores, e.g. a model's stated probabilities).
    `settings`: the pydantic model of its settings; it is then called `fn(states, dev, settings)`
    with them validated (the spec's `value.forecasters.NAME`, `--forecaster-arg NAME.KEY=VALUE`).
    """

    return REGISTRY.register("forecaster", name, fitted=fitted, calibrate=calibrate, settings=settings)


def registered_forecasters() -> list[Registered]:
    """Every registered forecaster (kind `forecaster` of `branchpoint.registry`, plug-ins
    included), by name; each counts as used (`value` scores them all: provenance lists them). One
    added with `registry.add` and no metadata is neither fitted nor calibrated."""
    return [
        Registered(
            e.name, e.obj, bool(e.meta.get("fitted", False)), bool(e.meta.get("calibrate", False)), e.settings_model
        )
        for e in (REGISTRY.note_used(entry) for entry in REGISTRY.entries(FORECASTER))
    ]


def check_component_settings(kind: str, settings: Mapping[str, Mapping[str, Any]]) -> dict[str, BaseModel | None]:
    """Each named component's settings validated (`registry.check_settings`): an unknown name
    lists the known ones, an unknown or bad setting names its key and what it expects."""
    return {name: REGISTRY.check_settings(kind, name, given) for name, given in settings.items()}


def run_forecaster(
    entry: Registered, states: DevView, dev: np.ndarray, settings: Mapping[str, Any] | None = None
) -> Forecast:
    """Call a forecaster on the development view (with its validated settings when it declares
    a settings model) and check what it returned; one that reaches for every row's outcomes is
    an InputError naming it."""
    parsed = validate_settings(entry.settings, settings, f'forecaster "{entry.name}"')
    try:
        out = entry.fn(states, dev) if parsed is None else entry.fn(states, dev, parsed)
    except OutcomesNotInView as exc:
        raise InputError(f'forecaster "{entry.name}": {exc}') from None
    fc = out if isinstance(out, Forecast) else Forecast(*out)
    fc.check(entry.name, len(states))
    return fc


def calibrator(name: str, *, settings: type[BaseModel] | None = None) -> Callable[[CalibratorFn], CalibratorFn]:
    """Register a calibration map `fn(raw forecast, states, dev, seed=0) -> Forecast` under
    `name`; with `settings` (a pydantic model) it is also passed `settings=` (validated; from
    the spec's `value.calibrators.NAME` or `--calibrator-arg NAME.KEY=VALUE`)."""
    return REGISTRY.register("calibrator", name, settings=settings)


def calibrators() -> dict[str, CalibratorFn]:
    """Registered calibration maps by name, in registration order (each counts as used)."""
    return {e.name: REGISTRY.note_used(e).obj for e in REGISTRY.entries(CALIBRATOR, registration_order=True)}


def run_calibrator(
    name: str, raw: Forecast, states: DevView, seed: int, settings: Mapping[str, Any] | None = None
) -> Forecast:
    """Apply the calibration map `name` to a raw forecast on the development view (with its
    validated settings when it declares them); one that reaches for test outcomes is an
    InputError naming it."""
    entry = REGISTRY.get(CALIBRATOR, name)
    parsed = validate_settings(entry.settings_model, settings, f'calibration map "{name}"')
    try:
        if parsed is None:
            out: Forecast = entry.obj(raw, states, states.dev, seed=seed)
        else:
            out = entry.obj(raw, states, states.dev, seed=seed, settings=parsed)
    except OutcomesNotInView as exc:
        raise InputError(f'calibration map "{name}": {exc}') from None
    return out


# --------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------


def dev_means(states: DevView, rows: np.ndarray) -> tuple[float, float]:
    """Stratum-balanced mean of Ȳ_T and Ȳ_S over `rows` (a mask over every row; dev rows only)."""
    d = states.dev_states
    pick = np.asarray(rows, dtype=bool)[states.dev_rows]
    means = np.stack([d.think.mean_y[pick], d.search.mean_y[pick]], axis=1)
    t, s = balanced_mean(means, d.stratum[pick])
    return float(t), float(s)


@forecaster("historical_mean", fitted=True)
def historical_mean(states: DevView, dev: np.ndarray) -> Forecast:
    """q_T, q_S = each action's mean outcome over the dev rows (stratum-balanced), for every state."""
    t, s = dev_means(states, dev)
    return Forecast(np.full(len(states), t), np.full(len(states), s))


def _prior_by(labels: np.ndarray, states: DevView, dev: np.ndarray) -> Forecast:
    t0, s0 = dev_means(states, dev)
    q_t, q_s = np.full(len(states), t0), np.full(len(states), s0)
    fallback = 0
    for label in set(labels.tolist()):
        rows = labels == label
        if np.any(rows & dev):
            q_t[rows], q_s[rows] = dev_means(states, rows & dev)
        else:
            fallback += int(rows.sum())
    return Forecast(q_t, q_s, {"rows_on_global_fallback": fallback})


@forecaster("stratum_prior", fitted=True)
def stratum_prior(states: DevView, dev: np.ndarray) -> Forecast:
    """Each action's mean outcome over the dev rows of the state's stratum (global mean if none)."""
    return _prior_by(states.stratum, states, dev)


@forecaster("boundary_prior", fitted=True)
def boundary_prior(states: DevView, dev: np.ndarray) -> Forecast:
    """Each action's mean outcome over the dev rows of the state's boundary kind (global if none)."""
    return _prior_by(states.boundary_kind, states, dev)


# --------------------------------------------------------------------------------------------
# Forecast files
# --------------------------------------------------------------------------------------------


def read_state_probabilities(
    path: Path,
    index: Mapping[tuple[str, str], int],
    n_rows: int,
    unscored: Container[tuple[str, str]],
    fields: Sequence[str],
) -> tuple[np.ndarray, dict[str, Any]]:
    """One probability per `fields[2:]` column for each of `n_rows` state rows (`index`: key →
    row), from a JSONL file
    keyed by `fields[0]`, `fields[1]` (parent execution and checkpoint ids): the one reader of
    forecasts files (two-action and three-action).

    A line missing a field, or with a value that is not a probability, is an InputError naming
    file, line and field. Lines for keys in `unscored` (states that exist but are not scored)
    are counted as `n_unscored_state`, other unknown keys as `n_unknown` (with examples), repeated
    lines as `n_duplicate` (the last wins). Rows the file lacks get `NEUTRAL` in every column and
    are counted (`n_missing`), so every forecast is scored on the same states.
    """
    probs = tuple(fields[2:])
    q = np.full((n_rows, len(probs)), np.nan)
    info: dict[str, Any] = {
        "file": str(path),
        "n_lines": 0,
        "n_unknown": 0,
        "unknown_examples": [],
        "n_unscored_state": 0,
        "n_duplicate": 0,
    }
    try:
        lines = list(iter_json_lines(path))
    except TraceError as exc:
        raise InputError(str(exc)) from None
    expected = ", ".join(f'"{f}"' for f in fields)
    if not lines:
        raise InputError(f"{path}: no forecasts (the file is empty; expected one {{{expected}}} object per line)")
    for lineno, obj in lines:
        check_nesting(obj, f"{path} line {lineno}")
        info["n_lines"] += 1
        for name in fields:
            if name not in obj:
                raise InputError(f'{path} line {lineno}: field "{name}" missing (expected {{{expected}}})')
        values = []
        for name in probs:
            v = obj[name]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
                raise InputError(f'{path} line {lineno}: field "{name}" must be a number in [0, 1], got {v!r}')
            values.append(float(v))
        key = (str(obj[fields[0]]), str(obj[fields[1]]))
        row = index.get(key)
        if row is None:
            if key in unscored:
                info["n_unscored_state"] += 1
            else:
                info["n_unknown"] += 1
                if len(info["unknown_examples"]) < 5:
                    info["unknown_examples"].append(f"line {lineno}: {key[0]} / {key[1]}")
            continue
        if not np.isnan(q[row, 0]):
            info["n_duplicate"] += 1
        q[row] = values
    missing = np.isnan(q[:, 0])
    info["n_missing"] = int(missing.sum())
    q[missing] = NEUTRAL
    return q, info


def read_forecasts(path: Path, states: StateTable) -> Forecast:
    """Forecasts from a JSONL file of {"parent_execution_id", "checkpoint_id", "q_think", "q_search"}
    (`read_state_probabilities`: bad lines are errors naming file, line and field; unknown,
    unscored, repeated and missing states are counted; missing states get (0.5, 0.5))."""
    q, info = read_state_probabilities(path, states.index(), len(states), states.excluded_keys, FORECAST_FIELDS)
    return Forecast(q[:, 0], q[:, 1], info)


# --------------------------------------------------------------------------------------------
# Calibration maps
# --------------------------------------------------------------------------------------------


def standardise(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`x` with each column standardised by its mean and SD over `rows` (an SD of 0 leaves it centred only)."""
    mu = x[rows].mean(axis=0)
    sd = x[rows].std(axis=0)
    return cast(np.ndarray, (x - mu) / np.where(sd > 0, sd, 1.0))


def ridge_fit_predict(x: np.ndarray, y: np.ndarray, train: np.ndarray, penalty: float) -> np.ndarray:
    """Affine ridge from standardised inputs: ŷ = ȳ + z β, β = (ZᵀZ + λI)⁻¹ Zᵀ(y − ȳ), z and ȳ
    from the training rows (unpenalised intercept); predictions for every row, clipped to [0, 1]."""
    z = standardise(x, train)
    zt, yt = z[train], y[train]
    y0 = yt.mean(axis=0)
    beta = np.linalg.solve(zt.T @ zt + penalty * np.eye(z.shape[1]), zt.T @ (yt - y0))
    return cast(np.ndarray, np.clip(y0 + z @ beta, 0.0, 1.0))


def grouped_folds(groups: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Fold number per row: groups (support components) shuffled with the seed, dealt round-robin."""
    uniq = sorted(set(groups.tolist()))
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of = {uniq[i]: pos % k for pos, i in enumerate(order)}
    return np.array([fold_of[g] for g in groups])


@calibrator("ridge")
def ridge_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """Shared-input affine ridge on standardised (q_T, q_S), penalty by grouped K-fold on dev rows."""
    x = np.stack([raw.q_think, raw.q_search], axis=1)
    y = states.targets()
    dev_idx = np.flatnonzero(dev)
    k = min(5, len(set(states.component[dev_idx].tolist())))
    cv: dict[str, float] = {}
    if k >= 2:
        folds = grouped_folds(states.component[dev_idx], k, seed)
        for penalty in RIDGE_PENALTIES:
            err = 0.0
            for fold in range(k):
                train = np.zeros(len(states), dtype=bool)
                train[dev_idx[folds != fold]] = True
                held = dev_idx[folds == fold]
                pred = ridge_fit_predict(x, y, train, penalty)
                err += float(np.sum((pred[held] - y[held]) ** 2))
            cv[str(penalty)] = err / (2 * len(dev_idx))
        best = min(reversed(RIDGE_PENALTIES), key=lambda p: cv[str(p)])
    else:
        best = 1.0
    pred = ridge_fit_predict(x, y, dev, best)
    return Forecast(pred[:, 0], pred[:, 1], {"penalty": best, "folds": k if k >= 2 else 0, "cv_error": cv})


@calibrator("affine")
def affine_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """Independent affine maps q'_a = α_a + β_a q_a, least squares on dev rows."""
    out, info = [], {}
    d = states.dev_states
    for name, q, yd in (("think", raw.q_think, d.think.mean_y), ("search", raw.q_search, d.search.mean_y)):
        qd = q[dev]
        var = qd.var()
        beta = float(((qd - qd.mean()) * (yd - yd.mean())).mean() / var) if var > 0 else 0.0
        alpha = float(yd.mean() - beta * qd.mean())
        out.append(np.clip(alpha + beta * q, 0.0, 1.0))
        info[name] = {"alpha": alpha, "beta": beta}
    return Forecast(out[0], out[1], info)


def logit(q: np.ndarray) -> np.ndarray:
    """log(q / (1 − q)), q clipped to [1e-4, 1 − 1e-4] first (probabilities of 0 and 1 stay finite)."""
    q = np.clip(q, 1e-4, 1 - 1e-4)
    return cast(np.ndarray, np.log(q / (1 - q)))


def logistic_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float = 1e-3, iters: int = 100) -> np.ndarray:
    """(α, β) maximising Σ w[y log σ(α + βx) + (1 − y) log(1 − σ)] − ridge/2 ‖(α, β)‖² (Newton)."""
    design = np.stack([np.ones_like(x), x], axis=1)
    coef = np.zeros(2)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(design @ coef)))
        grad = design.T @ (w * (y - p)) - ridge * coef
        hess = (design * (w * p * (1 - p))[:, None]).T @ design + ridge * np.eye(2)
        step = np.linalg.solve(hess, grad)
        coef += step
        if np.max(np.abs(step)) < 1e-10:
            break
    return coef


@calibrator("logistic")
def logistic_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """q'_a = σ(α_a + β_a z_a), z_a = logit q_a standardised on dev rows; weights = repeats."""
    out, info = [], {}
    d = states.dev_states
    for name, q, role in (("think", raw.q_think, d.think), ("search", raw.q_search, d.search)):
        z = standardise(logit(q)[:, None], dev)[:, 0]
        alpha, beta = logistic_fit(z[dev], role.mean_y, role.m)
        out.append(1.0 / (1.0 + np.exp(-(alpha + beta * z))))
        info[name] = {"alpha": float(alpha), "beta": float(beta)}
    return Forecast(out[0], out[1], info)


def isotonic_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pool-adjacent-violators: knots (x, ŷ) of the weighted least-squares non-decreasing fit.

    Equal x are pooled first; each final block contributes its lowest and highest x at its
    level, so `np.interp` over the knots is constant within blocks and linear between them.
    """
    order = np.argsort(x, kind="stable")
    xs, ys, ws = x[order], y[order], w[order]
    ux, start = np.unique(xs, return_index=True)
    wsum = np.add.reduceat(ws, start)
    ysum = np.add.reduceat(ws * ys, start)
    blocks: list[list[float]] = []  # [weighted sum, weight, x_lo, x_hi]
    for xv, sw, sy in zip(ux, wsum, ysum):
        blocks.append([sy, sw, xv, xv])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            sy2, sw2, _, hi = blocks.pop()
            blocks[-1][0] += sy2
            blocks[-1][1] += sw2
            blocks[-1][3] = hi
    knots_x, knots_y = [], []
    for sy, sw, lo, hi in blocks:
        knots_x += [lo, hi] if hi > lo else [lo]
        knots_y += [sy / sw] * (2 if hi > lo else 1)
    return np.array(knots_x), np.array(knots_y)


@calibrator("isotonic")
def isotonic_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """q'_a = isotonic (non-decreasing) map of q_a fitted by PAV on dev rows, weights = repeats."""
    out, info = [], {}
    d = states.dev_states
    for name, q, role in (("think", raw.q_think, d.think), ("search", raw.q_search, d.search)):
        kx, ky = isotonic_fit(q[dev], role.mean_y, role.m)
        out.append(np.clip(np.interp(q, kx, ky), 0.0, 1.0))
        info[name] = {"knots": len(kx)}
    return Forecast(out[0], out[1], info)
