"""Bootstrap over support components, vectorised: 10,000 resamples of 1,632 questions in seconds.

Every statistic of value.json is a function of stratum-balanced means of per-state columns
(Brier, L, θ̂, Δ̄, utilities, ...). So the bootstrap precomputes, per support component c and
stratum s, the column sums G[c, s, :] and state counts M[c, s]; a resample is a vector of
component draw counts n_c, and its per-stratum means are (n @ G) / (n @ M). The mean of
per-stratum means (strata present in the resample, weighted equally) then feeds the
statistic's formula, in every resample at once.

Components are resampled *within strata* (search-value study, §4.2 "Intervals use 10,000
resamples of support components … Equal-stratum analyses normalize the stratum weights within
each resample"): each component belongs to its home stratum (the stratum holding most of its
states; ties: the first label in sorted order), and a resample draws, in every stratum with K
home components, K − 1 of them with replacement (Rao–Wu: an unbiased variance for each
stratum's mean; drawing K undercovers when K is small: 0.905 instead of 0.94 at K = 5 in a
simulation with strong component effects). A drawn component brings all its states, whatever
their strata. Strata with very few components still undercover (K = 2: about 0.74): the study
warns about them by name (`few_component_strata`). Resampling across strata instead (`within_strata=False`: C draws
from all C components) leaves a stratum with a single component out of ~37% of resamples
((1 − 1/C)^C), which shifts the equal-stratum mean and ruins coverage. A stratum with one
component still has no sampling variation to resample: `single_component_strata` names them,
and the study reports no interval for quantities that depend on them.

Draw counts come from a seeded `numpy.random.Generator` as index matrices turned into counts
with `bincount`, per chunk of resamples, so the same seed gives the same resamples.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np

CHUNK = 500  # resamples per block: bounds memory at CHUNK × C counts


def label_codes(labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Integer codes 0..k−1 of the labels (in sorted order of their text) and k, the number of distinct labels."""
    uniq, inverse = np.unique(np.asarray(labels).astype(str), return_inverse=True)
    return inverse, len(uniq)


def draw_counts(rng: np.random.Generator, n_components: int, n_resamples: int) -> np.ndarray:
    """Draw counts (n_resamples × C): each row draws C components uniformly with replacement."""
    draws = rng.integers(0, n_components, size=(n_resamples, n_components))
    offsets = (np.arange(n_resamples) * n_components)[:, None]
    return np.bincount((draws + offsets).ravel(), minlength=n_resamples * n_components).reshape(
        n_resamples, n_components
    )


def draw_counts_within(
    rng: np.random.Generator, groups: list[np.ndarray], n_components: int, n_resamples: int
) -> np.ndarray:
    """Draw counts (n_resamples × C) drawn within groups: for each group (an array of component
    indices, e.g. the components of one home stratum) of K ≥ 2 members, K − 1 draws with
    replacement (the Rao–Wu rescaled bootstrap: for a stratum mean, a ratio, the rescaling
    factor K/(K − 1) cancels, and the bootstrap variance is the unbiased s²/K instead of
    (K − 1)/K of it); a group of one member draws it once (held fixed); a component in no group
    is never drawn."""
    out = np.zeros((n_resamples, n_components), dtype=np.int64)
    for members in groups:
        k = len(members)
        if k == 0:
            continue
        draws = rng.integers(0, k, size=(n_resamples, max(k - 1, 1)))
        offsets = (np.arange(n_resamples) * k)[:, None]
        local = np.bincount((draws + offsets).ravel(), minlength=n_resamples * k).reshape(n_resamples, k)
        out[:, members] += local
    return out


def home_groups(components: np.ndarray, strata: np.ndarray) -> list[np.ndarray]:
    """Component indices (codes of the sorted component labels) grouped by home stratum: the
    stratum holding most of the component's states (ties: the smallest stratum label)."""
    comp, n_comp = label_codes(components)
    strat, n_strata = label_codes(strata)
    table = np.zeros((n_comp, n_strata), dtype=np.int64)
    np.add.at(table, (comp, strat), 1)
    home = table.argmax(axis=1)  # argmax takes the first maximum: the smallest label
    return [np.flatnonzero(home == s) for s in range(n_strata)]


def single_component_strata(components: np.ndarray, strata: np.ndarray) -> list[str]:
    """Strata whose states all lie in one support component (sorted labels): a component
    bootstrap cannot resample their variation."""
    labels = np.asarray(strata).astype(str)
    comps = np.asarray(components).astype(str)
    return sorted(s for s in set(labels.tolist()) if len(set(comps[labels == s].tolist())) == 1)


def few_component_strata(components: np.ndarray, strata: np.ndarray, below: int = 5) -> dict[str, int]:
    """Strata with at least 2 but fewer than `below` support components, and how many each has:
    their intervals may undercover (a bootstrap cannot learn a spread from 2–4 clusters)."""
    labels = np.asarray(strata).astype(str)
    comps = np.asarray(components).astype(str)
    counts = {s: len(set(comps[labels == s].tolist())) for s in sorted(set(labels.tolist()))}
    return {s: k for s, k in counts.items() if 2 <= k < below}


def count_chunks(
    n_components: int, resamples: int, seed: int, groups: list[np.ndarray] | None = None
) -> Iterator[np.ndarray]:
    """The draw counts of every resample, CHUNK rows at a time, from one seeded Generator;
    within `groups` when given (`draw_counts_within`), else C draws from all C components."""
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, CHUNK):
        b = min(CHUNK, resamples - start)
        yield draw_counts(rng, n_components, b) if groups is None else draw_counts_within(rng, groups, n_components, b)


def bootstrap_means(
    values: np.ndarray,
    components: np.ndarray,
    strata: np.ndarray,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    within_strata: bool = True,
) -> np.ndarray:
    """Stratum-balanced column means in each resample of support components: (resamples × k).

    `values` is (n states × k columns); `components` and `strata` label each state. In a
    resample, component c drawn n_c times contributes its states n_c times; each stratum's mean
    is over the states drawn in it, and strata present in the resample weigh equally.
    Components are drawn within their home strata (`home_groups`) unless `within_strata` is
    False.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    comp, n_comp = label_codes(components)
    strat, n_strata = label_codes(strata)
    _n, k = values.shape
    cells = comp * n_strata + strat
    sums = np.zeros((n_comp * n_strata, k))
    np.add.at(sums, cells, values)
    sizes = np.bincount(cells, minlength=n_comp * n_strata).astype(float)
    table = np.concatenate([sums.reshape(n_comp, n_strata * k), sizes.reshape(n_comp, n_strata)], axis=1)
    out = np.empty((resamples, k))
    row = 0
    groups = home_groups(components, strata) if within_strata else None
    for counts in count_chunks(n_comp, resamples, seed, groups):
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
    values: np.ndarray,
    components: np.ndarray,
    strata: np.ndarray,
    *,
    resamples: int,
    seed: int = 0,
    within_strata: bool = True,
) -> np.ndarray:
    """The same resamples as `bootstrap_means`, computed with plain Python loops (the benchmark's
    reference: it draws identical counts and must give identical means)."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    comp, n_comp = label_codes(components)
    strat, _ = label_codes(strata)
    rows = values.tolist()
    members: list[list[int]] = [[] for _ in range(n_comp)]
    for i, c in enumerate(comp.tolist()):
        members[c].append(i)
    strat_of = strat.tolist()
    k = values.shape[1]
    out = []
    groups = home_groups(components, strata) if within_strata else None
    for counts in count_chunks(n_comp, resamples, seed, groups):
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
