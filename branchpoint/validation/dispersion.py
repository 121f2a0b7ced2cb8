"""How spread the errors of Δ̄ are, against the exact Binomial model of the studies' own states.

Given the states, a branch outcome is Bernoulli(p_true) and the repeats are independent, so the
error e = Δ̄ − Δ of a state has variance v = p_T(1 − p_T)/m_T + p_S(1 − p_S)/m_S exactly. This
module sets the errors of a validation's per-state rows (`validation.json` `per_study[*].per_state`)
beside that model at three levels, each with a p-value from drawing the same states' outcomes
afresh (independent Binomials from the true p, `draws` times):

- states: Σe² / Σv over every state (1 under the model; below 1 is underdispersion, which biases
  the gain risk L̂ low, since L̂ subtracts the model's noise);
- questions: the same ratio of the per-question sums (correlation between the states of one
  question raises it);
- studies: the RMS of z = Σe / √Σv per study (correlation between *questions* of a study raises
  it while the two ratios above stay at 1), and the correlation across studies of the z of the
  answerable and the unanswerable questions.

It is a diagnostic of the validation itself (BENCHMARKS.md, "Validation on the simulated model"):
a small value of `p` says the errors do not behave like independent Binomial draws from the
truth, a large one that an odd coverage figure is within what chance gives for these states.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def _arrays(studies: Sequence[dict[str, Any]], repeats: int) -> list[dict[str, np.ndarray]]:
    out = []
    for s in studies:
        rows = s["per_state"]
        if not rows:
            continue
        qids = [str(r["question_id"]) for r in rows]
        index = {q: i for i, q in enumerate(dict.fromkeys(qids))}
        out.append(
            {
                "pt": np.array([r["p_think"] for r in rows], dtype=float),
                "ps": np.array([r["p_search"] for r in rows], dtype=float),
                "mt": np.array([r.get("m_think", repeats) for r in rows], dtype=int),
                "ms": np.array([r.get("m_search", repeats) for r in rows], dtype=int),
                "e": np.array([r["dbar"] - r["delta"] for r in rows], dtype=float),
                "q": np.array([index[q] for q in qids], dtype=int),
                # rows written before `answerable` was recorded: the demo set's ids say it (demo-aNN)
                "answerable": np.array(
                    [
                        bool(r["answerable"]) if r.get("answerable") is not None else "-a" in q
                        for r, q in zip(rows, qids)
                    ]
                ),
            }
        )
    return out


def _stats(parts: list[dict[str, np.ndarray]], errors: list[np.ndarray]) -> dict[str, float]:
    """The four statistics for one set of errors (axis 0: draws, axis 1: states)."""
    e2 = v_all = q2 = 0.0
    z2: list[np.ndarray] = []
    za: list[np.ndarray] = []
    zu: list[np.ndarray] = []
    for a, e in zip(parts, errors):
        v = a["pt"] * (1 - a["pt"]) / a["mt"] + a["ps"] * (1 - a["ps"]) / a["ms"]
        e2 = e2 + (e * e).sum(axis=-1)
        v_all += float(v.sum())
        onehot = np.eye(int(a["q"].max()) + 1)[a["q"]]  # states x questions
        sums = e @ onehot
        q2 = q2 + (sums * sums).sum(axis=-1)
        vs = float(v.sum())
        z2.append(e.sum(axis=-1) / math.sqrt(vs) if vs > 0 else np.zeros(e.shape[:-1]))
        for mask, acc in ((a["answerable"], za), (~a["answerable"], zu)):
            vm = float(v[mask].sum())
            acc.append(e[..., mask].sum(axis=-1) / math.sqrt(vm) if vm > 0 else np.zeros(e.shape[:-1]))
    z = np.stack(z2, axis=-1)
    zA, zU = np.stack(za, axis=-1), np.stack(zu, axis=-1)
    zA_c = zA - zA.mean(axis=-1, keepdims=True)
    zU_c = zU - zU.mean(axis=-1, keepdims=True)
    den = np.sqrt((zA_c * zA_c).sum(axis=-1) * (zU_c * zU_c).sum(axis=-1))
    corr = np.where(den > 0, (zA_c * zU_c).sum(axis=-1) / np.where(den > 0, den, 1.0), 0.0)
    return {
        "state_ratio": e2 / v_all,
        "question_ratio": q2 / v_all,
        "study_rms_z": np.sqrt((z * z).mean(axis=-1)),
        "answerable_unanswerable_corr": corr,
    }


def dispersion(
    studies: Sequence[dict[str, Any]], *, repeats: int = 4, draws: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Each statistic observed, its mean under the exact model, and its two-sided p-value (the
    share of draws at least as far from the model's median, on the observed side, doubled)."""
    parts = _arrays(studies, repeats)
    if not parts:
        return {}
    observed = _stats(parts, [a["e"] for a in parts])
    rng = np.random.default_rng(seed)
    null: dict[str, list[np.ndarray]] = {k: [] for k in observed}
    chunk = 200
    for start in range(0, draws, chunk):
        n = min(chunk, draws - start)
        errs = []
        for a in parts:
            shape = (n, len(a["e"]))
            dt = rng.binomial(a["mt"], a["pt"], size=shape) / a["mt"]
            ds = rng.binomial(a["ms"], a["ps"], size=shape) / a["ms"]
            errs.append(ds - dt - (a["ps"] - a["pt"]))
        for k, v in _stats(parts, errs).items():
            null[k].append(np.asarray(v))
    out: dict[str, Any] = {"studies": len(parts), "states": int(sum(len(a["e"]) for a in parts)), "draws": draws}
    for k, obs in observed.items():
        sims = np.concatenate(null[k])
        med = float(np.median(sims))
        side = sims >= float(obs) if float(obs) >= med else sims <= float(obs)
        out[k] = {
            "observed": float(obs),
            "model_mean": float(sims.mean()),
            "p": float(min(1.0, 2.0 * side.mean())),
        }
    return out


def r2_expected_error(
    p_t: np.ndarray,
    p_s: np.ndarray,
    m_t: np.ndarray,
    m_s: np.ndarray,
    strata: Sequence[str],
    *,
    forecast: tuple[np.ndarray, np.ndarray] | None = None,
    draws: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """E[R̂²_Δ] − R²_Δ of a fixed forecast (default the exact one, q = p) under the exact
    Binomial model of one study's states, by redrawing their outcomes; and its Monte Carlo
    standard error.

    R̂²_Δ = 1 − L̂/V̂_Δ is a ratio of two stratum-balanced means that share θ̂ (search-value
    study, appendix "Gain variance and explained variation": L = f² − 2fΔ̄ + θ̂,
    V̂_Δ = Σwθ̂ − (ΣwΔ̄)²). Each is unbiased or nearly so, but their ratio is not: to first order
    E[L̂/V̂] = EL̂/EV̂ − Cov(L̂, V̂)/(EV̂)² + EL̂·Var(V̂)/(EV̂)³, and for the exact forecaster
    (L = 0) the bias of R̂² is +Cov(L̂, V̂)/V_Δ² > 0, since a draw whose θ̂ is high raises both.
    Draws with V̂_Δ ≤ 0 (R̂² undefined) are left out, as value.json's bootstrap leaves them."""
    p_t, p_s = np.asarray(p_t, dtype=float), np.asarray(p_s, dtype=float)
    m_t, m_s = np.asarray(m_t, dtype=int), np.asarray(m_s, dtype=int)
    labels = np.asarray(strata, dtype=object)
    groups = list(dict.fromkeys(labels.tolist()))
    w = np.zeros(len(p_t))
    for g in groups:
        w[labels == g] = 1.0 / (len(groups) * int((labels == g).sum()))
    q_t, q_s = forecast if forecast is not None else (p_t, p_s)
    f, delta = q_s - q_t, p_s - p_t
    true_r2 = 1.0 - float(w @ ((f - delta) ** 2)) / float(w @ delta**2 - (w @ delta) ** 2)
    rng = np.random.default_rng(seed)
    st = rng.binomial(m_t, p_t, size=(draws, len(p_t)))
    ss = rng.binomial(m_s, p_s, size=(draws, len(p_s)))
    yt, ys = st / m_t, ss / m_s
    # 0/1 rewards: ΣY² = ΣY, so the unbiased square of p is s(s − 1) / (m(m − 1))
    theta = ss * (ss - 1) / (m_s * (m_s - 1)) + st * (st - 1) / (m_t * (m_t - 1)) - 2.0 * ys * yt
    dbar = ys - yt
    risk = (f * f - 2.0 * f * dbar + theta) @ w
    v_hat = theta @ w - (dbar @ w) ** 2
    ok = v_hat > 0
    r2 = 1.0 - risk[ok] / v_hat[ok]
    return float(r2.mean() - true_r2), float(r2.std(ddof=1) / math.sqrt(len(r2)))
