"""Bootstrap speed: 10,000 support-component resamples over 1,632 synthetic questions.

Builds a synthetic fork study (one scored state per question, 4 THINK and 4 SEARCH repeats,
4 strata, questions joined into support components by shared pages), then times
- the vectorised bootstrap (`bootstrap_means`) of every per-state column that `branchpoint
  value` resamples for 5 forecasters and 5 prices, 10,000 resamples;
- the same resamples computed with plain Python loops (`bootstrap_means_loop`), timed on fewer
  resamples and scaled linearly to 10,000 (it draws identical counts; the script checks that
  both give the same means on those resamples);
- the whole scoring step (`study.score`: scores, routers, 10,000-resample intervals).

    .venv/bin/python benchmarks/bootstrap_speed.py [--loop-resamples 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from branchpoint.evaluation.value.bootstrap import bootstrap_means, bootstrap_means_loop
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.forecasters import Forecast
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.scoring import score, state_columns

N_QUESTIONS = 1_632
RESAMPLES = 10_000


def synthetic_states(n: int = N_QUESTIONS, seed: int = 0) -> StateTable:
    """n states (one per question) with Bernoulli repeats, token costs, strata and components."""
    rng = np.random.default_rng(seed)
    p_t, p_s = rng.beta(2, 3, n), rng.beta(3, 2, n)
    think = [(rng.uniform(size=4) < p).astype(float) for p in p_t]
    search = [(rng.uniform(size=4) < p).astype(float) for p in p_s]
    tok_t = [rng.integers(200, 600, 4).astype(float) for _ in range(n)]
    tok_s = [rng.integers(800, 3000, 4).astype(float) for _ in range(n)]
    answers = [[str(int(v)) for v in y] for y in think]
    page = rng.integers(0, int(n * 0.75), n)  # shared pages join questions into components
    return StateTable(
        keys=[(f"p{i}", "c") for i in range(n)],
        question_id=[f"q{i}" for i in range(n)],
        question=[f"question {i}?" for i in range(n)],
        stratum=np.array([f"s{i % 4}" for i in range(n)], dtype=object),
        component=np.array([f"page{p}" for p in page], dtype=object),
        boundary=["initial"] * n,
        boundary_kind=np.array(["initial"] * n, dtype=object),
        t_action=["THINK"] * n,
        s_action=["SEARCH"] * n,
        prefix_steps=[0] * n,
        search_budget=[3] * n,
        think=RoleOutcomes(think, tok_t, answers),
        search=RoleOutcomes(search, tok_s, [["x"] * 4] * n),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop-resamples", type=int, default=20, help="resamples timed for the plain loop")
    args = parser.parse_args()

    states = synthetic_states()
    rng = np.random.default_rng(1)
    forecasts = {f"f{j}": Forecast(rng.uniform(size=len(states)), rng.uniform(size=len(states))) for j in range(5)}
    dev = np.zeros(len(states), dtype=bool)
    config = ValueConfig(resamples=0)

    # the columns `score` bootstraps: θ̂, Δ̄, |Δ̄|, 5 per forecaster, one per router and price
    values = state_columns(states, dev, forecasts, config).values
    n_comp = len(set(states.component.tolist()))
    print(f"{len(states)} questions, {n_comp} support components, 4 strata, {values.shape[1]} columns")

    start = time.perf_counter()
    fast = bootstrap_means(values, states.component, states.stratum, resamples=RESAMPLES, seed=0)
    t_fast = time.perf_counter() - start
    print(f"vectorised bootstrap: {RESAMPLES:,} resamples in {t_fast:.2f} s")

    k = args.loop_resamples
    start = time.perf_counter()
    slow = bootstrap_means_loop(values, states.component, states.stratum, resamples=k, seed=0)
    t_loop = time.perf_counter() - start
    t_loop_full = t_loop * RESAMPLES / k
    same = np.allclose(slow, bootstrap_means(values, states.component, states.stratum, resamples=k, seed=0))
    print(
        f"plain Python loop: {k} resamples in {t_loop:.2f} s → {t_loop_full:.0f} s for {RESAMPLES:,} "
        f"(scaled linearly); same means on those resamples: {same}"
    )
    print(f"speed-up: {t_loop_full / t_fast:.0f}x")

    start = time.perf_counter()
    score(states, dev, forecasts, config.model_copy(update={"resamples": RESAMPLES}))
    print(
        f"whole scoring step (scores, routers at 5 prices, {RESAMPLES:,}-resample intervals): "
        f"{time.perf_counter() - start:.2f} s"
    )
    assert fast.shape == (RESAMPLES, values.shape[1]) and same
    print("reproduce: .venv/bin/python benchmarks/bootstrap_speed.py")


if __name__ == "__main__":
    main()
