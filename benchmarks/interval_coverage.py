"""Coverage of value.json's 95% intervals in synthetic fork studies with known truth.

Each replication draws a study from a population of support components (5 strata, K per
stratum, 1-3 states each, m = 4 repeats per action; `tests/evaluation/value/coverage_sim.py`)
and scores it with branchpoint's own columns and within-strata component bootstrap. It prints,
per layout, how often each interval holds the population truth:

- mean θ̂ (EΔ²), mean Δ̄ (EΔ), V_Δ: the percentile interval (what value.json reports), BCa
  (`intervals.bca_interval`) and studentized (`intervals.studentized_intervals`);
- the oracle range's interval of H = (E|Δ| − |EΔ|)/2: the old one (the percentiles of the two
  bounds) and the new one (`intervals.oracle_interval`: joint limits of EΔ² and |EΔ|);
- R²_Δ of a forecaster f = Δ + ε: the old interval (NaN resamples dropped) and the new one
  (`intervals.skill_interval`), with how often the point V̂_Δ ≤ 0, how often the old code
  printed an interval where R²_Δ is undefined or past the stated share, and how often the new
  one is withheld.

    .venv/bin/python benchmarks/interval_coverage.py [--replications 1000] [--components 8] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from branchpoint.evaluation.value.bootstrap import percentile_interval
from branchpoint.evaluation.value.intervals import (
    bca_interval,
    jackknife_means,
    max_undefined_share,
    oracle_interval,
    skill_interval,
    studentized_intervals,
)
from branchpoint.evaluation.value.scores import gain_r2, gain_variance, oracle_range
from tests.evaluation.value.coverage_sim import LAYOUTS, draw_study, population

LEVEL = 0.95


def _inside(iv: tuple[float, float] | None, x: float) -> bool:
    return iv is not None and iv[0] <= x <= iv[1]


def replicate(layout: str, replications: int, components: int, resamples: int, seed: int) -> dict[str, float]:
    """Coverage (and R²_Δ counts) of every interval over `replications` studies of `layout`."""
    pop = population(layout, seed=seed)
    truth = pop.truth()
    rng = np.random.default_rng(seed + 1)
    hits: dict[str, int] = {}

    def hit(key: str, ok: bool) -> None:
        hits[key] = hits.get(key, 0) + int(ok)

    for _ in range(replications):
        st = draw_study(pop, rng, components=components, resamples=resamples)
        th, mu, risk = st.boot[:, 0], st.boot[:, 1], st.boot[:, 2]
        p_th, p_mu, _ = st.point()
        v = np.asarray(gain_variance(th, mu))
        jack, home = jackknife_means(np.stack([st.theta, st.dbar], axis=1), st.component, st.stratum)
        stud = studentized_intervals(
            st.theta, st.dbar, st.component, st.stratum, resamples=resamples, seed=st.seed, level=LEVEL
        )
        cols = {
            "theta": (th, p_th, jack[:, 0]),
            "mean_gain": (mu, p_mu, jack[:, 1]),
            "gain_variance": (v, p_th - p_mu**2, jack[:, 0] - jack[:, 1] ** 2),
        }
        for name, (samples, est, jk) in cols.items():
            lo, hi = percentile_interval(samples, LEVEL)
            hit(f"{name} percentile", _inside((float(lo), float(hi)), truth[name]))
            hit(f"{name} BCa", _inside(bca_interval(samples, est, jk, home, LEVEL), truth[name]))
            hit(f"{name} studentized", _inside(stud[name], truth[name]))
        b_lo, b_hi = oracle_range(th, mu)
        old = (float(percentile_interval(b_lo, LEVEL)[0]), float(percentile_interval(b_hi, LEVEL)[1]))
        hit("oracle H old (bounds' percentiles)", _inside(old, truth["oracle_h"]))
        hit("oracle H new (joint limits)", _inside(oracle_interval(th, mu, LEVEL).interval, truth["oracle_h"]))
        r2 = np.asarray(gain_r2(risk, v))
        point_v = p_th - p_mu**2
        lo, hi = percentile_interval(r2, LEVEL)
        new = skill_interval(r2, v, LEVEL, point_v)
        undefined = not point_v > 0 or new.undefined_share > max_undefined_share(LEVEL)
        hit("R²_Δ old (NaN dropped)", _inside((float(lo), float(hi)), truth["gain_r2"]))
        hit("R²_Δ new (undefined at both ends), when reported", _inside(new.interval, truth["gain_r2"]))
        hit("R²_Δ: point V̂_Δ ≤ 0", not point_v > 0)
        hit("R²_Δ: old printed an interval it cannot stand behind", undefined and bool(np.isfinite(lo)))
        hit("R²_Δ: new withheld", new.interval is None)
    out = {k: v / replications for k, v in hits.items()}
    reported = replications - hits.get("R²_Δ: new withheld", 0)
    key = "R²_Δ new (undefined at both ends), when reported"
    out[key] = hits.get(key, 0) / reported if reported else float("nan")
    return out | {"truth H": truth["oracle_h"], "truth V": truth["gain_variance"], "truth R²_Δ": truth["gain_r2"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=1000)
    ap.add_argument("--components", type=int, default=8, help="components per stratum (5 strata)")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    args = ap.parse_args()
    layouts = args.layouts.split(",")
    start = time.perf_counter()
    results = {lay: replicate(lay, args.replications, args.components, args.resamples, args.seed) for lay in layouts}
    se = np.sqrt(LEVEL * (1 - LEVEL) / args.replications)
    print(
        f"{args.replications} replications per layout, {5 * args.components} components (5 strata × "
        f"{args.components}), m = 4, {args.resamples} resamples; binomial SE of a 0.95 coverage {se:.3f}; "
        f"{time.perf_counter() - start:.0f} s"
    )
    print(f"| interval | {' | '.join(layouts)} |")
    print(f"|---|{'---|' * len(layouts)}")
    for key in results[layouts[0]]:
        print(f"| {key} | " + " | ".join(f"{results[lay][key]:.3f}" for lay in layouts) + " |")
    print(
        "\n    .venv/bin/python benchmarks/interval_coverage.py "
        f"--replications {args.replications} --components {args.components} --resamples {args.resamples} "
        f"--seed {args.seed}"
    )


if __name__ == "__main__":
    main()
