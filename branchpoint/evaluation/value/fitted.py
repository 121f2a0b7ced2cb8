"""Fitted forecasters and calibration maps of the search-value study (Appendix B and D).

Every fit uses dev rows only and predicts every row; targets are each dev state's mean outcomes
(Ȳ_T, Ȳ_S), or their difference for gain models. Penalties are chosen by grouped K-fold over
support components (`ridge_cv`). Registered here (imported by `study`):

Forecasters (`@forecaster`, fitted on dev rows; settings `RidgeSettings`: the penalty grid and
the number of grouped folds, e.g. `--forecaster-arg metadata_ridge.folds=3`):
- `public_prefix_ridge`: ridge on the public-prefix features (`features.PREFIX_FEATURES`), and
  the decision log-probability features where the parents' decide steps recorded them
  (`decision_logprobs.DECISION_FEATURES`; also in the `public_prefix` and `residual` maps).
- `metadata_ridge`: ridge on evaluator-side metadata (one-hot stratum and boundary kind).
- `minilm_ridge`: ridge head on frozen MiniLM embeddings of the question and public history
  (needs the study's text features: `branchpoint value --text-head`).

Calibration maps (`@calibrator`, applied to every raw forecast: files, the LLM forecaster):
- `public_prefix`: ridge on both raw probabilities *and* the public-prefix features.
- `beta`: beta calibration (Kull et al. 2017) per action.
- `direct_gain`: a ridge regression of the observed gain Δ̄ on both raw probabilities, beside a
  ridge of the success level; q = level ∓ gain/2.
- `residual`: the shared-input ridge map plus a ridge fit of its dev residuals on the
  public-prefix features.
- `stop_offset`, `stop_feedback`: target STOP feedback (Appendix D): an offset from the T-role
  outcomes alone, and the same with signed-opportunity scaling of the gain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

from branchpoint.evaluation.value.decision_logprobs import prefix_inputs
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.features import metadata_features
from branchpoint.evaluation.value.forecasters import (
    RIDGE_PENALTIES,
    Forecast,
    ForecasterUnavailable,
    calibrator,
    forecaster,
    ridge_calibration,
)
from branchpoint.evaluation.value.scores import balanced_weights

DEV_FOLDS = 4  # "Four development folds select regularization from {0.01, 0.1, 1, 10, 100}"
SHRINKAGE_GRID: tuple[float, ...] = (0.0, 0.01, 0.1, 0.5, 0.9, 1.0)  # Appendix D, STOP offset shrinkage
OPPORTUNITY_FLOOR = 0.05  # Appendix D: max(1 − p̂_T, 0.05), max(p̂_T, 0.05)


# --------------------------------------------------------------------------------------------
# Grouped-fold ridge
# --------------------------------------------------------------------------------------------


def _standardiser(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu = x[rows].mean(axis=0)
    sd = x[rows].std(axis=0)
    return mu, np.where(sd > 0, sd, 1.0)


def ridge_fit(
    x: np.ndarray, y: np.ndarray, train: np.ndarray, penalty: float, weights: np.ndarray | None = None
) -> np.ndarray:
    """sklearn `Ridge(alpha=penalty)` on inputs standardised with the training rows' mean and
    s.d. (the intercept is not penalised), fitted on `train` rows with optional sample weights;
    returns predictions for every row (unclipped)."""
    from sklearn.linear_model import Ridge  # imported here: sklearn costs ~0.8 s to import

    mu, sd = _standardiser(x, train)
    z = (x - mu) / sd
    model = Ridge(alpha=penalty)
    model.fit(z[train], y[train], sample_weight=None if weights is None else weights[train])
    return np.asarray(model.predict(z)).reshape((len(z), *y.shape[1:]))  # sklearn squeezes a (n, 1) target


def ridge_cv(
    x: np.ndarray,
    y: np.ndarray,
    train: np.ndarray,
    groups: np.ndarray,
    *,
    penalties: Sequence[float] = RIDGE_PENALTIES,
    folds: int = DEV_FOLDS,
    weights: np.ndarray | None = None,
    mean_guard: bool = False,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Ridge with its penalty chosen by grouped K-fold on the training rows; predictions for every row.

    K = min(`folds`, distinct groups among the training rows), groups = support components
    (sklearn `GroupKFold`); held-out error = (weighted) squared error summed over the target
    columns. `mean_guard` adds the constant (training mean) as a candidate, chosen when its
    held-out error is lowest (search-value study, Appendix B: "A mean guard includes the
    constant action means as a candidate during development selection"). Ties go to the mean,
    then to the larger penalty. With fewer than 2 groups the penalty is 1.0.
    """
    from sklearn.model_selection import GroupKFold

    y2 = y.reshape(len(y), -1)
    w = np.ones(len(y2)) if weights is None else np.asarray(weights, dtype=float)
    idx = np.flatnonzero(train)
    k = min(folds, len(set(groups[idx].tolist())))
    cv: dict[str, float] = {}
    choice: float | str = 1.0
    if k >= 2:
        candidates: list[float | str] = list(penalties) + (["mean"] if mean_guard else [])
        err = {str(c): 0.0 for c in candidates}
        for fit_idx, held_idx in GroupKFold(n_splits=k).split(idx, groups=groups[idx].astype(str)):
            fit_rows = np.zeros(len(y2), dtype=bool)
            fit_rows[idx[fit_idx]] = True
            held = idx[held_idx]
            for c in candidates:
                if c == "mean":
                    pred = np.average(y2[fit_rows], axis=0, weights=w[fit_rows])[None, :]
                else:
                    pred = ridge_fit(x, y2, fit_rows, float(c), w)[held]
                err[str(c)] += float(np.sum(w[held, None] * (pred - y2[held]) ** 2))
        total = float(w[idx].sum())
        cv = {c: e / total for c, e in err.items()}
        order = (["mean"] if mean_guard else []) + [str(p) for p in sorted(penalties, reverse=True)]
        best = min(order, key=lambda c: cv[c])
        choice = "mean" if best == "mean" else float(best)
    if choice == "mean":
        pred = np.tile(np.average(y2[train], axis=0, weights=w[train]), (len(y2), 1))
    else:
        pred = ridge_fit(x, y2, train, float(choice), w)
    return pred.reshape(y.shape), {"penalty": choice, "folds": k if k >= 2 else 0, "cv_error": cv}


def _need_dev(dev: np.ndarray, what: str) -> None:
    if int(dev.sum()) < 2:
        raise ForecasterUnavailable(f"{what} needs at least 2 dev rows (--dev-split > 0)")


def _feature(states: DevView, name: str, flag: str) -> np.ndarray:
    if name not in states.features:
        raise ForecasterUnavailable(f'needs the "{name}" features of the states ({flag})')
    return states.features[name]


def _prefix(states: DevView) -> np.ndarray:
    """The public-prefix features, with the decision log-probability features where the states
    have them (`decision_logprobs.prefix_inputs`)."""
    return prefix_inputs(states, _feature(states, "public_prefix", "computed by `branchpoint value`"))


class RidgeSettings(BaseModel):
    """Settings of the ridge forecasters: the penalty grid and the grouped folds that choose from
    it (defaults: the search-value study's {0.01, 0.1, 1, 10, 100} and four folds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    penalties: tuple[PositiveFloat, ...] = Field(RIDGE_PENALTIES, min_length=1)
    folds: int = Field(DEV_FOLDS, ge=2, description="Grouped K-fold over support components (fewer when fewer).")


def ridge_forecast(
    x: np.ndarray, states: DevView, dev: np.ndarray, settings: RidgeSettings = RidgeSettings()
) -> Forecast:
    """(q_T, q_S) = clip(ridge of (Ȳ_T, Ȳ_S) on x), penalty from `settings.penalties` by grouped
    K-fold on dev rows (K = `settings.folds`)."""
    pred, info = ridge_cv(
        x, states.targets(), dev, states.component, penalties=settings.penalties, folds=settings.folds
    )
    pred = np.clip(pred, 0.0, 1.0)
    return Forecast(pred[:, 0], pred[:, 1], info)


# --------------------------------------------------------------------------------------------
# Forecasters
# --------------------------------------------------------------------------------------------


@forecaster("public_prefix_ridge", fitted=True, settings=RidgeSettings)
def public_prefix_ridge(states: DevView, dev: np.ndarray, settings: RidgeSettings = RidgeSettings()) -> Forecast:
    """Ridge of (Ȳ_T, Ȳ_S) on the public-prefix features: log question and tool-text lengths,
    lexical evidence gap, query and document novelty (search-value study, Appendix B). With a
    raw forecast, the `public_prefix` map adds both of its probabilities."""
    _need_dev(dev, "public_prefix_ridge")
    return ridge_forecast(_prefix(states), states, dev, settings)


@forecaster("metadata_ridge", fitted=True, settings=RidgeSettings)
def metadata_ridge(states: DevView, dev: np.ndarray, settings: RidgeSettings = RidgeSettings()) -> Forecast:
    """Ridge of (Ȳ_T, Ȳ_S) on evaluator-side metadata, one-hot stratum and boundary kind
    (search-value study, Appendix B: "Metadata ridge uses dataset family, comparison membership
    and hop count"). Uses task labels a deployed agent does not see: an explanatory control."""
    _need_dev(dev, "metadata_ridge")
    return ridge_forecast(metadata_features(states), states, dev, settings)


@forecaster("minilm_ridge", fitted=True, settings=RidgeSettings)
def minilm_ridge(states: DevView, dev: np.ndarray, settings: RidgeSettings = RidgeSettings()) -> Forecast:
    """Ridge head on frozen MiniLM sentence embeddings of the question (and the public history at
    later checkpoints): search-value study, Appendix B, "Text and public-signal models"."""
    _need_dev(dev, "minilm_ridge")
    return ridge_forecast(_feature(states, "minilm", "run `branchpoint value --text-head`"), states, dev, settings)


# --------------------------------------------------------------------------------------------
# Calibration maps
# --------------------------------------------------------------------------------------------


def _raw_inputs(raw: Forecast) -> np.ndarray:
    return np.stack([raw.q_think, raw.q_search], axis=1)


@calibrator("public_prefix")
def public_prefix_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """Public-prefix ridge with the raw forecast: inputs = both raw probabilities + the
    public-prefix features (search-value study, Appendix B: "Public-prefix features include
    both probabilities, …")."""
    _need_dev(dev, "public_prefix")
    x = np.concatenate([_raw_inputs(raw), _prefix(states)], axis=1)
    return ridge_forecast(x, states, dev)


def beta_fit(q: np.ndarray, y: Sequence[np.ndarray], rows: np.ndarray) -> tuple[float, float, float]:
    """Beta calibration parameters (a, b, c) of one action: q' = σ(a ln q − b ln(1 − q) + c),
    a, b ≥ 0 (Kull, Silva Filho and Flach 2017, cited by the search-value study, Appendix B).

    Fitted by sklearn `LogisticRegression` (negligible penalty, C = 1e6) on the features
    (ln q, −ln(1 − q)) over every repeat of the `rows` states (`y[j]`: the rewards of the j-th
    of them, in row order); a reward in [0, 1] enters as a
    positive example of weight Y and a negative one of weight 1 − Y. A negative a or b is
    fixed at 0 and the other refitted, as in the paper.
    """
    from sklearn.linear_model import LogisticRegression

    qc = np.clip(q, 1e-6, 1 - 1e-6)
    feats = np.stack([np.log(qc), -np.log1p(-qc)], axis=1)
    xs, labels, weights = [], [], []
    for j, i in enumerate(np.flatnonzero(rows)):
        for v in y[j]:
            for label, wgt in ((1, float(v)), (0, 1.0 - float(v))):
                if wgt > 0:
                    xs.append(feats[i])
                    labels.append(label)
                    weights.append(wgt)
    x_arr, l_arr, w_arr = np.array(xs), np.array(labels), np.array(weights)
    if len(set(l_arr.tolist())) < 2:  # all right or all wrong: the constant rate
        rate = float(np.average(l_arr, weights=w_arr)) if len(l_arr) else 0.5
        rate = min(max(rate, 1e-6), 1 - 1e-6)
        return 0.0, 0.0, float(np.log(rate / (1 - rate)))
    use = [0, 1]
    for _ in range(3):
        model = LogisticRegression(C=1e6, max_iter=1000)
        model.fit(x_arr[:, use], l_arr, sample_weight=w_arr)
        coef = dict(zip(use, model.coef_[0]))
        negative = [j for j in use if coef[j] < 0]
        if not negative:
            break
        use = [j for j in use if j not in negative]
        if not use:
            rate = float(np.average(l_arr, weights=w_arr))
            return 0.0, 0.0, float(np.log(rate / (1 - rate)))
    a, b = float(coef.get(0, 0.0)), float(coef.get(1, 0.0))
    return a, b, float(model.intercept_[0])


def beta_apply(q: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    """q' = 1 / (1 + exp(−(a ln q − b ln(1 − q) + c)))."""
    qc = np.clip(q, 1e-6, 1 - 1e-6)
    return cast(np.ndarray, 1.0 / (1.0 + np.exp(-(a * np.log(qc) - b * np.log1p(-qc) + c))))


@calibrator("beta")
def beta_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """Beta calibration of each action's own probability (`beta_fit`), fitted on dev repeats."""
    _need_dev(dev, "beta calibration")
    out, info = [], {}
    d = states.dev_states
    for name, q, role in (("think", raw.q_think, d.think), ("search", raw.q_search, d.search)):
        a, b, c = beta_fit(q, role.y, dev)
        out.append(beta_apply(q, a, b, c))
        info[name] = {"a": a, "b": b, "c": c}
    return Forecast(out[0], out[1], info)


def compose_level_gain(level: np.ndarray, gain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(q_T, q_S) = clip(ℓ − f/2, ℓ + f/2) from a success level and a gain."""
    return np.clip(level - 0.5 * gain, 0.0, 1.0), np.clip(level + 0.5 * gain, 0.0, 1.0)


@calibrator("direct_gain")
def direct_gain_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """Direct-gain model (search-value study, Appendix B: "Direct-gain models regress the action
    difference"): f̂ = ridge of Δ̄ = Ȳ_S − Ȳ_T on both raw probabilities, ℓ̂ = ridge of the level
    (Ȳ_T + Ȳ_S)/2 on the same inputs, each penalty by grouped 4-fold (with the mean guard for
    the gain); q_T, q_S = clip(ℓ̂ ∓ f̂/2)."""
    _need_dev(dev, "direct_gain")
    x = _raw_inputs(raw)
    d = states.dev_states
    gain, g_info = ridge_cv(x, states.on_all_rows(d.dbar), dev, states.component, mean_guard=True)
    level_y = states.on_all_rows(0.5 * (d.think.mean_y + d.search.mean_y))
    level, l_info = ridge_cv(x, level_y, dev, states.component)
    q_t, q_s = compose_level_gain(level, gain)
    return Forecast(q_t, q_s, {"gain": g_info, "level": l_info})


@calibrator("residual")
def residual_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """Residual model (search-value study, Appendix B: "residual models adjust a historical
    map"): the shared-input ridge map q̃ (`forecasters.ridge_calibration`) plus a ridge fit of
    its dev residuals (Ȳ_T − q̃_T, Ȳ_S − q̃_S) on the public-prefix features, with the mean guard
    (a constant shift when that predicts held-out residuals best); clipped to [0, 1]."""
    _need_dev(dev, "residual")
    base = ridge_calibration(raw, states, dev, seed=seed)
    x = _prefix(states)
    resid = states.targets() - np.stack([base.q_think, base.q_search], axis=1)
    adj, info = ridge_cv(x, resid, dev, states.component, mean_guard=True)
    return Forecast(
        np.clip(base.q_think + adj[:, 0], 0, 1),
        np.clip(base.q_search + adj[:, 1], 0, 1),
        {"map": base.info, "residual": info},
    )


def stop_offset(q_think: np.ndarray, y_think_mean: np.ndarray, rows: np.ndarray, strata: np.ndarray) -> float:
    """c = mean over `rows` of (observed STOP success − historical STOP prediction) = mean(Ȳ_T − q_T),
    stratum-balanced (search-value study, Appendix D, "Target STOP feedback")."""
    w = balanced_weights(strata[rows])
    return float(np.sum(w * (y_think_mean[rows] - q_think[rows])))


def signed_opportunity(q_think: np.ndarray, q_search: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    """Signed-opportunity scaling (search-value study, Appendix D): p'_T = clip(p̂_T + c); a
    positive gain f = p̂_S − p̂_T is multiplied by (1 − p'_T)/max(1 − p̂_T, 0.05), a negative one by
    p'_T/max(p̂_T, 0.05); p'_S = clip(p'_T + f')."""
    p_t = np.clip(q_think + c, 0.0, 1.0)
    f = q_search - q_think
    up = (1.0 - p_t) / np.maximum(1.0 - q_think, OPPORTUNITY_FLOOR)
    down = p_t / np.maximum(q_think, OPPORTUNITY_FLOOR)
    f_new = np.where(f > 0, f * up, f * down)
    return p_t, np.clip(p_t + f_new, 0.0, 1.0)


def _stop_feedback(raw: Forecast, states: DevView, dev: np.ndarray, scale: bool) -> Forecast:
    """STOP-only feedback: the offset c (`stop_offset`) times a shrinkage s from `SHRINKAGE_GRID`
    chosen by grouped 4-fold on the dev rows' T outcomes (the only labels STOP feedback has);
    then either both probabilities shift by s·c (`stop_offset`) or the gain is rescaled
    (`signed_opportunity`)."""
    from sklearn.model_selection import GroupKFold

    _need_dev(dev, "STOP feedback")
    dev_idx = np.flatnonzero(dev)
    y_think = states.on_all_rows(states.dev_states.think.mean_y)  # NaN on test rows, never read
    groups = states.component[dev_idx].astype(str)
    k = min(DEV_FOLDS, len(set(groups.tolist())))
    cv: dict[str, float] = {}
    if k >= 2:
        for s in SHRINKAGE_GRID:
            err = 0.0
            for fit_idx, held_idx in GroupKFold(n_splits=k).split(dev_idx, groups=groups):
                fit_rows = np.zeros(len(states), dtype=bool)
                fit_rows[dev_idx[fit_idx]] = True
                c = s * stop_offset(raw.q_think, y_think, fit_rows, states.stratum)
                held = dev_idx[held_idx]
                pred = np.clip(raw.q_think[held] + c, 0.0, 1.0)
                err += float(np.sum((pred - y_think[held]) ** 2))
            cv[f"{s:g}"] = err / len(dev_idx)
        shrink = min(reversed(SHRINKAGE_GRID), key=lambda s: cv[f"{s:g}"])
    else:
        shrink = 1.0
    c = shrink * stop_offset(raw.q_think, y_think, dev, states.stratum)
    if scale:
        q_t, q_s = signed_opportunity(raw.q_think, raw.q_search, c)
    else:
        q_t, q_s = np.clip(raw.q_think + c, 0.0, 1.0), np.clip(raw.q_search + c, 0.0, 1.0)
    return Forecast(q_t, q_s, {"offset": c, "shrinkage": shrink, "cv_error": cv})


@calibrator("stop_offset")
def stop_offset_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """STOP feedback, offset only: both probabilities shift by the shrunk STOP offset (gain kept)."""
    return _stop_feedback(raw, states, dev, scale=False)


@calibrator("stop_feedback")
def stop_feedback_calibration(raw: Forecast, states: DevView, dev: np.ndarray, seed: int = 0) -> Forecast:
    """STOP feedback with signed-opportunity scaling of the gain (Appendix D)."""
    return _stop_feedback(raw, states, dev, scale=True)
