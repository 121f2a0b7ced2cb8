"""A tiny reasoning-effort × search-cap sweep on the simulated model, end to end: `run`, then
`evaluate` writes the frontier into metrics.json, `report` its section and its figure."""

from __future__ import annotations

import csv
import json

import yaml

from branchpoint.evaluation.evaluate import evaluate
from branchpoint.evaluation.frontier import pareto_mask
from branchpoint.evaluation.report import write_report
from branchpoint.experiments import load_spec, run_experiment


def test_a_sim_sweep_has_its_frontier_in_metrics_report_and_figure(tmp_path, isolated_cache):
    spec = {
        "name": "frontier-sim",
        "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
        "model": {
            "provider": "sim",
            "name": "branchpoint-sim-instruct",
            "style": "chat",
            "max_tokens": 256,
            "seed": 1,
            "sim": {"latency_scale": 0.0},
        },
        "agent": {"policy": "native", "top_k": 2},
        "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
        # efforts listed high first: the frontier must keep the spec's order, not sort them
        "sweep": {"model.reasoning_effort": ["high", "low"], "agent.search_cap": [0, 2]},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    run_dir = tmp_path / "run"
    run_experiment(load_spec(path), run_dir, progress=False, concurrency=8)
    evaluate(run_dir, judge="rule")
    fr = json.loads((run_dir / "metrics.json").read_text())["effort_cap_frontier"]
    assert fr["available"] and fr["simulated"] is True
    (grid,) = fr["series"]
    assert grid["effort_order"] == ["high", "low"] and grid["effort_order_source"] == "spec"
    assert {(p["effort"], p["cap"]) for p in grid["points"]} == {("high", 0), ("high", 2), ("low", 0), ("low", 2)}
    # the Pareto set, checked against the points' own accuracy and TPC
    acc = [p["overall_accuracy"] for p in grid["points"]]
    tpc = [float(p["tpc"]) for p in grid["points"]]
    assert [p["on_frontier"] for p in grid["points"]] == pareto_mask(acc, tpc).tolist()
    assert len(grid["cap_roi"]) == 2 and len(grid["effort_roi"]) == 2
    assert [s["from_effort"] for s in grid["effort_roi"]] == ["high", "high"]
    report, figures = write_report(run_dir)
    text = report.read_text()
    assert "## Reasoning effort × search cap: frontier and marginal ROI" in text
    png = figures["effort_cap_frontier"]
    assert png is not None and png.is_file() and png.with_suffix(".svg").is_file()
    svg = png.with_suffix(".svg").read_text()
    assert "(simulated model)" in svg and "effort = high" in svg and "overall accuracy (%)" in svg
    assert svg.index("effort = high") < svg.index("effort = low")  # legend in the spec's order
    with png.with_suffix(".csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and {r["on_frontier"] for r in rows} <= {"True", "False"}
