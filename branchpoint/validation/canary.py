"""The canary forecaster: it shows, by its score, what a forecaster can see of the outcomes.

At every state it predicts the state's own observed mean outcomes (Ȳ_T, Ȳ_S) where it may read
them, and `LEVEL` for both actions elsewhere. A study values with no development rows
(`--dev-split 0`), so a forecaster may read no outcome at all: the canary then says ½
everywhere, whose Brier is exactly ¼ for 0/1 rewards, whatever the truth (`truths.canary_brier`
computes it from the truth all the same). Where test outcomes leak into what forecasters see,
it predicts each state's own outcomes and its Brier falls far below ¼: the `Brier canary` row
of `quantities` fails.

What a forecaster sees is built by one pipeline function, `FORECASTER_VIEW` (`DevView.of`: every
row's public columns, and the outcomes of the development rows only). The canary reads the
outcomes through `visible_means` alone: whatever the view holds, it uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import Forecast
from branchpoint.registry import REGISTRY

CANARY = "validation_canary"
LEVEL = 0.5
#: The pipeline function that builds what a forecaster is shown (the leak mutant patches it).
FORECASTER_VIEW = "branchpoint.evaluation.value.dev_view:DevView.of"


def visible_means(states: DevView, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's observed mean outcome of the T and S roles where the view holds it, and the
    rows where it does (the view's development rows)."""
    targets = states.targets()
    return targets[:, 0], targets[:, 1], ~np.isnan(targets).any(axis=1)


def canary(states: DevView, dev: np.ndarray) -> Forecast:
    """Own observed means where visible, `LEVEL` elsewhere (see the module docstring)."""
    mean_t, mean_s, seen = visible_means(states, dev)
    return Forecast(np.where(seen, mean_t, LEVEL), np.where(seen, mean_s, LEVEL))


@contextmanager
def canary_registered() -> Iterator[None]:
    """The canary registered as a forecaster while the block runs (every study values it)."""
    REGISTRY.add("forecaster", CANARY, canary, fitted=False, calibrate=False)
    try:
        yield
    finally:
        REGISTRY.remove("forecaster", CANARY)
