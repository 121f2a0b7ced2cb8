"""Bootstrap over support components, vectorised: 10,000 resamples of 1,632 questions in seconds.

Every statistic of value.json is a function of stratum-balanced means of per-state columns
(Brier, L, θ̂, Δ̄, utilities, ...). So the bootstrap precomputes, per support component c and
stratum s, the column sums G[c, s, :] and state counts M[c, s]; a resample is a vector of
component draw counts n_c (components drawn with replacement, C draws), and its per-stratum
means are (n @ G) / (n @ M). The mean of per-stratum means (strata present in the resample,
weighted equally) then feeds the statistic's formula, in every resample at once. Draw counts
come from a seeded `numpy.random.Generator` as an index matrix turned into counts with one
`bincount` per chunk of resamples, so the same seed gives the same resamples.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np

CHUNK = 500  # resamples per block: bounds memory at CHUNK × C counts


def _codes(labels: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inverse = np.unique(np.asarray(labels).astype(str), return_inverse=True)
    return inverse, len(uniq)


def draw_counts(rng: np.random.Generator, n_components: int, n_resamples: int) -> np.ndarray:
    """Draw counts (n_resamples × C): each row draws C components uniformly with replacement."""
    draws = rng.integers(0, n_components, size=(n_resamples, n_components))
    offsets = (np.arange(n_resamples) * n_components)[:, None]
    return np.bincount((draws + offsets).ravel(), minlength=n_resamples * n_components).reshape(
        n_resamples, n_components
    )


def count_chunks(n_components: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The draw counts of every resample, CHUNK rows at a time, from one seeded Generator."""
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, CHUNK):
        yield draw_counts(rng, n_components, min(CHUNK, resamples - start))


def bootstrap_means(
    values: np.ndarray, components: np.ndarray, strata: np.ndarray, *, resamples: int = 10_000, seed: int = 0
) -> np.ndarray:
    """Stratum-balanced column means in each resample of support components: (resamples × k).

    `values` is (n states × k columns); `components` and `strata` label each state. In a
    resample, component c drawn n_c times contributes its states n_c times; each stratum's mean
    is over the states drawn in it, and strata present in the resample weigh equally.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    comp, n_comp = _codes(components)
    strat, n_strata = _codes(strata)
    n, k = values.shape
    cells = comp * n_strata + strat
    sums = np.zeros((n_comp * n_strata, k))
    np.add.at(sums, cells, values)
    sizes = np.bincount(cells, minlength=n_comp * n_strata).astype(float)
    table = np.concatenate([sums.reshape(n_comp, n_strata * k), sizes.reshape(n_comp, n_strata)], axis=1)
    out = np.empty((resamples, k))
    row = 0
    for counts in count_chunks(n_comp, resamples, seed):
        agg = counts.astype(float) @ table  # (b, S·k + S)
        b = len(counts)
        stratum_sums = agg[:, : n_strata * k].reshape(b, n_strata, k)
        stratum_sizes = agg[:, n_strata * k :]
        present = stratum_sizes > 0
        means = stratum_sums / np.where(present, stratum_sizes, 1.0)[:, :, None]
        out[row : row + b] = (means * present[:, :, None]).sum(axis=1) / present.sum(axis=1)[:, None]
        row += b
    return out


def bootstrap_means_loop(
    values: np.ndarray, components: np.ndarray, strata: np.ndarray, *, resamples: int, seed: int = 0
) -> np.ndarray:
    """The same resamples as `bootstrap_means`, computed with plain Python loops (the benchmark's
    reference: it draws identical counts and must give identical means)."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    comp, n_comp = _codes(components)
    strat, _ = _codes(strata)
    rows = values.tolist()
    members: list[list[int]] = [[] for _ in range(n_comp)]
    for i, c in enumerate(comp.tolist()):
        members[c].append(i)
    strat_of = strat.tolist()
    k = values.shape[1]
    out = []
    for counts in count_chunks(n_comp, resamples, seed):
        for draw in counts.tolist():
            sums: dict[int, list[float]] = {}
            sizes: dict[int, int] = {}
            for c, times in enumerate(draw):
                for _ in range(times):
                    for i in members[c]:
                        s = strat_of[i]
                        acc = sums.setdefault(s, [0.0] * k)
                        for j in range(k):
                            acc[j] += rows[i][j]
                        sizes[s] = sizes.get(s, 0) + 1
            out.append([sum(sums[s][j] / sizes[s] for s in sums) / len(sums) for j in range(k)])
    return np.array(out)


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap samples along axis 0, ignoring NaN resamples."""
    alpha = (1.0 - level) / 2.0
    samples = np.asarray(samples, dtype=float)
    with warnings.catch_warnings():  # an all-NaN column (e.g. V_Δ ≤ 0 everywhere) gives NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanquantile(samples, alpha, axis=0)
        hi = np.nanquantile(samples, 1.0 - alpha, axis=0)
    return lo, hi
