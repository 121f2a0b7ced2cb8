"""Readable tables and figures: natural condition order, labels with their section, an n column
on every table, TPC = ∞ marked, sweeps readable at 20 conditions, whole-number ticks for counts,
PNG + SVG + CSV per figure, and one report over several runs."""

from __future__ import annotations

import copy
import json
import re
import struct

import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.evaluation.conditions import natural_condition_key
from branchpoint.evaluation.figure_common import short
from branchpoint.evaluation.figures import plot_tpc_outcome
from branchpoint.evaluation.report import short_label
from branchpoint.experiments import load_spec, run_experiment
from tests.experiments.conftest import CountingOpener, search_until_told_responder

runner = CliRunner()


@pytest.fixture(scope="module")
def swept_run(tmp_path_factory):
    """A small scripted search-cap sweep, evaluated (cap 0 answers; the others never do)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("BRANCHPOINT_CACHE", str(tmp_path_factory.mktemp("cache")))
    root = tmp_path_factory.mktemp("readable")
    spec = root / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "readable",
                "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
                "model": {"provider": "scripted", "script": ["x"], "max_tokens": 32},
                "agent": {"policy": "constrained", "top_k": 2},
                "sweep": {"agent.search_cap": [10, 2, 0, 1]},
            }
        )
    )
    run_dir = root / "run"
    run_experiment(
        load_spec(spec), run_dir, progress=False, model_opener=CountingOpener(responder=search_until_told_responder)
    )
    result = runner.invoke(app, ["evaluate", str(run_dir), "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    yield run_dir
    patch.undo()


def test_conditions_in_natural_order_with_their_section(swept_run):
    metrics = json.loads((swept_run / "metrics.json").read_text())
    assert list(metrics["by_condition"]) == [f"agent.search_cap={c}" for c in (0, 1, 2, 10)]
    keys = [natural_condition_key({"a": v}) for v in ("q10", "q2", "q1")]
    assert sorted(keys) == [keys[2], keys[1], keys[0]]
    assert (
        short_label("retrieval.default=clean,retrieval.sources.noisy.chunk_words=40")
        == "retrieval.default=clean,noisy.chunk_words=40"
    )
    assert short("retrieval.default=clean", 40) == "retrieval.default=clean"


def _md_tables(text: str) -> list[list[str]]:
    headers = []
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("| ") and lines[i + 1].startswith("| ---"):
            headers.append([c.strip() for c in line.strip("|").split("|")])
    return headers


def test_every_report_table_has_an_n_column_and_figures_come_with_svg_and_csv(swept_run):
    result = runner.invoke(app, ["report", str(swept_run)])
    assert result.exit_code == 0, result.output
    text = (swept_run / "report.md").read_text()
    tables = _md_tables(text)
    assert len(tables) >= 8
    for header in tables:
        assert any(c == "n" or c.startswith("n ") for c in header), header
    figures = swept_run / "figures"
    pngs = sorted(figures.glob("*.png"))
    assert pngs
    for png in pngs:
        assert png.with_suffix(".svg").is_file() and png.with_suffix(".csv").is_file(), png.name
    sweep_csv = (figures / "tpc_vs_search_cap.csv").read_text().splitlines()
    assert sweep_csv[0].startswith("model,other,cap,n,tpc") and [r.split(",")[2] for r in sweep_csv[1:]] == [
        "0",
        "1",
        "2",
        "10",
    ]
    assert any(",inf," in row for row in sweep_csv[1:])
    svg = (figures / "tpc_vs_search_cap.svg").read_text()
    assert "TPC = ∞ (nothing correct)" in svg  # infinite TPC drawn as a marked point, with a note
    texts = re.findall(r">([^<]*)</text>", svg)
    xticks = texts[: texts.index("search cap")]
    assert xticks and all(t.isdigit() for t in xticks)  # counts: whole-number ticks only


def test_twenty_conditions_stay_readable(swept_run, tmp_path):
    metrics = json.loads((swept_run / "metrics.json").read_text())
    one = next(iter(metrics["by_condition"].values()))
    metrics["by_condition"] = {f"agent.search_cap={i}": copy.deepcopy(one) for i in range(20)}
    path = plot_tpc_outcome(metrics, tmp_path / "outcome.png")
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    assert width < 1000 and height < 1200  # rows, not a 3,775-px row of bars


def test_one_report_over_several_runs(swept_run, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "metrics.json").write_text((swept_run / "metrics.json").read_text())
    out = tmp_path / "both"
    result = runner.invoke(app, ["report", str(swept_run), str(other), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "report.md").read_text()
    assert "| run: agent.search_cap=0 |" in text and "| other: agent.search_cap=10 |" in text
    assert (out / "run" / "report.md").is_file() and (out / "other" / "report.md").is_file()
    assert (out / "figures" / "tpc_by_outcome.csv").is_file()
    result = runner.invoke(app, ["report", str(swept_run), str(other)])
    assert result.exit_code == 2 and "need --out" in result.output


def test_many_with_without_pairs_are_drawn_as_rows(swept_run, tmp_path):
    from branchpoint.evaluation.figures import plot_accuracy_search

    metrics = json.loads((swept_run / "metrics.json").read_text())
    pair = metrics["search_effect"][0]
    metrics["search_effect"] = [{**pair, "model": f"model-{i}"} for i in range(10)]
    path = plot_accuracy_search(metrics, tmp_path / "acc.png")
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    assert width < 1000 and height < 1000


def test_terminal_table_marks_identical_conditions():
    from rich.console import Console

    from branchpoint.evaluation.report import comparison_table

    row = {
        "n": 2,
        "answer_accuracy": 0.5,
        "abstention_accuracy": None,
        "overall_accuracy": 0.5,
        "tpc": 10.0,
        "mean_search_calls": 1.0,
        "mean_input_tokens": 5.0,
        "mean_output_tokens": 2.0,
    }
    metrics = {
        "lam": 0.25,
        "mu": 500,
        "judge": "rule",
        "by_condition": {"agent.prompt=plain": row, "agent.prompt=fewshot": row},
        "identical_conditions": [{"conditions": ["agent.prompt=fewshot", "agent.prompt=plain"]}],
    }
    console = Console(width=160, record=True)
    console.print(comparison_table(metrics))
    text = console.export_text()
    assert "agent.prompt=plain ≡1" in text and "agent.prompt=fewshot ≡1" in text
