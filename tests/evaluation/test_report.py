"""Reports: the rich comparison table, the markdown report, report.md + figures for a run."""

from __future__ import annotations

import io
import json
import math

import pytest
from rich.console import Console

from branchpoint.errors import InputError
from branchpoint.evaluation import (
    MetricsConfig,
    comparison_table,
    compute_metrics,
    evaluate,
    markdown_report,
    metrics_json,
    write_report,
)
from branchpoint.evaluation.figures import FIGURES
from branchpoint.traces import write_records
from tests.evaluation.synthetic import write_synthetic_run
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


# --- report.md + figures on a synthetic run ------------------------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("synthetic-run")
    write_synthetic_run(run)
    evaluate(run, judge="given", cfg=MetricsConfig(bootstrap=200))
    return run


def test_report_writes_every_figure_non_empty(synthetic_run, tmp_path):
    report, figures = write_report(synthetic_run, tmp_path / "out")
    assert report == tmp_path / "out" / "report.md"
    assert set(figures) == set(FIGURES)
    single_judge = {"judge_agreement"}  # one judge here; the heatmap is tested in test_agreement_figure
    assert figures["judge_agreement"] is None
    for key, path in figures.items():
        if key in single_judge:
            continue
        assert path is not None, key
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, key
    md = report.read_text()
    for key, name in FIGURES.items():
        if key not in single_judge:
            assert f"](figures/{name})" in md
    assert "Figure skipped" not in md and "No data" not in md.split("## Judge agreement")[0]


def test_report_tables_in_seed_study_layout(synthetic_run):
    metrics = json.loads((synthetic_run / "metrics.json").read_text())
    md = markdown_report(metrics, "Synthetic")
    header = "| condition | n | Answer Acc | Abst. Acc AU | Abst. Acc FP | Abst. Acc UC | Abst. Acc (all) | TPC |"
    assert header in md
    row = next(
        line for line in md.splitlines() if line.startswith("| agent.search=true,agent.search_cap=4,model.name=m1 |")
    )
    assert row.count("[") >= 5  # intervals beside the numbers
    for section in (
        "## Cost channels and latency",
        "## TPC by outcome",
        "## With vs without search",
        "## Search-cap sweep and marginal ROI",
        "## Over-search",
        "## Evidence balance",
        "## Multi-turn",
        "## Reasoning effort",
        "## Judge agreement",
    ):
        assert section in md
    effort = md.split("## Reasoning effort")[1].split("##")[0]
    assert effort.index("| m2 | low |") < effort.index("| m2 | medium |") < effort.index("| m2 | high |")


def test_report_without_data_skips_figures_with_a_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_records(run / "executions.jsonl", [r for r in hand_set() if r.status != "incomplete"])
    evaluate(run, judge="given", cfg=MetricsConfig(bootstrap=50))
    report, figures = write_report(run)
    assert figures["tpc_outcome"] is not None
    skipped = ("accuracy_search", "tpc_search_cap", "marginal_roi", "evidence_balance", "multi_turn")
    assert all(figures[k] is None for k in skipped)
    assert figures["judge_agreement"] is None  # one judge: its section says so, no figure line
    md = report.read_text()
    assert md.count("_Figure skipped:") == len(skipped)
    assert "No data: no condition has a multi_turn.preceding key." in md
    assert not (run / "figures" / FIGURES["multi_turn"]).exists()


def test_report_needs_metrics(tmp_path):
    with pytest.raises(InputError, match=r"metrics\.json: not found.*branchpoint evaluate"):
        write_report(tmp_path)


def test_synthetic_run_new_over_searching_quantities_match_their_construction(synthetic_run):
    from tests.evaluation.synthetic import answerable_evidence_label, synthetic_records

    metrics = json.loads((synthetic_run / "metrics.json").read_text())
    records = synthetic_records()
    # negative-evidence share of answerable documents: as many as the hash rule makes NEGATIVE
    docs = [d.doc_id for r in records if r.answerable for s in r.steps if s.kind == "search" for d in s.retrieved]
    ans = metrics["evidence_balance"]["answerable"]
    assert ans["n_documents"] == len(docs)
    assert ans["negative_share"] == pytest.approx(
        sum(answerable_evidence_label(d) == "NEGATIVE" for d in docs) / len(docs)
    )
    # over-search per model: minimal = searches // 2 by construction, no-search correct executions included
    ov = metrics["over_search"]
    models = ("m1", "m2", "m3")
    for model in models:
        correct = [
            r
            for r in records
            if r.condition["model.name"] == model
            and r.condition.get("agent.search", True)
            and r.judgments[0].label in ("CORRECT", "ABSTAINED")
        ]
        k = sum(r.search_calls for r in correct)
        k_min = sum(r.search_calls // 2 for r in correct)
        entry = ov["by_model"][model]
        assert (entry["n"], entry["n_no_search"]) == (len(correct), sum(r.search_calls == 0 for r in correct))
        assert entry["mean_searches"] == pytest.approx(k / len(correct))
        assert entry["over_search_pct"] == pytest.approx(100 * (k / k_min - 1))
    average = sum(ov["by_model"][m]["over_search_pct"] for m in models) / len(models)
    assert ov["model_average"]["over_search_pct"] == pytest.approx(average)
    md = markdown_report(metrics, "Synthetic")
    assert "negative docs (answerable)" in md and "| average of 3 models |" in md
    assert "less than 10 tokens" in md
