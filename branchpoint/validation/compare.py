"""Every estimate of one study against its truth, joined by state key.

`compare_study` reads each quantity of the table `quantities.QUANTITIES` (its estimate, interval
and truth) out of one study's outputs, and adds three comparisons of its own:

- **states**: the truth counts the branches forked from every state in forks.jsonl; every state
  it can score (both roles with 2 or more repeats) must be a row of the pipeline's state table
  with exactly those repeats, and the table must hold no other row (a reader that drops
  branches, at random or by outcome, fails here);
- **mean Δ**: the plug-in Δ̄ of every state against its true Δ, joined by key;
- **branch outcomes**: each forked (state, action)'s successes (the rule judge's verdicts)
  against Binomial(m, p_true), and the run's own executions against Bernoulli(p_true).

A quantity is *not applicable* where its truth says the design has none (`truths.NotApplicable`,
reason kept), and *missing* where it applies and the study's outputs lack its estimate (a key
that other work renamed or dropped): missing quantities fail (`checks.aggregate`), they are never
skipped silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sps

from branchpoint.sim.study_truth import StateTruth
from branchpoint.validation.quantities import QUANTITIES, Kind, at_path
from branchpoint.validation.study import StudyResult
from branchpoint.validation.truths import NotApplicable

STATES = "states"


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, str):
        return None
    x = float(x)
    return None if math.isnan(x) else x


def covers(kind: Kind, truth: float, ci: list[float | None] | None, tol: float = 1e-9) -> bool | None:
    """Whether an interval covers the truth, as a quantity of `kind` reads it: at or under its upper
    end for `upper_bound`, between its ends otherwise (within `tol`); None without an interval."""
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


@dataclass
class Joined:
    """The pipeline's scored rows whose state the truth scores too, in the table's order."""

    rows: np.ndarray  # row indices into the state table
    truth: list[StateTruth]

    @property
    def delta(self) -> np.ndarray:
        return np.array([s.p[s.roles[1]] - s.p[s.roles[0]] for s in self.truth], dtype=float)


def joined(r: StudyResult) -> Joined:
    """The state table's rows joined to the truth by state key (rows the truth lacks left out:
    the states comparison reports them)."""
    by_key = {s.key: s for s in r.truth.scored()}
    pairs = [(i, by_key[k]) for i, k in enumerate(r.states.keys) if k in by_key]
    return Joined(np.array([i for i, _ in pairs], dtype=int), [s for _, s in pairs])


def states_row(r: StudyResult) -> dict[str, Any]:
    """The states comparison (see the module docstring): counts and a few examples."""
    truth = {s.key: s for s in r.truth.scored()}
    table = {k: i for i, k in enumerate(r.states.keys)}
    missing = [k for k in truth if k not in table]
    extra = [k for k in table if k not in truth]
    short = []
    for k, i in table.items():
        st = truth.get(k)
        if st is None:
            continue
        t, s = st.roles
        m_t, m_s = int(r.states.think.m[i]), int(r.states.search.m[i])
        if (m_t, m_s) != (st.repeats[t], st.repeats[s]):
            short.append((k, (m_t, m_s), (st.repeats[t], st.repeats[s])))
    return {
        "truth_states": len(truth),
        "scored": len(table),
        "missing": len(missing),
        "extra": len(extra),
        "other_repeats": len(short),
        "examples": [str(x) for x in (missing[:2] + extra[:2] + short[:2])],
        "passed": not missing and not extra and not short,
    }


def _mean_delta(r: StudyResult, level: float) -> dict[str, Any] | None:
    """Δ̄ against Δ over the joined states: a t interval with the question-clustered CR2
    standard error of Δ̄ − Δ (`clustered_se`). Given the states, per-branch seeds make the
    errors of different states independent; clustering keeps the interval right where they are
    not (states of one question with the same passages get the same draws)."""
    j = joined(r)
    if not len(j.rows):
        return None
    d_hat, d = r.states.dbar[j.rows], j.delta
    mean_hat = float(np.mean(d_hat))
    se, df = clustered_se(d_hat - d, [s.question_id for s in j.truth])
    half = float(sps.t.ppf(0.5 + level / 2, df)) * se if math.isfinite(df) else float("nan")
    return {
        "estimate": mean_hat,
        "truth": float(np.mean(d)),
        "ci": [mean_hat - half, mean_hat + half] if math.isfinite(half) else None,
        "covered": bool(abs(mean_hat - float(np.mean(d))) <= half + 1e-12) if math.isfinite(half) else None,
        "kind": "two_sided",
    }


def _fit_row(draws: list[tuple[int, int, float]]) -> dict[str, Any] | None:
    """Pearson's X² of (successes, repeats, p) groups against Binomial(repeats, p), with its
    degrees of freedom (groups with 0 < p < 1) and exact variance (`pearson_variance`); +inf
    where a sure outcome failed to happen; None without a group to fit."""
    x2, df, x2_var = 0.0, 0, 0.0
    groups: list[list[float]] = []  # (repeats, p) of each fitted group: the exact null by simulation
    for succ, reps, p in draws:
        v, dev = reps * p * (1 - p), succ - reps * p
        if v > 1e-9:
            x2, df, x2_var = x2 + dev * dev / v, df + 1, x2_var + pearson_variance(reps, p)
            groups.append([reps, round(p, 9)])
        elif abs(dev) > 1e-6:
            x2 = float("inf")
    if not df:
        return None
    return {
        "estimate": x2,
        "truth": float(df),
        "variance": x2_var,
        "groups": groups,
        "ci": None,
        "covered": None,
        "kind": "chi2",
    }


def _executions_fit(r: StudyResult) -> dict[str, Any] | None:
    """The run's own executions, one per question, judged against Bernoulli(P(success)) of the
    truth: a judge that misreads some answers (a broken normaliser) fails it whichever
    questions were forked."""
    draws = [(int(ok), 1, r.truth.natural[q].p) for q, ok in sorted(r.run_verdicts.items()) if q in r.truth.natural]
    return _fit_row(draws)


def _branch_rows(r: StudyResult, level: float) -> dict[str, Any]:
    """Branch success per action against Binomial(m, p_true), and the goodness of fit of the
    single-call actions (THINK, STOP); states that show the simulator the same content are
    counted once (they share draws)."""
    z = sps.norm.ppf(0.5 + level / 2)
    out: dict[str, Any] = {}
    for action in ("THINK", "SEARCH", "STOP", "SWITCH"):
        groups: list[tuple[str, int, int, float]] = []  # question, successes, repeats, p
        seen: set[str] = set()
        for st in r.truth.states:
            content = st.content.get(action) or f"{st.key}:{action}"
            if action not in st.p or content in seen:
                continue
            seen.add(content)
            ys = r.verdicts.get((*st.key, action), [])
            groups.append((st.question_id, int(sum(ys)), len(ys), st.p[action]))
        if not groups:
            continue
        if action in ("THINK", "STOP") and (fit := _fit_row([g[1:] for g in groups])) is not None:
            out[f"goodness of fit: {action}"] = fit
        succ = sum(g[1] for g in groups)
        reps = sum(g[2] for g in groups)
        if not reps:
            continue
        resid: dict[str, float] = {}
        for q, s_, m_, p in groups:
            resid[q] = resid.get(q, 0.0) + s_ - m_ * p
        var = sum(m_ * p * (1 - p) for _, _, m_, p in groups)
        # Binomial SE, or the question-clustered one where larger (a SEARCH branch can reach
        # another state's content and then shares its draws).
        k = len(resid)
        clustered = math.sqrt(k / (k - 1) * sum(v * v for v in resid.values())) if k > 1 else 0.0
        est, tru = succ / reps, sum(m_ * p for _, _, m_, p in groups) / reps
        se_b = max(math.sqrt(var), clustered) / reps
        out[f"branch success: {action}"] = {
            "estimate": est,
            "truth": tru,
            "ci": [est - z * se_b, est + z * se_b],
            "covered": bool(abs(est - tru) <= z * se_b + 1e-12),
            "kind": "two_sided",
        }
    return out


@dataclass
class StudyComparison:
    """One study compared: per quantity a row, the quantities that do not apply (with why), the
    ones whose estimate is missing (with the path), and the states comparison."""

    rows: dict[str, Any] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    states: dict[str, Any] = field(default_factory=dict)


def compare_study(r: StudyResult, level: float = 0.95) -> StudyComparison:
    """{quantity: {estimate, truth, ci, covered, kind}} for one study, and what did not apply."""
    c = StudyComparison()
    sources = {"value": r.value, "metrics": r.metrics}
    for q in QUANTITIES:
        try:
            truth = float(q.truth(r))
        except NotApplicable as exc:
            c.not_applicable[q.name] = str(exc)
            continue
        except KeyError as exc:  # a choice value.json should hold (τ, the best constant, ...)
            c.missing[q.name] = str(exc).strip("'\"")
            continue
        try:
            est = _num(at_path(sources[q.source], q.estimate))
            ci = at_path(sources[q.source], q.interval) if q.interval else None
        except KeyError:
            c.missing[q.name] = f"{q.source}.json {q.estimate}" + (f" / {q.interval}" if q.interval else "")
            continue
        if q.kind == "range" and isinstance(ci, dict):
            ci = [ci.get("lo"), ci.get("hi")]
        if q.kind == "range" and est is None and isinstance(ci, list):
            est = _num(ci[0])
        c.rows[q.name] = {
            "estimate": est,
            "truth": truth,
            "ci": ci,
            "covered": covers(q.kind, truth, ci),
            "kind": q.kind,
        }
        if q.reported:
            c.rows[q.name]["reported"] = q.reported
        if q.expected_error is not None:
            c.rows[q.name]["expected_error"] = float(q.expected_error(r))
    if r.truth.scored() or len(r.states):
        c.states = states_row(r)
        mean = _mean_delta(r, level)
        if mean is not None:
            c.rows["mean Δ"] = mean
    else:
        c.not_applicable["mean Δ"] = "no state has both actions (the design offers no search: forks plan THINK only)"
    from branchpoint.validation.sweep_compare import sweep_rows

    rows, na, missing = sweep_rows(r.sweep, r.sweep_metrics, r.truth, r.value, level)
    c.rows.update(rows)
    c.not_applicable.update(na)
    c.missing.update(missing)
    c.rows.update(_branch_rows(r, level))
    if (fit := _executions_fit(r)) is not None:
        c.rows["goodness of fit: executions"] = fit
    return c
