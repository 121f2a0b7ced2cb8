"""What a fork study did (`ForkSummary`): the result of `forking.fork_run` and `replay_run`, and of
each fork shard (`fork_shards`), which the study's driver adds up."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ForkSummary:
    """What a fork study did."""

    run_dir: Path
    planned: int = 0
    skipped_done: int = 0
    ran: int = 0
    illegal_skipped: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    minimal: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0  # the plan's seed base (the draws a rerun with it finds recorded)
    repeats: int = 0
    #: Model calls the response cache answered (`hits`) or sent (`misses`); empty without one.
    response_cache: dict[str, int] = field(default_factory=dict)

    @property
    def over_search_pct(self) -> float | None:
        """Over-search % = mean searches / mean minimal searches − 1 (None without data)."""
        if not self.minimal:
            return None
        mean_k = sum(m["searches"] for m in self.minimal) / len(self.minimal)
        mean_t = sum(m["minimal_searches"] for m in self.minimal) / len(self.minimal)
        return float("inf") if mean_t == 0 else 100.0 * (mean_k / mean_t - 1.0)


__all__ = ["ForkSummary"]
