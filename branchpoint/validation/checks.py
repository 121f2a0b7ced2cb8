"""The checks over many studies: coverage, bias, fit, the states, and what could not run.

`aggregate` turns the per-study comparisons (`compare.StudyComparison`) into one summary per
quantity and the pass / fail `Check`s. Every check that should run for a quantity's kind must
run: a quantity whose estimate is missing from a study's outputs fails, and so does a check that
has nothing to run on, unless the design says why not (a quantity that does not apply, with its
reason; a bias test over fewer than 3 studies).

- coverage: not implausibly low for 95% intervals (one-sided binomial test at `alpha`);
- coverage target (with `TARGET_STUDIES` or more studies): the documented target 0.90-0.99,
  a level-`alpha` binomial test that the true coverage lies in it (fails when the count of
  covered studies is below what 0.90 allows or above what 0.99 allows, each at `alpha`/2);
- unbiased (two-sided estimators): a z-test pooling the studies' own standard errors (read off
  their intervals), else a t-test on the errors across the independent studies, at `bias_alpha`;
  an error is taken against the estimator's expected error under the exact model where a
  quantity knows it (`expected_error`: the ratio R²_Δ), else against 0; the summary gives the
  test's power as `detectable_bias`, the smallest bias it finds with probability 0.8 at the
  level Holm's step-down first asks (`bias_alpha` / the number of bias tests);
- fits the truth (branch outcomes): Pearson's X² against its exact distribution under
  Binomial(m, p_true), simulated (`simulated_fit_p_value`);
- states: every state the truth can score is scored, with all its branches (`compare.states_row`).

The levels are family-wise: each family of statistical tests (coverage, coverage target,
unbiased, fits the truth) is decided by Holm's step-down over the run's tests of that family
(`holm`), so a correct pipeline fails a family with probability at most its level however many
quantities a run checks, and each check's detail gives its p-value and the level it met.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from branchpoint.validation.compare import STATES, StudyComparison

#: The documented coverage target of 95% intervals, checked over this many studies or more.
TARGET: tuple[float, float] = (0.90, 0.99)
TARGET_STUDIES = 20
#: The power `detectable_bias` is stated at.
POWER = 0.8
#: An interval narrower than this (a difference that is 0 by construction, e.g. a factorial cell
#: that is the best constant, whose bounds are float rounding) carries no standard error.
NUMERIC_FLOOR = 1e-9


@dataclass
class Check:
    """One pass/fail check over the studies; a statistical one carries its p-value, and its
    verdict is the Holm step-down over its family's checks (`holm`)."""

    quantity: str
    what: str
    passed: bool
    detail: str
    p_value: float | None = None


def holm(checks: list[Check], alpha: float) -> list[Check]:
    """Holm's step-down over one family of tests (the coverage, the bias or the fit tests of a
    run): a run of a correct pipeline fails some test of the family with probability at most
    `alpha`, however many quantities it checks (a quick run has some 67 coverage tests; each at
    0.01 on its own, 2 of CI's 6 quick runs failed one). Checks without a p-value keep their verdict."""
    tested = sorted(((c.p_value, c) for c in checks if c.p_value is not None), key=lambda pc: pc[0])
    m, rejecting = len(tested), True
    for i, (p, c) in enumerate(tested):
        level = alpha / (m - i)
        rejecting = rejecting and p < level
        c.passed = not rejecting
        c.detail += f"; Holm over {m} {c.what} tests: p = {p:.3g} {'<' if rejecting else '≥'} {level:.2g}"
    return checks


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


#: Draws of X² under the truth behind a fit check's p-value (its smallest value is 1/(draws + 1)).
FIT_DRAWS = 20_000


def simulated_fit_p_value(x2: float, groups: Sequence[Sequence[float]], draws: int = FIT_DRAWS, seed: int = 0) -> float:
    """P(X² ≥ x2) when each group's successes are Binomial(repeats, p): the exact null of
    Pearson's statistic by simulation, (1 + #{X²* ≥ x2}) / (1 + draws). Moment-matched references
    (`fit_p_value`) miss the tail where p is near 0 or 1 (one rare failure adds 1/(mp(1 − p))):
    on 75 states of uniform p the scaled χ² rejected a correct model at 0.001 in 0.36% of draws,
    at 0.0001 in 0.1%."""
    if not math.isfinite(x2):
        return 0.0
    reps = np.array([g[0] for g in groups], dtype=np.int64)
    p = np.array([g[1] for g in groups], dtype=float)
    v = reps * p * (1 - p)
    rng = np.random.default_rng(seed)
    above, chunk = 0, max(1, min(draws, 4_000_000 // max(1, len(p))))
    for start in range(0, draws, chunk):
        n = min(chunk, draws - start)
        s = rng.binomial(reps[:, None], p[:, None], size=(len(p), n))
        stat = (((s - (reps * p)[:, None]) ** 2) / v[:, None]).sum(axis=0)
        above += int(np.sum(stat >= x2 - 1e-9 * max(1.0, x2)))
    return (1 + above) / (1 + draws)


def _finite_row(row: dict[str, Any]) -> bool:
    """A study whose estimate and interval are finite numbers (an unbounded ratio, e.g. the
    over-search % when no truncation needed a search, is +inf and has no standard error)."""
    ci, est = row.get("ci"), row.get("estimate")
    if not (isinstance(ci, list) and len(ci) == 2 and ci[0] is not None and ci[1] is not None and est is not None):
        return False
    return all(math.isfinite(float(x)) for x in (ci[0], ci[1], est))


def _ses(rows: list[dict[str, Any]], level: float) -> list[tuple[float, float]]:
    """(error, se) of every study with a finite, non-degenerate interval (se = width / 2z)."""
    zq = float(sps.norm.ppf(0.5 + level / 2))
    out = []
    for row in rows:
        if _finite_row(row):
            se = (float(row["ci"][1]) - float(row["ci"][0])) / (2 * zq)
            if se > NUMERIC_FLOOR:
                out.append((float(row["estimate"]) - float(row["truth"]) - row.get("expected_error", 0.0), se))
    return out


def pooled_z(rows: list[dict[str, Any]], level: float = 0.95) -> tuple[float, int] | None:
    """z = Σ errors / sqrt(Σ se²) over the studies, each study's standard error read off its
    interval (width / 2z), each error less the study's `expected_error` where the row has one;
    None unless some study has a finite, non-degenerate interval."""
    pairs = _ses(rows, level)
    if not pairs:
        return None
    return sum(e for e, _ in pairs) / math.sqrt(sum(se * se for _, se in pairs)), len(pairs)


def rms_z(rows: list[dict[str, Any]], level: float = 0.95) -> float | None:
    """√mean z² of the standardised errors z = (estimate − truth)/se over the studies, each se
    read off the study's interval (width / 2z). About 1 for calibrated intervals; below 1 for
    conservative ones (e.g. an interval that also holds question-sampling variation, compared
    with a truth that is conditional on the study's own questions and states); None without
    intervals."""
    zs = [e / se for e, se in _ses(rows, level)]
    return float(math.sqrt(np.mean(np.square(zs)))) if zs else None


def coverage_target_p(covered: int, n: int, target: tuple[float, float] = TARGET) -> float:
    """The p-value of the test that the true coverage lies in `target`: twice the smaller of
    P(≤ covered | target low) and P(≥ covered | target high), capped at 1."""
    low = float(sps.binom.cdf(covered, n, target[0]))
    high = float(sps.binom.sf(covered - 1, n, target[1]))
    return min(1.0, 2.0 * min(low, high))


def detectable_bias(se_mean: float, alpha: float, power: float = POWER) -> float:
    """The smallest |bias| a two-sided level-`alpha` z-test of a mean error with standard error
    `se_mean` detects with probability `power`: (z_{1−α/2} + z_power) · se."""
    return float((sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)) * se_mean)


def _state_power(summary: dict[str, dict[str, Any]], tests: int, bias_alpha: float) -> None:
    """Each bias-tested quantity's `detectable_bias` at the level Holm's step-down first asks of
    a test, `bias_alpha` / (the family's number of tests): the smallest bias the run finds with
    probability 0.8 when it is the only biased quantity (the standard error kept as `bias_se`)."""
    for row in summary.values():
        se = row.get("bias_se")
        if se is not None and tests:
            row["detectable_bias"] = detectable_bias(se, bias_alpha / tests)
            row["detectable_at"] = bias_alpha / tests


def _errors(rows: list[dict[str, Any]], expected: bool = False) -> list[float]:
    """estimate − truth of each study with finite numbers (− its expected error, if asked)."""
    return [
        row["estimate"] - row["truth"] - (row.get("expected_error", 0.0) if expected else 0.0)
        for row in rows
        if row["estimate"] is not None
        and row["truth"] is not None
        and math.isfinite(row["truth"])
        and math.isfinite(row["estimate"])
    ]


def _coverage_checks(name: str, cov: list[bool], alpha: float) -> list[Check]:
    n, covered = len(cov), int(sum(cov))
    p_low = float(sps.binom.cdf(covered, n, 0.95))
    out = [Check(name, "coverage", p_low >= alpha, f"{covered}/{n} covered (P(≤ this | 95%) = {p_low:.3g})", p_low)]
    if n >= TARGET_STUDIES:
        p = coverage_target_p(covered, n)
        out.append(
            Check(
                name,
                "coverage target",
                p >= alpha,
                f"{covered}/{n} = {covered / n:.3f} against {TARGET[0]:.2f}-{TARGET[1]:.2f}: p = {p:.3g}",
                p,
            )
        )
    return out


def _bias_check(
    name: str, rows: list[dict[str, Any]], studies: int, bias_alpha: float, summary: dict[str, Any]
) -> Check | None:
    """The unbiasedness check of a two-sided estimator, its power into `summary`; None where it
    cannot run by design (fewer than 3 studies)."""
    pooled = pooled_z(rows)
    if any("expected_error" in row for row in rows):
        summary["expected_error"] = float(np.mean([row.get("expected_error", 0.0) for row in rows]))
    if pooled is not None:
        z, k = pooled
        pairs = _ses(rows, 0.95)
        summary["pooled_z"] = z
        summary["bias_se"] = math.sqrt(sum(se * se for _, se in pairs)) / k
        p = float(2 * sps.norm.sf(abs(z)))
        return Check(name, "unbiased", p >= bias_alpha, f"pooled z = {z:+.2f} over {k} studies", p)
    errs = _errors(rows, expected=True)
    if len(errs) >= 3 and max(abs(e) for e in errs) <= NUMERIC_FLOOR:
        # exact in every study but for float rounding (the canary's Brier ¼): errors of 1e-17 may
        # lean one way (the same sums in the same order), and a t-test on them finds a "bias" of 0
        summary["bias_se"] = 0.0
        return Check(name, "unbiased", True, f"exact: every error within {NUMERIC_FLOOR:g} (float rounding)")
    if len(errs) >= 3:
        mean_err, se = float(np.mean(errs)), float(np.std(errs, ddof=1) / math.sqrt(len(errs)))
        summary["bias_se"] = se
        t = abs(mean_err) / se if se > 0 else (0.0 if abs(mean_err) <= 1e-9 else math.inf)
        p = float(2 * sps.t.sf(t, len(errs) - 1))
        return Check(name, "unbiased", p >= bias_alpha, f"mean error {mean_err:+.4f} ± {se:.4f} (SE)", p)
    if studies < 3:
        summary["not_checked"] = "a bias test over studies needs 3 or more studies"
        return None
    non_finite = sum(
        1
        for row in rows
        if row["estimate"] is not None and not math.isfinite(row["estimate"]) and row["covered"] is not None
    )
    if len(errs) + non_finite == len(rows) == studies:  # every study estimated; some unbounded (coverage checks them)
        summary["not_checked"] = (
            f"{non_finite} of {studies} studies gave a non-finite estimate (left out of the error statistics; "
            "their coverage is checked): a bias test needs 3 finite errors"
        )
        return None
    return Check(name, "unbiased", False, f"could not run: {len(errs)} finite errors over {studies} studies")


def _summary(rows: list[dict[str, Any]], cov: list[bool]) -> dict[str, Any]:
    errs = _errors(rows)
    kind = rows[0]["kind"]
    coverage = float(np.mean(cov)) if cov else None
    return {
        "kind": kind,
        "studies": len(rows),
        "coverage": coverage,
        "coverage_p": coverage_target_p(int(sum(cov)), len(cov)) if cov else None,
        "mean_error": float(np.mean(errs)) if errs else None,
        "mean_error_se": float(np.std(errs, ddof=1) / math.sqrt(len(errs))) if len(errs) > 1 else None,
        "rms_z": rms_z(rows) if kind != "chi2" else None,
        # studies whose estimate is not a finite number (left out of the error statistics)
        "non_finite_estimates": sum(
            1 for row in rows if row["estimate"] is None or not math.isfinite(float(row["estimate"]))
        ),
        **({"reported": rows[0]["reported"]} if rows[0].get("reported") else {}),
    }


def _fit_check(name: str, rows: list[dict[str, Any]], bias_alpha: float, summary: dict[str, Any]) -> Check:
    x2 = float(sum(row["estimate"] for row in rows))
    df = float(sum(row["truth"] for row in rows))
    known = all(row.get("variance") is not None for row in rows)
    var = float(sum(row["variance"] for row in rows)) if known else None
    if all(row.get("groups") for row in rows):  # the exact null by simulation
        groups = [g for row in rows for g in row["groups"]]
        p = simulated_fit_p_value(x2, groups)
        how = f"P(X² ≥ this) in {FIT_DRAWS} draws under the truth"
    else:  # a validation.json written before the groups were kept: the two-moment reference
        p = fit_p_value(x2, df, var)
        how = "scaled χ²"
    summary["p_value"], summary["variance"] = p, var
    spread = f", exact variance {var:.0f} (χ²: {2 * df:.0f})" if var is not None else ""
    detail = f"X² = {x2:.1f} on {df:.0f} df{spread} ({how})"
    return Check(name, "fits the truth", p >= bias_alpha, detail, p)


def _states_check(studies: Sequence[StudyComparison]) -> Check | None:
    rows = [s.states for s in studies if s.states]
    if not rows:
        return None
    bad = [r for r in rows if not r["passed"]]
    n = sum(r["truth_states"] for r in rows)
    if not bad:
        return Check(STATES, "every state scored with all its branches", True, f"{n} states over {len(rows)} studies")
    detail = (
        f"{len(bad)}/{len(rows)} studies differ from forks.jsonl: "
        f"{sum(r['missing'] for r in bad)} states missing, {sum(r['extra'] for r in bad)} extra, "
        f"{sum(r['other_repeats'] for r in bad)} with other repeats (e.g. {bad[0]['examples'][:1]})"
    )
    return Check(STATES, "every state scored with all its branches", False, detail)


def aggregate(
    studies: Sequence[StudyComparison], *, alpha: float = 0.01, bias_alpha: float = 0.001
) -> tuple[dict[str, Any], list[Check]]:
    """Summary per quantity and the checks over the studies (see the module docstring).

    Studies with a non-finite estimate or interval (an unbounded ratio such as the over-search %,
    +inf when no truncation point needed a search) count for coverage (an interval that holds
    only +inf does not cover a finite truth) and are left out of the error statistics (counted
    in `non_finite_estimates`)."""
    names: list[str] = []
    for s in studies:
        names += [k for k in s.rows if k not in names]
    summary: dict[str, Any] = {}
    checks: list[Check] = []
    for name in names:
        rows = [s.rows[name] for s in studies if name in s.rows]
        cov = [bool(row["covered"]) for row in rows if row["covered"] is not None]
        summary[name] = _summary(rows, cov)
        kind = rows[0]["kind"]
        if rows[0].get("reported"):
            continue
        if kind == "chi2":
            checks.append(_fit_check(name, rows, bias_alpha, summary[name]))
            continue
        if cov:
            checks += _coverage_checks(name, cov, alpha)
        elif any(row.get("ci") is not None for row in rows) or kind in ("upper_bound", "range"):
            checks.append(
                Check(name, "coverage", False, f"could not run: no study gave a usable interval of {len(rows)}")
            )
        if kind == "two_sided" and (bias := _bias_check(name, rows, len(studies), bias_alpha, summary[name])):
            checks.append(bias)
    missing: dict[str, list[str]] = {}
    for s in studies:
        for name, path in s.missing.items():
            missing.setdefault(name, []).append(path)
    for name, paths in missing.items():
        checks.append(
            Check(name, "estimate present", False, f"missing in {len(paths)}/{len(studies)} studies: {paths[0]}")
        )
    families = (
        ("coverage", alpha),
        ("coverage target", alpha),
        ("unbiased", bias_alpha),
        ("fits the truth", bias_alpha),
    )
    for what, level in families:  # each family at its level over the run, not each test
        holm([c for c in checks if c.what == what], level)
    _state_power(summary, sum(1 for c in checks if c.what == "unbiased" and c.p_value is not None), bias_alpha)
    if (states := _states_check(studies)) is not None:
        checks.append(states)
    return summary, checks


def not_applicable(studies: Sequence[StudyComparison]) -> dict[str, dict[str, Any]]:
    """Every quantity that did not apply in some study: the reason and in how many studies."""
    out: dict[str, dict[str, Any]] = {}
    for s in studies:
        for name, reason in s.not_applicable.items():
            entry = out.setdefault(name, {"reason": reason, "studies": 0})
            entry["studies"] += 1
    return out
