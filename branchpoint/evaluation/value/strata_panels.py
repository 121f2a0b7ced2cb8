"""Per-stratum panels: each router's utility and each forecaster's Brier, gain risk and Brier
difference from a reference forecaster, stratum by stratum, with support-component intervals.

Search-value study, Figure 3 (right: "means and 95% component intervals" of the map-minus-prior
Brier change per stratum; §5.1 "Figure 3 gives all five strata and their intervals"), extended
here to every router's utility at every price. A stratum's number is the plain mean over its
test states; its interval comes from the *same* resamples as value.json's equal-stratum
intervals (`bootstrap.count_chunks` with the study's seed, components drawn within home strata),
so a stratum's panel and the overall numbers are paired resample by resample. A stratum whose
states all lie in one support component has no interval (the resample cannot vary it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.value.bootstrap import count_chunks, home_groups, label_codes, percentile_interval


def bootstrap_stratum_means(
    values: np.ndarray,
    components: np.ndarray,
    strata: np.ndarray,
    *,
    resamples: int,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Per stratum (sorted labels), its column means in every resample: {stratum: (resamples × k)}.

    The resamples are `bootstrap.bootstrap_means`'s (same seed, same within-strata draws of
    components); a stratum absent from a resample (possible only when its states sit in
    components homed elsewhere) gives NaN there."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    comp, n_comp = label_codes(components)
    strat, n_strata = label_codes(strata)
    labels = sorted(set(np.asarray(strata).astype(str).tolist()))
    k = values.shape[1]
    sums = np.zeros((n_comp, n_strata, k))
    np.add.at(sums, (comp, strat), values)
    sizes = np.zeros((n_comp, n_strata))
    np.add.at(sizes, (comp, strat), 1.0)
    flat = sums.reshape(n_comp, n_strata * k)
    out = {s: np.empty((resamples, k)) for s in labels}
    row = 0
    for counts in count_chunks(n_comp, resamples, seed, home_groups(components, strata)):
        c = counts.astype(float)
        b = len(c)
        drawn = c @ sizes  # b × S
        agg = (c @ flat).reshape(b, n_strata, k)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = agg / drawn[:, :, None]
        for j, s in enumerate(labels):
            out[s][row : row + b] = np.where(drawn[:, j : j + 1] > 0, means[:, j], np.nan)
        row += b
    return out


def stratum_means(values: np.ndarray, strata: np.ndarray) -> dict[str, np.ndarray]:
    """Per stratum (sorted labels), the plain column means over its states."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    labels = np.asarray(strata).astype(str)
    return {s: values[labels == s].mean(axis=0) for s in sorted(set(labels.tolist()))}


def strata_panels(
    names: Sequence[str],
    values: np.ndarray,
    components: np.ndarray,
    strata: np.ndarray,
    *,
    panels: Mapping[str, Mapping[str, str | tuple[str, str]]],
    resamples: int,
    seed: int,
    level: float,
    num: Any,
) -> dict[str, Any]:
    """value.json's `strata_panels`: per panel, per entry, per stratum an estimate and interval.

    `names[j]` labels column j of `values` (per-state columns on the test rows); `panels` maps a
    panel name to its entries, each a column name or a pair (a, b) for the paired difference
    a − b of two columns (in every resample). `num` makes numbers JSON-safe."""
    labels = np.asarray(strata).astype(str)
    comps = np.asarray(components).astype(str)
    index = {n: j for j, n in enumerate(names)}
    wanted = sorted({c for entries in panels.values() for e in entries.values() for c in _cols(e)})
    cols = [index[c] for c in wanted]
    sub = np.asarray(values, dtype=float)[:, cols]
    at = {c: j for j, c in enumerate(wanted)}
    point = stratum_means(sub, labels)
    boot = bootstrap_stratum_means(sub, comps, labels, resamples=resamples, seed=seed) if resamples > 0 else None
    single = {s for s in point if len(set(comps[labels == s].tolist())) == 1}

    def pick(src: np.ndarray, entry: str | tuple[str, str]) -> Any:
        if isinstance(entry, str):
            return src[..., at[entry]]
        a, b = entry
        return src[..., at[a]] - src[..., at[b]]

    out: dict[str, Any] = {
        "strata": {
            s: {"states": int((labels == s).sum()), "components": len(set(comps[labels == s].tolist()))} for s in point
        },
        "no_interval": {
            s: "a single support component: a component bootstrap cannot vary this stratum" for s in sorted(single)
        },
        "level": level,
        "panels": {},
    }
    for panel, entries in panels.items():
        block: dict[str, Any] = {}
        for name, entry in entries.items():
            row = {}
            for s in point:
                interval = None
                if boot is not None and s not in single:
                    lo, hi = percentile_interval(pick(boot[s], entry), level)
                    interval = [num(lo), num(hi)]
                row[s] = {"value": num(pick(point[s], entry)), "interval": interval}
            block[name] = row
        out["panels"][panel] = block
    return out


def _cols(entry: str | tuple[str, str]) -> tuple[str, ...]:
    return (entry,) if isinstance(entry, str) else tuple(entry)
