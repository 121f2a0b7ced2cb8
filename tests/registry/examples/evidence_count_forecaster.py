"""Add a new forecaster: one registered function of the state table (then every value study
scores it beside the built-in forecasters)."""

import numpy as np

from branchpoint.api import forecaster


@forecaster("early_search_gain")
def early_search_gain(states, dev):
    """(q_T, q_S): a constant 0.4 for THINK, and for SEARCH 0.6 / (1 + steps before the state),
    so searching is forecast to help most early in an execution. Uses no dev rows."""
    steps = np.array([s or 0 for s in states.prefix_steps], dtype=float)
    return np.full(len(states), 0.4), 0.6 / (1.0 + steps)
