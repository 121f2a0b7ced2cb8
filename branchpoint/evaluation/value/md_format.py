"""Cell and table formatting shared by value.json's markdown sections (`markdown`, `seed_markdown`)."""

from __future__ import annotations

from typing import Any


def fmt(x: Any, digits: int = 4, scale: float = 1.0) -> str:
    """A number to `digits` decimals (times `scale`, e.g. 100 for utility points); None is "—",
    a string (a reason) is kept."""
    if x is None or isinstance(x, str):
        return "—" if x is None else x
    return f"{scale * float(x):.{digits}f}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table (pipes inside cells escaped), followed by a blank line."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows] + [""]
