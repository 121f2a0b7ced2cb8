"""Metrics on a hand-built set of records, with every number worked out by hand."""

from __future__ import annotations

import json
import math

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation import (
    MetricsConfig,
    compute_metrics,
    condition_label,
    metrics_json,
    tpc,
)
from tests.evaluation.builders import METRICS_KEYS, make_record

A = {"search": True, "policy": "constrained"}  # label "policy=constrained,search=true"
B = {"policy": "free", "search": False}  # label "policy=free,search=false"


def hand_set():
    """Eight records; cost = out + 0.25·in + 500·searches noted per record."""
    ok, bad, na = {"answer": "CORRECT"}, {"answer": "INCORRECT"}, {"answer": "NOT_ATTEMPTED"}
    abst, ans = {"abstention": "ABSTAINED"}, {"abstention": "ANSWERED"}
    r = make_record
    return [
        # cost 100 + 250 + 1000 = 1350, correct
        r("1", condition=A, labels=ok, output_tokens=100, input_tokens=1000, search_calls=2),
        # cost 50 + 100 + 500 = 650, wrong
        r("2", condition=A, labels=bad, output_tokens=50, input_tokens=400, search_calls=1),
        # cost 20 + 50 = 70, not attempted
        r("3", condition=B, labels=na, output_tokens=20, input_tokens=200),
        # AU, cost 30 + 200 + 500 = 730, abstained (correct)
        r(
            "4",
            answerable=False,
            category="AU",
            condition=A,
            labels=abst,
            output_tokens=30,
            input_tokens=800,
            search_calls=1,
        ),
        # FP, cost 40 + 100 = 140, answered (wrong)
        r("5", answerable=False, category="FP", condition=B, labels=ans, output_tokens=40, input_tokens=400),
        # UC, cost 10 + 25 = 35, abstained (correct)
        r("6", answerable=False, category="UC", condition=B, labels=abst, output_tokens=10, input_tokens=100),
        # cost 60 + 150 = 210, correct
        r("7", condition=B, labels=ok, output_tokens=60, input_tokens=600),
        # incomplete: excluded from everything, no judgment needed
        r("8", condition=A, status="incomplete", answer=None, output_tokens=999, input_tokens=9999, search_calls=9),
    ]


@pytest.fixture
def metrics():
    return compute_metrics(hand_set(), "human", MetricsConfig())


def test_required_keys(metrics):
    assert set(metrics) >= METRICS_KEYS
    assert (metrics["judge"], metrics["lam"], metrics["mu"]) == ("human", 0.25, 500)


def test_overall_numbers(metrics):
    assert (metrics["n"], metrics["n_answerable"], metrics["n_unanswerable"]) == (7, 4, 3)
    assert metrics["n_incomplete"] == 1
    assert metrics["answer_accuracy"] == pytest.approx(2 / 4)
    assert metrics["abstention_accuracy"] == pytest.approx(2 / 3)
    assert metrics["overall_accuracy"] == pytest.approx(4 / 7)
    # (1350 + 650 + 70 + 730 + 140 + 35 + 210) / 4 correct
    assert metrics["tpc"] == pytest.approx(3185 / 4)
    assert metrics["mean_search_calls"] == pytest.approx(4 / 7)
    assert metrics["mean_input_tokens"] == pytest.approx(3500 / 7)
    assert metrics["mean_output_tokens"] == pytest.approx(310 / 7)


def test_by_category(metrics):
    cats = metrics["by_category"]
    assert list(cats) == ["answerable", "AU", "FP", "UC"]
    assert (cats["answerable"]["n"], cats["answerable"]["n_incomplete"]) == (4, 1)
    assert cats["answerable"]["answer_accuracy"] == pytest.approx(0.5)
    assert cats["answerable"]["abstention_accuracy"] is None
    assert cats["answerable"]["tpc"] == pytest.approx((1350 + 650 + 70 + 210) / 2)
    assert cats["AU"]["abstention_accuracy"] == 1.0 and cats["AU"]["tpc"] == pytest.approx(730)
    assert cats["FP"]["abstention_accuracy"] == 0.0 and cats["FP"]["tpc"] == math.inf
    assert cats["UC"]["answer_accuracy"] is None and cats["UC"]["tpc"] == pytest.approx(35)


def test_by_condition(metrics):
    conds = metrics["by_condition"]
    assert list(conds) == ["policy=constrained,search=true", "policy=free,search=false"]
    a, b = conds.values()
    assert a["condition"] == A
    assert (a["n"], a["n_incomplete"], a["n_answerable"], a["n_unanswerable"]) == (3, 1, 2, 1)
    assert a["answer_accuracy"] == pytest.approx(1 / 2)
    assert a["abstention_accuracy"] == pytest.approx(1.0)
    assert a["overall_accuracy"] == pytest.approx(2 / 3)
    assert a["tpc"] == pytest.approx((1350 + 650 + 730) / 2)
    assert list(a["by_category"]) == ["answerable", "AU"]
    assert b["answer_accuracy"] == pytest.approx(1 / 2)
    assert b["abstention_accuracy"] == pytest.approx(1 / 2)
    assert b["overall_accuracy"] == pytest.approx(2 / 4)
    assert b["tpc"] == pytest.approx((70 + 140 + 35 + 210) / 2)
    assert b["by_category"]["UC"]["abstention_accuracy"] == 1.0


def test_tpc_weights_are_configurable():
    recs = hand_set()
    cfg = MetricsConfig(lam=0.0, mu=0.0)
    assert tpc(recs, "human", cfg) == pytest.approx(310 / 4)


def test_tpc_inf_when_nothing_correct():
    recs = [
        make_record("1", labels={"answer": "INCORRECT"}, output_tokens=10),
        make_record("2", answerable=False, category="AU", labels={"abstention": "ANSWERED"}),
    ]
    assert tpc(recs, "human") == math.inf
    m = compute_metrics(recs, "human")
    assert m["tpc"] == math.inf
    assert json.loads(metrics_json(m))["tpc"] == "inf"


def test_all_incomplete_gives_undefined_numbers():
    m = compute_metrics([make_record("1", status="incomplete")], "human")
    assert (m["n"], m["n_incomplete"]) == (0, 1)
    assert m["answer_accuracy"] is None and m["tpc"] is None and m["mean_search_calls"] is None


def test_retried_execution_replaces_its_failure():
    first = make_record("1", status="incomplete", answer=None, output_tokens=999)
    retry = make_record("1", labels={"answer": "CORRECT"}, output_tokens=10)
    m = compute_metrics([first, retry], "human")
    assert (m["n"], m["n_incomplete"], m["tpc"]) == (1, 0, 10)


def test_missing_judgment_names_execution_and_judge():
    with pytest.raises(InputError, match=r'execution e-1: no answer judgment from judge "rule"'):
        compute_metrics([make_record("1", labels={"answer": "CORRECT"})], "rule")


def test_condition_label():
    assert condition_label({}) == "default"
    assert condition_label({"search_cap": 3, "effort": "low", "x": None}) == ("effort=low,search_cap=3,x=null")


def test_colliding_condition_labels_are_rejected():
    recs = [make_record("1", condition={"cap": 1}), make_record("2", condition={"cap": "1"})]
    with pytest.raises(InputError, match="share the label"):
        compute_metrics(recs, "human")


def test_metrics_config_validates():
    with pytest.raises(ValueError):
        MetricsConfig(lam=-1)
