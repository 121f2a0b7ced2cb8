"""The judge-agreement heatmap (seed 000, Inter-judge validation / Appendix Figure 8): its matrix
and CSV from hand-labelled records, the PNG/SVG files, and its line in the report."""

from __future__ import annotations

import csv
import math

import pytest

from branchpoint.evaluation import MetricsConfig, compute_metrics, markdown_report
from branchpoint.evaluation.agreement import judge_agreement
from branchpoint.evaluation.agreement_figure import agreement_matrix
from branchpoint.evaluation.figures import FIGURES, write_figures
from branchpoint.traces import Judgment
from tests.evaluation.builders import make_record


def three_judges() -> list:
    """4 answerable items. human C C I I, llm C I I I, rule C C I I.
    human–llm: 3/4 agree; p_e = (2·1 + 2·3)/16 = 0.5 → κ = 0.5. human–rule: 4/4, κ = 1."""
    human = ["CORRECT", "CORRECT", "INCORRECT", "INCORRECT"]
    llm = ["CORRECT", "INCORRECT", "INCORRECT", "INCORRECT"]
    recs = []
    for i, (h, other) in enumerate(zip(human, llm, strict=True)):
        r = make_record(str(i), labels={"answer": h})
        r.judgments += [
            Judgment(judge="llm", kind="answer", label=other),
            Judgment(judge="rule", kind="answer", label=h),
        ]
        recs.append(r)
    return recs


def test_matrix_by_hand():
    agreed = judge_agreement(three_judges())
    judges = ["human", "llm", "rule"]
    matrix, texts = agreement_matrix(agreed["pairs"], judges, "answer")
    assert matrix[0, 1] == matrix[1, 0] == pytest.approx(0.75)
    assert matrix[0, 2] == pytest.approx(1.0) and matrix[1, 2] == pytest.approx(0.75)
    assert all(math.isnan(matrix[i, i]) for i in range(3))
    assert texts[0][1] == "75%\nκ 0.50\nn 4"
    assert texts[0][2] == "100%\nκ 1.00\nn 4"
    empty, _ = agreement_matrix(agreed["pairs"], judges, "abstention")
    assert all(math.isnan(v) for v in empty.ravel())


def test_heatmap_files_and_report_line(tmp_path):
    m = compute_metrics(three_judges(), "human", MetricsConfig(bootstrap=0))
    m["judge_agreement"] = judge_agreement(three_judges())
    figures = write_figures(m, tmp_path)
    png = figures["judge_agreement"]
    assert png == tmp_path / FIGURES["judge_agreement"]
    assert png.read_bytes().startswith(b"\x89PNG") and png.with_suffix(".svg").is_file()
    rows = list(csv.DictReader(png.with_suffix(".csv").open()))
    hl = next(r for r in rows if (r["kind"], r["judge_a"], r["judge_b"]) == ("answer", "human", "llm"))
    assert float(hl["agreement"]) == pytest.approx(0.75) and float(hl["kappa"]) == pytest.approx(0.5)
    assert hl["n"] == "4"
    md = markdown_report(m, "Judges", {"judge_agreement": "figures/judge_agreement.png"})
    assert "![Judge agreement heatmap](figures/judge_agreement.png)" in md.split("## Judge agreement")[1]


def test_no_heatmap_with_one_judge(tmp_path):
    recs = [make_record("1", labels={"answer": "CORRECT"})]
    m = compute_metrics(recs, "human", MetricsConfig(bootstrap=0))
    assert write_figures(m, tmp_path)["judge_agreement"] is None
    assert not (tmp_path / FIGURES["judge_agreement"]).exists()
