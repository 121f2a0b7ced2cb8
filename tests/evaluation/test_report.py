"""Reports: the rich comparison table and the markdown report."""

from __future__ import annotations

import io
import json
import math

from rich.console import Console

from branchpoint.evaluation import comparison_table, compute_metrics, markdown_report, metrics_json
from tests.evaluation.test_metrics import hand_set


def test_comparison_table_has_a_row_per_condition():
    metrics = compute_metrics(hand_set(), "human")
    table = comparison_table(metrics)
    assert table.row_count == 2
    buf = io.StringIO()
    Console(file=buf, width=200).print(table)
    text = buf.getvalue()
    assert "policy=free,search=false" in text and "796.2" not in text  # per-condition rows
    assert "1,365" in text and "228" in text  # TPC rounded to whole tokens in the terminal


def test_markdown_report_reads_back_json_with_inf():
    recs = [r for r in hand_set() if r.category == "FP"]  # nothing correct
    metrics = json.loads(metrics_json(compute_metrics(recs, "human")))
    md = markdown_report(metrics, "Demo run")
    assert md.startswith("# Demo run")
    assert "λ = 0.25" in md and "μ = 500" in md
    assert "∞" in md and "FP (false premise)" in md
    assert "| policy=free,search=false |" in md
    assert math.isinf(compute_metrics(recs, "human")["tpc"])
