"""JSON-safe numbers of value.json: `num` (NaN → null, ±inf → "inf" / "-inf", as in
metrics.json) and `interval_of` (an interval's two ends so written)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def num(x: Any) -> Any:
    """A JSON-safe number: NaN → null, ±inf → "inf" / "-inf" (as in metrics.json)."""
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def interval_of(lo: float | np.ndarray, hi: float | np.ndarray) -> list[Any]:
    """[lo, hi] as JSON-safe numbers (see `num`)."""
    return [num(lo), num(hi)]
