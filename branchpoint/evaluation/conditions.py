"""Condition dicts (a run's swept settings): their labels and natural order (`condition_label`,
`natural_condition_key`, `DEFAULT_CONDITION`) and their keys found by name (`find_key`, `truthy`,
`as_number`, `search_disabled`).

Keys are found with or without a section prefix: `agent.search` or `search`, `agent.search_cap`
or `search_cap`.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_CONDITION = "default"  # label of the empty condition {}


def _format_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def condition_label(condition: dict[str, Any]) -> str:
    """Stable short label of a condition: `k=v` pairs with sorted keys, e.g. `policy=x,search=true`.

    Strings appear as they are, other values as compact JSON (`true`, `3`, `null`); the empty
    condition is labelled "default".
    """
    if not condition:
        return DEFAULT_CONDITION
    return ",".join(f"{k}={_format_value(condition[k])}" for k in sorted(condition))


def _natural_value(value: Any) -> tuple[Any, ...]:
    """Sort key of one condition value: numbers by size, text with its digit runs as numbers
    (`q2` before `q10`), booleans and null before them, other values by their JSON."""
    if value is None or isinstance(value, bool):
        return (0, int(bool(value)))
    if isinstance(value, (int, float)):
        return (1, float(value))
    if isinstance(value, str):
        return (
            2,
            tuple(
                (0, int(part), "") if part.isdigit() else (1, 0, part.lower())
                for part in re.split(r"(\d+)", value)
                if part
            ),
        )
    return (3, _format_value(value))


def natural_condition_key(condition: dict[str, Any]) -> tuple[Any, ...]:
    """Sort key of a condition that puts its values in natural order: `search_cap=2` before
    `search_cap=10`, `preceding=1, 3, 9` as numbers, text naturally; axes in sorted order."""
    return tuple((k, _natural_value(condition[k])) for k in sorted(condition))


def find_key(condition: dict[str, Any], name: str) -> str | None:
    """The condition key called `name` or ending in `.name` (first in sorted order), or None."""
    hits = sorted(k for k in condition if k == name or k.endswith("." + name))
    return hits[0] if hits else None


def truthy(value: Any) -> bool:
    """A condition value read as a switch: "true" / "yes" / "on" / "1" (any case) for text,
    Python truth otherwise (a sweep may give `search: "false"` as text)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "on", "1")
    return bool(value)


def as_number(value: Any) -> float | None:
    """A condition value as a number (a search cap, a turn count), or None when it is not one
    (booleans are not numbers here)."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def search_disabled(condition: dict[str, Any]) -> bool:
    """True when the condition switches search off (a false `search` key, or `search_cap` 0)."""
    key = find_key(condition, "search")
    if key is not None and not truthy(condition[key]):
        return True
    cap = find_key(condition, "search_cap")
    return cap is not None and as_number(condition[cap]) == 0
