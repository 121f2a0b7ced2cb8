"""The Wilson score interval of a success rate, for one saved state's handful of repeats.

Used by the fork tree the viewer draws (`viewer.views.tree_view`: each action's success rate) and
by the step labels of a fork study (`value.labels`: p̂_T and p̂_S, and Newcombe's interval of Δ
built from the two). It lives here, below both, so that neither imports the other.
"""

from __future__ import annotations

import math

#: z of a two-sided 95 % normal interval.
Z95 = 1.959963984540054


def wilson_interval(successes: float, n: int, z: float = Z95) -> list[float] | None:
    """Wilson score interval of a success rate from n repeats: centre (p̂ + z²/2n) / (1 + z²/n),
    half-width z·sqrt(p̂(1−p̂)/n + z²/4n²) / (1 + z²/n), clipped to [0, 1]; None when n = 0.

    The seed studies give no per-state interval (their intervals resample support components
    across states); for one state's m repeats (m = 4 by default) the Wilson interval keeps its
    coverage where the normal one collapses to a point at p̂ = 0 or 1. Fractional successes
    (rewards in [0, 1], e.g. set F1) enter as their sum.
    """
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / denom
    return [max(0.0, centre - half), min(1.0, centre + half)]
