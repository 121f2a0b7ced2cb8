"""What a forecaster or calibration map sees of a fork study: its development view.

Forecasts are fitted on the development support components and scored on the others
(search-value study §3.3, Appendix B: "every fit uses development rows only"). So a forecaster
never gets the `StateTable` itself: it gets a `DevView`, which holds every state's public
columns and features, which rows are dev, and the outcomes of the dev rows only, in a separate
`StateTable` of those rows (`dev_states`). The test rows' outcomes are not in the view at all (not
masked: absent), so a forecaster cannot score itself on what it is scored against; reading the
full table's outcome columns from a view (`states.think`, `states.search`, `states.dbar`) raises
`OutcomesNotInView`, naming where the dev outcomes are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

import numpy as np

from branchpoint.evaluation.value.outcomes import PublicColumns, StateTable

#: The full table's outcome attributes, which a view leaves out (`dev_states` has the dev rows').
OUTCOME_ATTRIBUTES: frozenset[str] = frozenset({"think", "search", "dbar", "counts", "excluded_keys"})


class OutcomesNotInView(AttributeError):
    """A forecaster asked a development view for outcomes of every row (test rows included)."""


def _frozen(values: np.ndarray) -> np.ndarray:
    copy = np.array(values, copy=True)
    copy.setflags(write=False)
    return copy


@dataclass
class DevView(PublicColumns):
    """Every state's public columns (`PublicColumns`: row i is state i, as in `StateTable`), the
    public feature matrices, the dev mask, and `dev_states`: the dev rows' own table, outcomes
    included, in row order (`dev_rows[j]` is the row of its j-th state). Arrays are read-only
    copies."""

    features: Mapping[str, np.ndarray]
    dev: np.ndarray
    dev_states: StateTable

    @classmethod
    def of(cls, states: StateTable, dev: np.ndarray) -> DevView:
        """The development view of `states` with dev rows `dev` (a boolean mask over its rows)."""
        dev = np.asarray(dev, dtype=bool)
        if dev.shape != (len(states),):
            raise ValueError(f"dev mask has shape {dev.shape}, expected ({len(states)},)")
        public: dict[str, Any] = {}
        for f in fields(PublicColumns):
            value = getattr(states, f.name)
            public[f.name] = _frozen(value) if isinstance(value, np.ndarray) else list(value)
        return cls(
            **public,
            features=MappingProxyType({k: _frozen(v) for k, v in states.features.items()}),
            dev=_frozen(dev),
            dev_states=states.subset(dev),
        )

    def __getattr__(self, name: str) -> Any:
        if name in OUTCOME_ATTRIBUTES:
            raise OutcomesNotInView(
                f"a forecaster sees the development view of the states: `states.{name}` (every row's outcomes) "
                f"is not in it; the dev rows' outcomes are `states.dev_states.{name}` (rows `states.dev_rows`)"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def dev_rows(self) -> np.ndarray:
        """The rows of the dev states, in order (`dev_states` row j is row `dev_rows[j]`)."""
        return np.flatnonzero(self.dev)

    def on_all_rows(self, dev_values: np.ndarray) -> np.ndarray:
        """A per-dev-state column (or matrix) spread over every row: the dev rows get their
        values, the others NaN (for fits that index the full rows and read dev rows only)."""
        dev_values = np.asarray(dev_values, dtype=float)
        out = np.full((len(self), *dev_values.shape[1:]), np.nan)
        out[self.dev_rows] = dev_values
        return out

    def targets(self) -> np.ndarray:
        """(n × 2) each state's mean outcomes (Ȳ_T, Ȳ_S): the dev rows', NaN elsewhere."""
        d = self.dev_states
        return self.on_all_rows(np.stack([d.think.mean_y, d.search.mean_y], axis=1))
