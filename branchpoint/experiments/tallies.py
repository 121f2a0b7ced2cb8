"""Counting finished executions into a run's summary, shared by the runner, the fork engine and
the driver of every executor (`work_driver`).

A module of its own so that each of them imports it without an import cycle (the driver
imports the runner's progress bar; the runner counts as the driver does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class Tally(Protocol):
    """A summary that finished executions are counted into (`RunSummary`, `ForkSummary`)."""

    ran: int
    statuses: dict[str, int]


def tally(summary: Tally, statuses: Iterable[str]) -> int:
    """Count records (their statuses) into a summary as run; returns how many."""
    n = 0
    for status in statuses:
        summary.statuses[status] = summary.statuses.get(status, 0) + 1
        n += 1
    summary.ran += n
    return n
