"""Counting finished executions into a summary (the runner's, the fork engine's, the driver's)."""

from __future__ import annotations

from branchpoint.experiments.runner import RunSummary
from branchpoint.experiments.tallies import tally


def test_tally_counts_statuses_and_runs(tmp_path):
    summary = RunSummary(run_dir=tmp_path, ran=1, statuses={"ok": 1})
    assert tally(summary, iter(["ok", "incomplete", "ok"])) == 3
    assert summary.ran == 4 and summary.statuses == {"ok": 3, "incomplete": 1}
    assert tally(summary, []) == 0 and summary.ran == 4
