"""The over-searching study's analyses added for issue 15, each against numbers computed by hand:
negative-evidence share on answerable questions, judge agreement over three judges and the
direction of disagreements, over-search % per model and averaged over models (zero-search
executions included), and marginal ROI with its undefined region and figure."""

from __future__ import annotations

import math

import pytest

from branchpoint.evaluation import MetricsConfig, compute_metrics, markdown_report
from branchpoint.evaluation.agreement import disagreement_direction, judge_agreement, mean_pairwise
from branchpoint.evaluation.over_search import over_search_pct
from branchpoint.evaluation.studies import ROI_MIN_ADDED_COST, marginal_roi
from branchpoint.evaluation.sweep_figures import plot_marginal_roi
from branchpoint.traces import Judgment
from tests.evaluation.builders import make_record

FAST = MetricsConfig(bootstrap=200)
OK = {"answer": "CORRECT"}


def test_negative_evidence_share_on_answerable_questions():
    recs = [
        make_record("a1", labels=OK, evidence={"d1": "NEGATIVE", "d2": "POSITIVE", "d3": "POSITIVE"}),
        make_record("a2", labels=OK, evidence={"d1": "POSITIVE", "d2": "UNPARSEABLE"}),
        make_record(
            "u1", answerable=False, category="AU", labels={"abstention": "ABSTAINED"}, evidence={"d1": "NEGATIVE"}
        ),
    ]
    ev = compute_metrics(recs, "human", FAST)["evidence_balance"]
    # answerable: 1 negative of 4 parseable documents; unanswerable: 1 of 1
    ans = ev["answerable"]
    assert (ans["n_answerable"], ans["n_documents"], ans["n_negative"], ans["n_unparseable_documents"]) == (2, 4, 1, 1)
    assert ans["negative_share"] == pytest.approx(0.25)
    lo, hi = ans["negative_share_ci"]
    assert 0.0 <= lo <= 0.25 <= hi <= 1.0
    assert ev["negative_share"] == 1.0
    assert ev["by_condition"]["default"]["answerable"]["negative_share"] == pytest.approx(0.25)


def test_evidence_section_available_with_only_answerable_documents():
    ev = compute_metrics([make_record("a1", labels=OK, evidence={"d1": "NEGATIVE"})], "human", FAST)["evidence_balance"]
    assert ev["available"] and ev["answerable"]["negative_share"] == 1.0 and ev["negative_share"] is None


def _three_judges():
    human, j1, j2 = ["A", "A", "N", "N"], ["A", "A", "A", "N"], ["A", "N", "N", "N"]
    name = {"A": "ABSTAINED", "N": "ANSWERED"}
    recs = []
    for i in range(4):
        rec = make_record(f"u{i}", answerable=False, category="FP", labels={"abstention": name[human[i]]})
        rec.judgments += [
            Judgment(judge="llm1", kind="abstention", label=name[j1[i]]),
            Judgment(judge="llm2", kind="abstention", label=name[j2[i]]),
        ]
        recs.append(rec)
    return recs


def test_agreement_averaged_over_three_judges():
    agreement = judge_agreement(_three_judges())
    (avg,) = [a for a in agreement["averages"] if a["kind"] == "abstention"]
    # pairs: human–llm1 3/4, human–llm2 3/4, llm1–llm2 2/4 -> mean 2/3
    # κ: 0.5, 0.5 and (0.5 − 0.375) / 0.625 = 0.2 -> mean 0.4
    assert avg["judges"] == ["human", "llm1", "llm2"] and avg["n_pairs"] == 3
    assert avg["mean_agreement"] == pytest.approx(2 / 3)
    assert avg["mean_kappa"] == pytest.approx(0.4)
    assert {a["kind"] for a in agreement["averages"]} == {"abstention", "decisive"}
    # two judges: no average
    two = [r.model_copy(update={"judgments": [j for j in r.judgments if j.judge != "llm2"]}) for r in _three_judges()]
    assert judge_agreement(two)["averages"] == []
    assert mean_pairwise([]) == []


def test_direction_of_disagreements_against_the_reference_judge():
    agreement = judge_agreement(_three_judges())
    assert agreement["reference"] == "human"
    rows = {(d["judge"], d["kind"]): d for d in agreement["vs_reference"]}
    # llm1 sees an abstention on u2 that the human does not; llm2 misses the one on u1
    assert rows["llm1", "abstention"] == {
        "judge": "llm1",
        "kind": "abstention",
        "n": 4,
        "n_disagree": 1,
        "other_yes_ref_no": 1,
        "other_no_ref_yes": 0,
        "share_other_yes": 1.0,
    }
    assert (rows["llm2", "abstention"]["other_no_ref_yes"], rows["llm2", "abstention"]["share_other_yes"]) == (1, 0.0)
    assert ("llm1", "decisive") in rows and not any(d["judge"] == "human" for d in agreement["vs_reference"])
    pair = next(
        p for p in agreement["pairs"] if (p["judge_a"], p["judge_b"], p["kind"]) == ("llm1", "llm2", "abstention")
    )
    assert (pair["a_yes_b_no"], pair["a_no_b_yes"]) == (2, 0)
    # the study's human validation: 16 disagreements, 10 of them the LLM judge seeing abstention
    ref = ["ANSWERED"] * 10 + ["ABSTAINED"] * 6 + ["ABSTAINED"] * 84
    llm = ["ABSTAINED"] * 10 + ["ANSWERED"] * 6 + ["ABSTAINED"] * 84
    d = disagreement_direction(ref, llm, "abstention")
    assert (d["n"], d["n_disagree"], d["other_yes_ref_no"], d["share_other_yes"]) == (
        100,
        16,
        10,
        pytest.approx(10 / 16),
    )
    # an explicit reference judge
    assert judge_agreement(_three_judges(), reference="llm2")["reference"] == "llm2"


def test_over_search_pct_formula():
    assert over_search_pct(6, 2) == pytest.approx(200.0)
    assert over_search_pct(0, 0) == 0.0
    assert over_search_pct(1, 0) == math.inf


def test_over_search_per_model_and_averaged_over_models():
    m1, m2 = {"model.name": "m1"}, {"model.name": "m2"}
    recs = [
        make_record("q1", labels=OK, condition=m1, execution_id="x1", search_calls=4),
        make_record("q2", labels=OK, condition=m1, execution_id="x2", search_calls=2),
        make_record("q3", labels=OK, condition=m1, execution_id="x3", search_calls=0),  # needed none
        make_record("q4", labels={"answer": "INCORRECT"}, condition=m1, execution_id="x4"),  # wrong: not counted
        make_record("q1", labels=OK, condition=m2, execution_id="y1", search_calls=3),
    ]
    rows = [
        {
            "execution_id": "x1",
            "question_id": "q1",
            "condition": m1,
            "searches": 4,
            "minimal_searches": 1,
            "judge": "rule",
        },
        {
            "execution_id": "x2",
            "question_id": "q2",
            "condition": m1,
            "searches": 2,
            "minimal_searches": 1,
            "judge": "rule",
        },
        {
            "execution_id": "y1",
            "question_id": "q1",
            "condition": m2,
            "searches": 3,
            "minimal_searches": 3,
            "judge": "rule",
        },
    ]
    ov = compute_metrics(recs, "human", FAST, minimal_search=rows)["over_search"]
    one = ov["by_model"]["m1"]
    # m1: k = 4, 2, 0 and k* = 1, 1, 0 -> means 2 and 2/3, over-search 200 %
    assert (one["n"], one["n_searched"], one["n_no_search"]) == (3, 2, 1)
    assert (one["mean_searches"], one["mean_minimal_searches"]) == (pytest.approx(2.0), pytest.approx(2 / 3))
    assert one["over_search_pct"] == pytest.approx(200.0)
    assert ov["by_model"]["m2"]["over_search_pct"] == pytest.approx(0.0)
    avg = ov["model_average"]
    # the study's average: (200 + 0) / 2 = 100 %, not the pooled 9 / 5 − 1 = 80 %
    assert (avg["n_models"], avg["over_search_pct"]) == (2, pytest.approx(100.0))
    assert ov["over_search_pct"] == pytest.approx(80.0)
    assert avg["mean_searches"] == pytest.approx((2 + 3) / 2)
    assert avg["mean_minimal_searches"] == pytest.approx((2 / 3 + 3) / 2)
    lo, hi = avg["over_search_pct_ci"]
    assert lo <= 100.0 <= hi
    assert ov["by_condition"]["model.name=m1"]["model"] == "m1"
    md = markdown_report(compute_metrics(recs, "human", FAST, minimal_search=rows), "t")
    assert "| average of 2 models | — | — | 2.500 | 1.833 | 100.0 [" in md


def test_over_search_counts_no_search_executions_even_without_rows():
    ov = compute_metrics([make_record("q1", labels=OK)], "human", FAST, minimal_search=[])["over_search"]
    assert ov["available"] and (ov["n"], ov["n_no_search"], ov["over_search_pct"]) == (1, 1, 0.0)
    # conditions with search switched off take no part
    off = [
        make_record("q1", labels=OK, condition={"agent.search": False}),
        make_record("q2", labels=OK, condition={"agent.search_cap": 0}, execution_id="c0"),
    ]
    assert not compute_metrics(off, "human", FAST, minimal_search=[])["over_search"]["available"]


def test_marginal_roi_formula_and_threshold():
    # +5 accuracy points over 500 tokens of added cost: 0.05 / 0.5 = 0.1 (10 points per 1k)
    assert marginal_roi(0.05, 500.0) == pytest.approx(0.1)
    assert marginal_roi(-0.01, 2000.0) == pytest.approx(-0.005)
    assert marginal_roi(0.01, ROI_MIN_ADDED_COST) == pytest.approx(1.0)
    assert marginal_roi(0.005, 1.0) is None  # would read +500 % per 1k tokens
    assert marginal_roi(0.005, -3.0) is None
    assert marginal_roi(0.1, math.inf) is None


def _sweep_records(extra_tokens: int):
    recs = []
    for cap in (1, 2):
        cond = {"agent.search_cap": cap}
        correct_q2 = "CORRECT" if cap == 2 else "INCORRECT"
        tokens = 1000 + (extra_tokens if cap == 2 else 0)
        recs += [
            make_record("q1", labels=OK, condition=cond, execution_id=f"a{cap}", output_tokens=tokens),
            make_record(
                "q2", labels={"answer": correct_q2}, condition=cond, execution_id=f"b{cap}", output_tokens=tokens
            ),
        ]
    return recs


def test_sweep_roi_undefined_where_cost_barely_moves(tmp_path):
    barely = compute_metrics(_sweep_records(1), "human", FAST)["search_cap_sweep"][0]
    (step,) = barely["marginal_roi"]
    # accuracy 50 % -> 100 % for 1 more token per query: 0.5 / 0.001 = 500 (50,000 %): undefined
    assert step["added_cost_per_query"] == pytest.approx(1.0)
    assert step["overall_accuracy_per_1k_tokens"] is None and step["overall_accuracy_per_1k_tokens_ci"] is None
    assert "less than 10 tokens" in step["roi_undefined"]
    assert barely["roi_min_added_cost"] == ROI_MIN_ADDED_COST
    moved = compute_metrics(_sweep_records(500), "human", FAST)
    (step,) = moved["search_cap_sweep"][0]["marginal_roi"]
    assert step["overall_accuracy_per_1k_tokens"] == pytest.approx(0.5 / 0.5)
    assert "roi_undefined" not in step
    # the figure beside the table: drawn when there is a sweep, skipped otherwise
    assert plot_marginal_roi(moved, tmp_path / "roi.png") == tmp_path / "roi.png"
    assert (tmp_path / "roi.png").stat().st_size > 0
    assert plot_marginal_roi(compute_metrics(_sweep_records(1)[:2], "human", FAST), tmp_path / "none.png") is None
    md = markdown_report(moved, "t", {"marginal_roi": "figures/marginal_roi.png"})
    assert "![Marginal ROI per search-cap step](figures/marginal_roi.png)" in md
    assert "+100.00" in md  # 100 points per 1k tokens
    assert "less than 10 tokens" in md


def test_report_shows_the_new_tables():
    recs = _three_judges() + [make_record("a1", labels=OK, evidence={"d1": "NEGATIVE", "d2": "POSITIVE"})]
    m = compute_metrics(recs, "human", FAST)
    m["judge_agreement"] = judge_agreement(recs)
    md = markdown_report(m, "t")
    assert "negative docs (answerable)" in md and "50.0 [" in md
    assert "Average pairwise agreement over three or more judges" in md and "66.7%" in md
    assert "Disagreements with the reference judge `human`" in md
