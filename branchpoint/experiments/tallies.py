"""Counting finished executions into a run's summary, shared by the runner, the fork engine and
the driver of every executor (`work_driver`).

A module of its own so that each of them imports it without an import cycle (the driver
imports the runner's progress bar; the runner counts as the driver does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from branchpoint.evaluation.tally import is_model_step
from branchpoint.traces import ExecutionRecord


class Tally(Protocol):
    """A summary that finished executions are counted into (`RunSummary`, `ForkSummary`):
    statuses, and the model calls the response cache answered (`hits`) or looked up and sent
    (`misses`)."""

    ran: int
    statuses: dict[str, int]
    response_cache: dict[str, int]


def tally(summary: Tally, statuses: Iterable[str]) -> int:
    """Count records (their statuses) into a summary as run; returns how many."""
    n = 0
    for status in statuses:
        summary.statuses[status] = summary.statuses.get(status, 0) + 1
        n += 1
    summary.ran += n
    return n


def cache_outcomes(records: Iterable[ExecutionRecord]) -> dict[str, int]:
    """`hits` and `misses` of the response cache over the records' model calls (steps whose
    `cache_hit` is set; a call no cache was asked about counts in neither)."""
    out = {"hits": 0, "misses": 0}
    for record in records:
        for step in record.steps:
            if step.cache_hit is not None and is_model_step(step):
                out["hits" if step.cache_hit else "misses"] += 1
    return out


def tally_cache(summary: Tally, outcomes: dict[str, int]) -> None:
    """Add response-cache outcomes (`cache_outcomes`, a shard's) into a summary."""
    for key, n in outcomes.items():
        if n:
            summary.response_cache[key] = summary.response_cache.get(key, 0) + n


def tally_records(summary: Tally, records: Iterable[ExecutionRecord]) -> int:
    """Count records into a summary: their statuses and their response-cache outcomes."""
    records = list(records)
    tally_cache(summary, cache_outcomes(records))
    return tally(summary, (r.status for r in records))
