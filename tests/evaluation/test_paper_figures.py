"""Figures and tables of an effort × cap sweep as a paper needs them: efforts in the spec's order
(never alphabetical), full labels in one legend, three panels sharing the cap axis (no twin
axes), the search cap in the effort table, and "(simulated model)" on every figure and table
of a simulated run, in its own report and in a combined one."""

from __future__ import annotations

import re

from branchpoint.evaluation import compute_metrics, metrics_json
from branchpoint.evaluation.combined import write_combined_report
from branchpoint.evaluation.metrics_file import as_metrics
from branchpoint.evaluation.report import write_report
from branchpoint.evaluation.report_sweep_sections import effort_section
from branchpoint.evaluation.sweep_figures import plot_tpc_search_cap, series_label
from branchpoint.traces import ExecutionRecord
from tests.evaluation.test_frontier import CAP, EFFORT, FAST, grid_records

#: Neither alphabetical (high, low, medium) nor the built-in order (low, medium, high).
SPEC_ORDER = ["medium", "high", "low"]
SWEEP = {EFFORT: SPEC_ORDER, CAP: [0, 2]}


def test_sweeps_and_effort_rows_follow_the_spec_with_their_search_cap():
    m = as_metrics(compute_metrics(grid_records(), "human", FAST, sweep=SWEEP))
    assert [s.other[EFFORT] for s in m.search_cap_sweep] == SPEC_ORDER
    assert [(r.effort, r.search_cap) for r in m.reasoning_effort.rows] == [(e, c) for e in SPEC_ORDER for c in (0, 2)]
    table = [line for line in "\n".join(effort_section(m)).splitlines() if line.startswith("|")]
    assert "search cap" in table[0]
    assert [row.split("|")[2:4] for row in table[2:4]] == [[" medium ", " 0 "], [" medium ", " 2 "]]


def test_the_cap_figure_shares_its_axes_with_full_labels_in_spec_order(tmp_path):
    extra = {"retrieval.sources.wiki.chunk_words": 100, "agent.prompt": "abstention"}
    m = as_metrics(compute_metrics(grid_records(extra=extra), "human", FAST, sweep=SWEEP))
    svg = plot_tpc_search_cap(m, tmp_path / "cap.png").with_suffix(".svg").read_text(encoding="utf-8")
    labels = [series_label(s) for s in m.search_cap_sweep]
    assert all("wiki.chunk_words=100" in label and "agent.prompt=abstention" in label for label in labels)
    assert [svg.index(label) for label in labels] == sorted(svg.index(label) for label in labels)  # spec order
    assert "…" not in svg
    assert len(re.findall(r'<g id="axes_\d+"', svg)) == 3  # TPC, answer, abstention: no twin axes
    assert len(re.findall(r'<g id="legend_\d+"', svg)) == 1


def _sim(records):
    return [ExecutionRecord.model_validate({**r.model_dump(), "model_provider": "sim"}) for r in records]


def _write_run(folder, records):
    folder.mkdir()
    (folder / "metrics.json").write_text(metrics_json(compute_metrics(records, "human", FAST, sweep=SWEEP)))
    return folder


def test_every_figure_and_table_of_a_sim_run_says_so(tmp_path):
    sim = _write_run(tmp_path / "sim", _sim(grid_records()))
    report, figures = write_report(sim)
    drawn = [p for p in figures.values() if p is not None]
    assert len(drawn) >= 3
    for png in drawn:
        assert "(simulated model)" in png.with_suffix(".svg").read_text(encoding="utf-8"), png.name
    text = report.read_text(encoding="utf-8")
    assert text.splitlines()[0].endswith("(simulated model)")
    sections = re.split(r"\n(?=## )", text)
    tabled = [s for s in sections[1:] if re.search(r"^\|", s, re.M)]
    assert tabled and all(s.splitlines()[0].endswith("(simulated model)") for s in tabled), [
        s.splitlines()[0] for s in tabled
    ]

    real = _write_run(tmp_path / "real", grid_records())
    report, figures = write_report(real)
    assert "simulated model" not in report.read_text(encoding="utf-8")
    assert not any("simulated model" in p.with_suffix(".svg").read_text() for p in figures.values() if p)

    combined, _ = write_combined_report([sim, real], tmp_path / "both")
    text = combined.read_text(encoding="utf-8")
    assert text.splitlines()[0].endswith("(simulated model)") and "Runs of the simulated model: `sim`." in text
    assert "## By condition (simulated model)" in text
