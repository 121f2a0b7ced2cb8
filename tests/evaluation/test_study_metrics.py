"""The over-searching measurements beyond accuracy and TPC, each on hand-computed traces."""

from __future__ import annotations

import json
import math

import pytest

from branchpoint.evaluation import MetricsConfig, compute_metrics, metrics_json
from branchpoint.traces import Step
from tests.evaluation.builders import make_record
from tests.evaluation.test_metrics import hand_set

FAST = MetricsConfig(bootstrap=200)
OK, BAD = {"answer": "CORRECT"}, {"answer": "INCORRECT"}
ABST, ANS = {"abstention": "ABSTAINED"}, {"abstention": "ANSWERED"}


def test_cost_channels_and_tpc_by_outcome():
    m = compute_metrics(hand_set(), "human", FAST)
    ch = m["tpc_channels"]
    # Σg = 310, Σλx = 875, Σμ|S| = 2000, total 3185, 4 correct
    assert [ch[c]["total"] for c in ("generated", "input", "search")] == [310, 875, 2000]
    assert ch["generated"]["per_correct"] == pytest.approx(310 / 4)
    assert ch["input"]["share"] == pytest.approx(875 / 3185)
    assert sum(ch[c]["per_correct"] for c in ch) == pytest.approx(m["tpc"])
    out = m["tpc_by_outcome"]
    assert {k: v["n"] for k, v in out.items()} == {
        "correct_answer": 2,
        "wrong_answer": 2,
        "correct_abstention": 2,
        "failed_abstention": 1,
    }
    assert out["correct_answer"]["cost_per_execution"] == pytest.approx((1350 + 210) / 2)
    assert out["wrong_answer"]["cost_per_execution"] == pytest.approx((650 + 70) / 2)  # not attempted included
    assert out["correct_abstention"]["cost_per_execution"] == pytest.approx((730 + 35) / 2)
    assert out["failed_abstention"]["cost_per_execution"] == pytest.approx(140)
    assert out["failed_abstention"]["cost_per_execution_ci"] == [140, 140]
    assert sum(v["cost_share"] for v in out.values()) == pytest.approx(1)


def test_every_statistic_has_a_sibling_interval():
    m = compute_metrics(hand_set(), "human", FAST)
    for key in (
        "answer_accuracy",
        "abstention_accuracy",
        "overall_accuracy",
        "tpc",
        "mean_search_calls",
        "mean_wall_s",
        "mean_model_latency_s",
    ):
        assert f"{key}_ci" in m
        assert f"{key}_ci" in m["by_condition"]["policy=free,search=false"]
        assert f"{key}_ci" in m["by_category"]["answerable"]
    lo, hi = m["overall_accuracy_ci"]
    assert 0 <= lo <= m["overall_accuracy"] <= hi <= 1


def test_latency_per_query():
    steps = [Step(kind="decide", latency_s=1.0), Step(kind="search", latency_s=0.5), Step(kind="answer", latency_s=2.0)]
    recs = [make_record("1", labels=OK, steps=steps, wall_s=4.0), make_record("2", labels=OK, wall_s=2.0)]
    m = compute_metrics(recs, "human", FAST)
    assert m["mean_wall_s"] == pytest.approx(3.0)
    assert m["mean_model_latency_s"] == pytest.approx(3.0)  # only executions with model steps
    assert m["mean_model_call_latency_s"] == pytest.approx(1.5)
    assert m["mean_search_latency_s"] == pytest.approx(0.25)


def test_tpc_inf_when_nothing_correct_with_interval():
    recs = [make_record(f"{i}", labels=BAD, output_tokens=10) for i in range(4)]
    m = compute_metrics(recs, "human", FAST)
    assert m["tpc"] == math.inf and m["tpc_ci"] == [math.inf, math.inf]
    assert m["tpc_channels"]["generated"]["per_correct"] == math.inf
    on_disk = json.loads(metrics_json(m))
    assert on_disk["tpc"] == "inf" and on_disk["tpc_ci"] == ["inf", "inf"]


def test_empty_categories_and_conditions():
    recs = [
        make_record("1", labels=OK, condition={"c": "a"}),
        make_record("2", answerable=False, category="AU", status="incomplete", condition={"c": "a"}),
    ]
    m = compute_metrics(recs, "human", FAST)
    cats = m["by_condition"]["c=a"]["by_category"]
    assert list(cats) == ["answerable", "AU"]  # absent categories are absent, not zero
    assert (cats["AU"]["n"], cats["AU"]["n_incomplete"]) == (0, 1)
    assert cats["AU"]["abstention_accuracy"] is None and cats["AU"]["abstention_accuracy_ci"] is None
    assert cats["AU"]["tpc"] is None and cats["AU"]["tpc_ci"] is None
    assert m["abstention_accuracy"] is None and m["abstention_accuracy_ci"] is None
    assert m["search_effect"] == [] and m["search_cap_sweep"] == []
    assert not m["multi_turn"]["available"] and not m["reasoning_effort"]["available"]
    assert not m["over_search"]["available"] and not m["evidence_balance"]["available"]


def test_unparseable_labels_are_left_out_and_counted():
    recs = [
        make_record("1", labels=OK, output_tokens=10),
        make_record("2", labels={"answer": "UNPARSEABLE"}, output_tokens=1000),
    ]
    m = compute_metrics(recs, "human", FAST)
    assert (m["n"], m["n_unparseable"], m["tpc"]) == (1, 1, 10)


def test_evidence_balance():
    def u(qid, evidence, labels):
        return make_record(qid, answerable=False, category="FP", evidence=evidence, labels=labels)

    recs = [
        u("u1", {"d1": "POSITIVE", "d2": "POSITIVE"}, ANS),  # only positive
        u("u2", {"d1": "POSITIVE", "d2": "NEGATIVE"}, ABST),  # positive ≥ negative
        u("u3", {"d1": "POSITIVE", "d2": "NEGATIVE", "d3": "NEGATIVE"}, ABST),  # negative > positive
        u("u4", {"d1": "NEGATIVE"}, ABST),  # only negative
        u("u5", {}, ANS),  # no evidence
        u("u6", {"d1": "UNPARSEABLE", "d2": "POSITIVE"}, ANS),  # only positive, one doc left out
        make_record("a1", labels=OK, evidence={"d9": "NEGATIVE"}),  # answerable: not counted
    ]
    ev = compute_metrics(recs, "human", FAST)["evidence_balance"]
    assert ev["available"]
    groups = {g: (e["n"], e["abstention_accuracy"]) for g, e in ev["groups"].items()}
    assert groups == {
        "only_positive": (2, 0.0),
        "positive_ge_negative": (1, 1.0),
        "negative_gt_positive": (1, 1.0),
        "only_negative": (1, 1.0),
        "no_evidence": (1, 0.0),
    }
    assert (ev["n_documents"], ev["n_negative"], ev["n_unparseable_documents"]) == (9, 4, 1)
    assert ev["negative_share"] == pytest.approx(4 / 9)
    assert (ev["n_unanswerable"], ev["n_with_evidence"]) == (6, 5)
    assert list(ev["by_condition"]) == ["default"]


def test_search_effect_pairs_within_each_model():
    def cond(model, search):
        return {"agent.search": search, "model.name": model}

    recs = []
    for model in ("m1", "m2"):
        recs += [
            make_record("q1", labels=OK, condition=cond(model, True), execution_id=f"{model}-s1", search_calls=1),
            make_record("q2", labels=OK, condition=cond(model, True), execution_id=f"{model}-s2", search_calls=1),
            make_record(
                "q3",
                answerable=False,
                category="AU",
                labels=ANS,
                condition=cond(model, True),
                execution_id=f"{model}-s3",
                search_calls=1,
            ),
            make_record("q1", labels=OK, condition=cond(model, False), execution_id=f"{model}-n1"),
            make_record("q2", labels=BAD, condition=cond(model, False), execution_id=f"{model}-n2"),
            make_record(
                "q3",
                answerable=False,
                category="AU",
                labels=ABST,
                condition=cond(model, False),
                execution_id=f"{model}-n3",
            ),
        ]
    pairs = compute_metrics(recs, "human", FAST)["search_effect"]
    assert [(p["model"], p["paired_on"]) for p in pairs] == [("m1", "agent.search"), ("m2", "agent.search")]
    p = pairs[0]
    assert (p["with"], p["without"]) == ("agent.search=true,model.name=m1", "agent.search=false,model.name=m1")
    assert p["answer_accuracy"]["change"] == pytest.approx(0.5)
    assert p["abstention_accuracy"]["change"] == pytest.approx(-1.0)
    assert p["mean_search_calls"]["change"] == pytest.approx(1.0)
    lo, hi = p["answer_accuracy"]["change_ci"]
    assert lo <= 0.5 <= hi


def test_search_effect_from_cap_zero_and_run_as_model():
    recs = [
        make_record("q", labels=OK, condition={"agent.search_cap": c}, execution_id=f"c{c}", run_id="r")
        for c in (0, 2, 5)
    ]
    pairs = compute_metrics(recs, "human", FAST)["search_effect"]
    assert [(p["with"], p["without"], p["model"]) for p in pairs] == [
        ("agent.search_cap=2", "agent.search_cap=0", "r"),
        ("agent.search_cap=5", "agent.search_cap=0", "r"),
    ]


def test_search_cap_sweep_and_marginal_roi():
    def rec(qid, cap, correct, searches):
        return make_record(
            qid,
            labels=OK if correct else BAD,
            output_tokens=100,
            search_calls=searches,
            condition={"agent.search_cap": cap, "model.name": "m"},
            execution_id=f"{cap}-{qid}",
        )

    recs = [
        rec("q1", 0, False, 0),
        rec("q2", 0, False, 0),  # accuracy 0, mean cost 100
        rec("q1", 1, True, 1),
        rec("q2", 1, False, 1),  # accuracy 0.5, mean cost 600
        rec("q1", 3, True, 3),
        rec("q2", 3, True, 3),  # accuracy 1, mean cost 1600
        make_record("q1", labels=OK, condition={"agent.search_cap": 3, "agent.search": False}),  # search off: no series
    ]
    (sweep,) = compute_metrics(recs, "human", FAST)["search_cap_sweep"]
    assert sweep["cap_key"] == "agent.search_cap" and sweep["other"] == {"model.name": "m"} and sweep["model"] == "m"
    assert [p["cap"] for p in sweep["points"]] == [0, 1, 3]
    assert [p["mean_cost"] for p in sweep["points"]] == [100, 600, 1600]
    assert [p["tpc"] for p in sweep["points"]] == [math.inf, 1200, 1600]
    first, second = sweep["marginal_roi"]
    assert (first["from_cap"], first["to_cap"], first["added_cost_per_query"]) == (0, 1, 500)
    assert first["overall_accuracy_per_1k_tokens"] == pytest.approx(0.5 / 0.5)
    assert second["overall_accuracy_per_1k_tokens"] == pytest.approx(0.5 / 1.0)
    assert second["abstention_accuracy_per_1k_tokens"] is None  # no unanswerable questions


def test_over_search_from_minimal_searches():
    a, b = {"cap": 5}, {"cap": 9}
    # the executions the rows describe (q2 under cap 9 made no search: k = k* = 0, no row)
    searched = {("q1", 5): ("x1", 4), ("q2", 5): ("x2", 2), ("q1", 9): ("x3", 1), ("q2", 9): ("y4", 0)}
    recs = [
        make_record(
            q, labels=OK, condition=c, execution_id=searched[q, c["cap"]][0], search_calls=searched[q, c["cap"]][1]
        )
        for q in ("q1", "q2")
        for c in (a, b)
    ]
    rows = [
        {
            "execution_id": "x1",
            "question_id": "q1",
            "condition": a,
            "searches": 4,
            "minimal_searches": 1,
            "judge": "rule",
        },
        {
            "execution_id": "x2",
            "question_id": "q2",
            "condition": a,
            "searches": 2,
            "minimal_searches": 1,
            "judge": "rule",
        },
        {
            "execution_id": "x3",
            "question_id": "q1",
            "condition": b,
            "searches": 1,
            "minimal_searches": 0,
            "judge": "rule",
        },
    ]
    ov = compute_metrics(recs, "human", FAST, minimal_search=rows)["over_search"]
    assert ov["available"] and ov["judges"] == ["rule"]
    assert ov["by_condition"]["cap=5"]["over_search_pct"] == pytest.approx(200.0)  # mean 3 / mean 1 − 1
    assert ov["by_condition"]["cap=9"]["over_search_pct"] == math.inf
    assert ov["over_search_pct"] == pytest.approx(100 * (7 / 2 - 1))
    assert ov["by_condition"]["cap=5"]["mean_minimal_searches"] == 1
    assert (ov["by_condition"]["cap=9"]["n"], ov["by_condition"]["cap=9"]["n_no_search"]) == (2, 1)
    lo, hi = ov["by_condition"]["cap=5"]["over_search_pct_ci"]
    assert lo <= 200 <= hi


def test_multi_turn_curves():
    recs = []
    for ctx in ("mixed", "unanswerable"):
        for pre in (4, 0, 2):
            cond = {"multi_turn.context": ctx, "multi_turn.preceding": pre}
            recs.append(
                make_record(
                    "u",
                    answerable=False,
                    category="UC",
                    condition=cond,
                    execution_id=f"{ctx}{pre}",
                    labels=ABST if pre == 0 else ANS,
                )
            )
    mt = compute_metrics(recs, "human", FAST)["multi_turn"]
    assert mt["available"]
    assert [s["context"] for s in mt["series"]] == ["mixed", "unanswerable"]
    points = mt["series"][0]["points"]
    assert [p["preceding"] for p in points] == [0, 2, 4]
    assert [p["abstention_accuracy"] for p in points] == [1.0, 0.0, 0.0]


def test_reasoning_effort_rows_in_effort_order():
    recs = [
        make_record(
            "q",
            labels=OK,
            condition={"model.reasoning_effort": e},
            execution_id=e,
            output_tokens=n,
            reasoning_tokens=n // 2,
        )
        for e, n in (("high", 300), ("low", 100), ("medium", 200))
    ]
    re_ = compute_metrics(recs, "human", FAST)["reasoning_effort"]
    assert [r["effort"] for r in re_["rows"]] == ["low", "medium", "high"]
    assert [r["mean_reasoning_tokens"] for r in re_["rows"]] == [50, 100, 150]
