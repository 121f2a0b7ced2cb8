"""The question bootstrap: vectorised sums equal a plain loop, seeds reproduce, intervals behave."""

from __future__ import annotations

import math

import numpy as np
import pytest

from branchpoint.evaluation import MetricsConfig, QuestionBootstrap, compute_metrics, percentile_ci
from branchpoint.evaluation.bootstrap import ratio_samples
from tests.evaluation.builders import make_record


def test_sums_equal_a_loop_over_resampled_questions():
    boot = QuestionBootstrap(50, seed=3)
    questions = ["q1", "q2", "q3"]
    rows = ["q1", "q1", "q3", "q2"]  # q1 has two executions: they travel together
    values = np.array([[1.0, 10.0], [2.0, 20.0], [4.0, 40.0], [8.0, 80.0]])
    got = boot.sums(questions, rows, values)
    counts = boot.counts(questions)
    assert counts.shape == (50, 3) and (counts.sum(axis=1) == 3).all()
    index = {q: i for i, q in enumerate(sorted(questions))}
    for b in range(50):
        expected = sum(counts[b, index[q]] * values[i] for i, q in enumerate(rows))
        assert got[b] == pytest.approx(expected)


def test_same_question_set_same_draws_any_order():
    boot = QuestionBootstrap(20, seed=1)
    assert np.array_equal(boot.counts(["b", "a", "c"]), boot.counts(["c", "a", "b", "a"]))
    assert not np.array_equal(QuestionBootstrap(20, seed=2).counts(["a", "b", "c"]), boot.counts(["a", "b", "c"]))


def test_percentile_ci_ignores_undefined_and_keeps_infinity():
    assert percentile_ci(np.array([math.nan, math.nan])) is None
    assert percentile_ci(None) is None
    assert percentile_ci(np.array([math.inf] * 10)) == [math.inf, math.inf]
    lo, hi = percentile_ci(np.arange(1, 1001, dtype=float))
    assert (lo, hi) == (25.0, 975.0)
    assert list(ratio_samples(np.array([1.0, 1.0, 0.0]), np.array([2.0, 0.0, 0.0]), zero_den_inf=True)) == [
        0.5,
        math.inf,
        math.inf,
    ]


def records(n: int = 30):
    out = []
    for i in range(n):
        out.append(
            make_record(
                f"a{i}",
                labels={"answer": "CORRECT" if i % 3 else "INCORRECT"},
                output_tokens=10 + i,
                condition={"s": 1},
            )
        )
        out.append(
            make_record(
                f"u{i}",
                answerable=False,
                category="AU",
                condition={"s": 1},
                labels={"abstention": "ABSTAINED" if i % 2 else "ANSWERED"},
            )
        )
    return out


def test_metrics_intervals_are_reproducible_with_a_seed():
    cfg = MetricsConfig(bootstrap=300, seed=7)
    a = compute_metrics(records(), "human", cfg)
    b = compute_metrics(list(reversed(records())), "human", cfg)
    assert a["answer_accuracy_ci"] == b["answer_accuracy_ci"]
    assert a["by_condition"]["s=1"]["tpc_ci"] == b["by_condition"]["s=1"]["tpc_ci"]
    c = compute_metrics(records(), "human", MetricsConfig(bootstrap=300, seed=8))
    assert c["answer_accuracy_ci"] != a["answer_accuracy_ci"]
    assert a["bootstrap"]["resamples"] == 300 and a["bootstrap"]["seed"] == 7
    lo, hi = a["answer_accuracy_ci"]
    assert lo < a["answer_accuracy"] < hi and lo >= 0 and hi <= 1


def test_no_bootstrap_means_no_intervals():
    m = compute_metrics(records(4), "human", MetricsConfig(bootstrap=0))
    assert m["answer_accuracy"] is not None and m["answer_accuracy_ci"] is None
    assert m["tpc_ci"] is None


def test_certain_outcomes_have_degenerate_intervals():
    recs = [make_record(f"q{i}", labels={"answer": "CORRECT"}, output_tokens=5) for i in range(5)]
    m = compute_metrics(recs, "human", MetricsConfig(bootstrap=100))
    assert m["answer_accuracy_ci"] == [1.0, 1.0]
    assert m["tpc_ci"] == [5.0, 5.0]


def test_many_records_stay_fast():
    import time

    recs = []
    for c in range(10):
        for i in range(200):
            recs.append(
                make_record(
                    f"q{i}",
                    labels={"answer": "CORRECT" if (i + c) % 2 else "INCORRECT"},
                    condition={"cap": c},
                    execution_id=f"{c}-{i}",
                    output_tokens=i,
                )
            )
    start = time.perf_counter()
    compute_metrics(recs, "human", MetricsConfig(bootstrap=1000))
    assert time.perf_counter() - start < 10
