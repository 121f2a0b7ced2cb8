"""Every estimate of a study against its truth, and the checks over many studies.

`compare_study` reads each quantity of the table `quantities.QUANTITIES` (its estimate, interval
and truth) out of one study's outputs, and adds the per-state gain and the branch outcomes
against Binomial(m, p_true); `aggregate` turns the per-study rows into coverage, bias and the
pass/fail `Check`s.

A quantity whose key is missing from a study's outputs is skipped and listed (so keys that other
work adds or renames show up instead of failing silently), and so is one whose truth the
simulator cannot give in a study (NaN: e.g. utilities at a price > 0 under a chat protocol,
whose token costs `models.sim.costs` does not model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from branchpoint.experiments.validation.quantities import QUANTITIES, Kind, _get
from branchpoint.experiments.validation.study import StudyResult
from branchpoint.experiments.validation.truths import true_delta


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, str):
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _covered(kind: Kind, truth: float, ci: list[float | None] | None, tol: float = 1e-9) -> bool | None:
    if ci is None or ci[0] is None or ci[1] is None:
        return None
    lo, hi = float(ci[0]), float(ci[1])
    if kind == "upper_bound":
        return truth <= hi + tol
    return lo - tol <= truth <= hi + tol


def clustered_se(err: np.ndarray, clusters: list[str]) -> tuple[float, float]:
    """Standard error of mean(err) with errors correlated within clusters (questions), and the
    degrees of freedom of its t reference: the bias-reduced cluster-robust variance (CR2, Bell
    and McCaffrey 2002) with their Satterthwaite degrees of freedom.

    For a mean (an intercept-only regression) cluster g's leverage block is J/n, so CR2 is
    Σ_g S_g² / (1 − n_g/n) / n², S_g the sum of cluster g's residuals e_i − ē; and under a working
    model of independent, equal-variance errors it is a weighted sum of χ²'s whose
    Satterthwaite degrees of freedom are tr(M)² / tr(M²), M_gh = c_g c_h (δ_gh n_g − n_g n_h / n),
    c_g = 1 / (n √(1 − n_g/n)). With some 30 question clusters of unequal size, the plain
    sandwich (CR1) with a normal quantile covers about 0.93 where CR2 with this t covers 0.95
    (Monte Carlo on the studies' own states, docs/validate.md)."""
    err = np.asarray(err, dtype=float)
    n = len(err)
    keys = sorted(set(clusters))
    if n < 2 or len(keys) < 2:
        return float("nan"), float("nan")
    index = {c: i for i, c in enumerate(keys)}
    g = np.array([index[c] for c in clusters])
    sums = np.bincount(g, weights=err - err.mean(), minlength=len(keys))
    sizes = np.bincount(g, minlength=len(keys)).astype(float)
    keep = 1.0 - sizes / n
    se = float(math.sqrt(float(np.sum(sums * sums / keep))) / n)
    c = 1.0 / (n * np.sqrt(keep))
    m = np.outer(c, c) * (np.diag(sizes) - np.outer(sizes, sizes) / n)
    df = float(np.trace(m) ** 2 / np.trace(m @ m))
    return se, df


def pearson_variance(m: int, p: float) -> float:
    """The exact variance of one state's Pearson term (s − mp)² / (mp(1 − p)), s ~ Binomial(m, p):
    2 − 6/m + 1/(mp(1 − p)) (from the binomial's fourth central moment mpq(1 + 3(m − 2)pq)); its
    mean is 1. Near p = 0 or 1 it is far above the χ²₁ value 2: one rare failure of a state that
    almost always succeeds adds 1/(mq) to X²."""
    q = p * (1.0 - p)
    return 2.0 - 6.0 / m + 1.0 / (m * q)


def fit_p_value(x2: float, df: float, variance: float | None) -> float:
    """P(X² ≥ x2) for a sum of independent Pearson terms of mean total `df` and exact variance
    `variance`: the scaled χ² c·χ²_ν with the same two moments (c = variance / 2df, ν = 2df² /
    variance; Satterthwaite). χ²_df itself assumes variance 2df, which with m = 4 repeats and
    success probabilities near 0 or 1 is a third of the truth: it rejected a correct model at
    α = 0.001 in 4% of full validations (Monte Carlo, docs/validate.md); the scaled χ² in 0.16%."""
    if not math.isfinite(x2):
        return 0.0
    if variance is None or variance <= 0:
        return float(sps.chi2.sf(x2, df))
    c = variance / (2.0 * df)
    return float(sps.chi2.sf(x2 / c, 2.0 * df * df / variance))


def compare_study(r: StudyResult, level: float = 0.95) -> tuple[dict[str, Any], list[str]]:
    """{quantity: {estimate, truth, ci, covered, kind}} for one study, and the quantities skipped."""
    out: dict[str, Any] = {}
    skipped: list[str] = []
    sources = {"value": r.value, "metrics": r.metrics}
    for q in QUANTITIES:
        try:
            est = _num(_get(sources[q.source], q.estimate))
            ci = _get(sources[q.source], q.interval) if q.interval else None
        except KeyError:
            skipped.append(q.name)
            continue
        if q.kind == "range" and isinstance(ci, dict):
            ci = [ci.get("lo"), ci.get("hi")]
        if q.kind == "range" and est is None and isinstance(ci, list):
            est = _num(ci[0])
        truth = q.truth(r)
        if not math.isfinite(truth):
            skipped.append(f"{q.name} (undefined in this study)")
            continue
        out[q.name] = {
            "estimate": est,
            "truth": float(truth),
            "ci": ci,
            "covered": _covered(q.kind, truth, ci),
            "kind": q.kind,
        }
    # Per-state gain: the plug-in Δ̄ against Δ, and its mean with a t interval whose standard
    # error is clustered by question: CR2 with its degrees of freedom (`clustered_se`). Given the
    # states, per-branch seeds make the errors of different states independent; clustering keeps
    # the interval right where they are not (a client that sends every branch the same seed:
    # states of one question with the same passages then get the same draws).
    d_hat, d = r.states.dbar, true_delta(r)
    z = sps.norm.ppf(0.5 + level / 2)
    if len(d_hat) == 0:  # no state with both actions (no search offered): no gain to compare
        skipped.append("mean Δ (no state has both actions)")
    else:
        mean_hat = float(np.mean(d_hat))
        se, df = clustered_se(d_hat - d, r.states.question_id)
        half = float(sps.t.ppf(0.5 + level / 2, df)) * se if math.isfinite(df) else float("nan")
        out["mean Δ"] = {
            "estimate": mean_hat,
            "truth": float(np.mean(d)),
            "ci": [mean_hat - half, mean_hat + half] if math.isfinite(half) else None,
            "covered": bool(abs(mean_hat - float(np.mean(d))) <= half + 1e-12) if math.isfinite(half) else None,
            "kind": "two_sided",
        }
    # Branch outcomes: each forked (state, action)'s successes against Binomial(m, p_true), states
    # that show the simulator the same content counted once (they share draws).
    for action in ("THINK", "SEARCH", "STOP", "SWITCH"):
        seen: set[int] = set()
        succ = reps = mean_p = var = 0.0
        resid: dict[str, float] = {}
        for g in r.branches:
            if g.action != action or g.content in seen:
                continue
            seen.add(g.content)
            succ += g.successes
            reps += g.repeats
            mean_p += g.repeats * g.truth
            var += g.repeats * g.truth * (1 - g.truth)
            resid[g.question] = resid.get(g.question, 0.0) + g.successes - g.repeats * g.truth
        if action in ("THINK", "STOP"):
            x2, df, x2_var = 0.0, 0, 0.0
            seen_fit: set[int] = set()
            for g in r.branches:
                if g.action != action or g.content in seen_fit:
                    continue
                seen_fit.add(g.content)
                v = g.repeats * g.truth * (1 - g.truth)
                dev = g.successes - g.repeats * g.truth
                if v > 1e-9:
                    x2 += dev * dev / v
                    df += 1
                    x2_var += pearson_variance(g.repeats, g.truth)
                elif abs(dev) > 1e-6:
                    x2 = float("inf")
            if df:
                out[f"goodness of fit: {action}"] = {
                    "estimate": x2,
                    "truth": float(df),
                    "variance": x2_var,
                    "ci": None,
                    "covered": None,
                    "kind": "chi2",
                }
        if reps:
            # Binomial SE, or the question-clustered one where larger (a SEARCH branch can reach
            # another state's content and then shares its draws).
            k = len(resid)
            clustered = math.sqrt(k / (k - 1) * sum(v * v for v in resid.values())) if k > 1 else 0.0
            est, tru, se_b = succ / reps, mean_p / reps, max(math.sqrt(var), clustered) / reps
            out[f"branch success: {action}"] = {
                "estimate": est,
                "truth": tru,
                "ci": [est - z * se_b, est + z * se_b],
                "covered": bool(abs(est - tru) <= z * se_b + 1e-12),
                "kind": "two_sided",
            }
    return out, skipped


@dataclass
class Check:
    """One pass/fail check over the studies."""

    quantity: str
    what: str
    passed: bool
    detail: str


def _finite_row(row: dict[str, Any]) -> bool:
    """A study whose estimate and interval are finite numbers (an unbounded ratio, e.g. the
    over-search % when no truncation needed a search, is +inf and has no standard error)."""
    ci, est = row.get("ci"), row.get("estimate")
    if not (isinstance(ci, list) and len(ci) == 2 and ci[0] is not None and ci[1] is not None and est is not None):
        return False
    return all(math.isfinite(float(x)) for x in (ci[0], ci[1], est))


def pooled_z(rows: list[dict[str, Any]], level: float = 0.95) -> tuple[float, int] | None:
    """z = Σ errors / sqrt(Σ se²) over the studies, each study's standard error read off its
    interval (width / 2z); None unless some study has a finite, non-degenerate interval."""
    zq = float(sps.norm.ppf(0.5 + level / 2))
    num, var, k = 0.0, 0.0, 0
    for row in rows:
        if not _finite_row(row):
            continue
        ci, est, truth = row["ci"], row["estimate"], row["truth"]
        se = (float(ci[1]) - float(ci[0])) / (2 * zq)
        if se <= 0:
            continue
        num += est - truth
        var += se * se
        k += 1
    return (num / math.sqrt(var), k) if k else None


def rms_z(rows: list[dict[str, Any]], level: float = 0.95) -> float | None:
    """√mean z² of the standardised errors z = (estimate − truth)/se over the studies, each se
    read off the study's interval (width / 2z). About 1 for calibrated intervals; below 1 for
    conservative ones (e.g. an interval that also holds question-sampling variation, compared
    with a truth that is conditional on the study's own questions and states); None without
    intervals."""
    zq = float(sps.norm.ppf(0.5 + level / 2))
    zs = []
    for row in rows:
        if not _finite_row(row):
            continue
        ci, est, truth = row["ci"], row["estimate"], row["truth"]
        se = (float(ci[1]) - float(ci[0])) / (2 * zq)
        if se > 0:
            zs.append((est - truth) / se)
    return float(math.sqrt(np.mean(np.square(zs)))) if zs else None


def aggregate(
    per_study: list[dict[str, Any]],
    *,
    target: tuple[float, float] = (0.90, 0.99),
    alpha: float = 0.01,
    bias_alpha: float = 0.001,
) -> tuple[dict[str, Any], list[Check]]:
    """Coverage and bias of each quantity over the studies, and the checks.

    Checks: coverage is not implausibly low for 95% intervals (one-sided binomial test at
    `alpha`: fewer covered studies than chance allows fails), and, for two-sided estimators with
    three or more studies, the mean error is not significantly different from zero at `bias_alpha`
    (two-sided): a z-test pooling the studies' own standard errors (read off their intervals)
    where they have intervals, else a t-test on the errors across the independent studies.
    Studies with a non-finite estimate or interval (an unbounded ratio such as the over-search %,
    +inf when no truncation point needed a search) count for coverage (an interval that holds
    only +inf does not cover a finite truth) and are left out of the error statistics (counted
    in `non_finite_estimates`). Coverage within `target` is reported (`in_target`), not checked: 20 of 20 covered has
    probability 0.36 at a true 95%, and intervals over support components are conservative.
    """
    z_crit = float(sps.norm.ppf(1 - bias_alpha / 2))
    names: list[str] = []
    for s in per_study:
        names += [k for k in s if k not in names]
    summary: dict[str, Any] = {}
    checks: list[Check] = []
    for name in names:
        rows = [s[name] for s in per_study if name in s]
        cov = [row["covered"] for row in rows if row["covered"] is not None]
        errs = [
            row["estimate"] - row["truth"]
            for row in rows
            if row["estimate"] is not None
            and row["truth"] is not None
            and math.isfinite(row["truth"])
            and math.isfinite(row["estimate"])
        ]
        kind = rows[0]["kind"]
        n = len(cov)
        coverage = float(np.mean(cov)) if cov else None
        mean_err = float(np.mean(errs)) if errs else None
        se = float(np.std(errs, ddof=1) / math.sqrt(len(errs))) if len(errs) > 1 else None
        summary[name] = {
            "kind": kind,
            "studies": len(rows),
            "coverage": coverage,
            "mean_error": mean_err,
            "mean_error_se": se,
            "rms_z": rms_z(rows) if kind != "chi2" else None,
            # studies whose estimate is not a finite number (left out of the error statistics)
            "non_finite_estimates": sum(
                1 for row in rows if row["estimate"] is None or not math.isfinite(float(row["estimate"]))
            ),
            "in_target": None if coverage is None else target[0] <= coverage <= target[1],
        }
        if n and kind != "plug_in":
            covered = int(sum(cov))
            p_low = float(sps.binom.cdf(covered, n, 0.95))
            ok = p_low >= alpha
            checks.append(Check(name, "coverage", ok, f"{covered}/{n} covered (P(≤ this | 95%) = {p_low:.3g})"))
        if kind == "chi2":
            x2 = float(sum(row["estimate"] for row in rows))
            df = float(sum(row["truth"] for row in rows))
            known = all(row.get("variance") is not None for row in rows)
            var = float(sum(row["variance"] for row in rows)) if known else None
            p = fit_p_value(x2, df, var)
            summary[name]["p_value"] = p
            summary[name]["variance"] = var
            spread = f", exact variance {var:.0f} (χ²: {2 * df:.0f})" if var is not None else ""
            checks.append(
                Check(
                    name,
                    "fits the truth",
                    p >= bias_alpha,
                    f"X² = {x2:.1f} on {df:.0f} df{spread}, p = {p:.3g} (p ≥ {bias_alpha:g} passes)",
                )
            )
            continue
        if kind == "two_sided":
            pooled = pooled_z(rows)
            if pooled is not None:
                z, k = pooled
                summary[name]["pooled_z"] = z
                checks.append(
                    Check(
                        name,
                        "unbiased",
                        abs(z) <= z_crit,
                        f"pooled z = {z:+.2f} over {k} studies (|z| ≤ {z_crit:.2f} passes)",
                    )
                )
            elif se is not None and len(errs) >= 3:
                crit = float(sps.t.ppf(1 - bias_alpha / 2, len(errs) - 1))
                ok = abs(mean_err) <= crit * se + 1e-9  # type: ignore[arg-type]
                checks.append(
                    Check(name, "unbiased", ok, f"mean error {mean_err:+.4f} ± {se:.4f} (SE; |t| ≤ {crit:.1f} passes)")
                )
    return summary, checks
