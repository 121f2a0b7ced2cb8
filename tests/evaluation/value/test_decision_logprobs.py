"""Decision log probabilities as state features (hand-built parents) and the `logprob` forecaster
fitted on dev rows only."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value.decision_logprobs import (
    DECISION_FEATURES,
    FEATURE,
    decision_features,
    decision_step,
    logprob_forecaster,
)
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import ForecasterUnavailable
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.traces import ExecutionRecord, Step


def decide(p_search: float | None, p_answer: float = 0.0, entropy: float = 0.5) -> Step:
    if p_search is None:
        return Step(kind="decide", action="answer")
    lp = {"token": "x", "logprob": -0.1, "p_search": p_search, "p_answer": p_answer, "entropy": entropy}
    return Step.model_validate({"kind": "decide", "action": "search", "logprobs": lp})


def parent(steps: list[Step]) -> ExecutionRecord:
    return ExecutionRecord(execution_id="p", run_id="r", question_id="q", question="?", answerable=True, steps=steps)


def test_the_decision_made_from_the_state_is_read() -> None:
    steps = [
        decide(0.6, 0.2),  # 0: decided at the initial state
        Step(kind="search", query="q"),  # 1
        decide(None),  # 2: a malformed try at after_search_1 ...
        decide(0.1, 0.3),  # 3: ... and its retry, which decided
        Step(kind="answer"),
    ]
    p = parent(steps)
    assert decision_step(p, 0, "initial") is steps[0]
    assert decision_step(p, 2, "after_search_k") is steps[3]  # the one of the group with log probabilities
    assert decision_step(p, 1, "pending_query") is steps[0]  # the decision that chose the pending query
    assert decision_step(p, 4, "after_search_k") is None  # no decide step from there
    assert decision_step(None, 0, "initial") is None and decision_step(p, None, "initial") is None


def table(keys: list[tuple[str, str]], prefix: list[int], kinds: list[str], y_t, y_s) -> StateTable:
    n = len(keys)
    role = lambda y: RoleOutcomes([np.array(v, dtype=float) for v in y], [np.ones(len(v)) for v in y], [[]] * n)
    return StateTable(
        keys=keys,
        question_id=[f"q{i}" for i in range(n)],
        question=["?"] * n,
        stratum=np.array(["s"] * n, dtype=object),
        component=np.array([f"c{i}" for i in range(n)], dtype=object),
        boundary=kinds,
        boundary_kind=np.array(kinds, dtype=object),
        t_action=["THINK"] * n,
        s_action=["SEARCH"] * n,
        prefix_steps=prefix,
        search_budget=[None] * n,
        think=role(y_t),
        search=role(y_s),
    )


def test_features_share_entropy_and_a_missing_flag() -> None:
    parents = {
        "a": parent([decide(0.6, 0.2, entropy=0.8)]),
        "b": parent([decide(0.1, 0.3, entropy=0.4)]),
        "c": parent([decide(None)]),  # no log probabilities
    }
    states = table([("a", "k"), ("b", "k"), ("c", "k")], [0, 0, 0], ["initial"] * 3, [[0, 1]] * 3, [[1, 1]] * 3)
    x = decision_features(states, parents)
    assert x is not None and x.shape == (3, len(DECISION_FEATURES))
    assert x[0].tolist() == pytest.approx([0.75, 0.8, 0.0])
    assert x[1].tolist() == pytest.approx([0.25, 0.4, 0.0])
    assert x[2].tolist() == pytest.approx([0.5, 0.6, 1.0])  # the others' means, flagged
    assert decision_features(states, {"c": parents["c"]}) is None  # none has them: no feature at all


def test_the_logprob_forecaster_follows_the_agents_own_p_search_and_reads_dev_rows_only() -> None:
    shares = np.linspace(0.05, 0.95, 12)
    parents = {f"p{i}": parent([decide(float(s), float(1 - s))]) for i, s in enumerate(shares)}
    keys = [(f"p{i}", "k") for i in range(12)]
    # the more the agent wanted to search, the more SEARCH helps: THINK fails, SEARCH succeeds
    y_t = [[1, 1, 1, 0] if s < 0.5 else [0, 0, 0, 1] for s in shares]
    y_s = [[0, 0, 1, 0] if s < 0.5 else [1, 1, 1, 0] for s in shares]
    states = table(keys, [0] * 12, ["initial"] * 12, y_t, y_s)
    states.features[FEATURE] = decision_features(states, parents)
    dev = np.arange(12) % 2 == 0
    fc = logprob_forecaster(DevView.of(states, dev), dev)
    gain = fc.q_search - fc.q_think
    assert np.all(np.diff(gain) > 0)  # monotone in the agent's P(search)
    assert gain[0] < 0 < gain[-1]
    # test rows' outcomes do not move it: flip every test outcome, refit, same forecast
    flipped = table(
        keys, [0] * 12, ["initial"] * 12,
        [y if d else [1 - v for v in y] for y, d in zip(y_t, dev)],
        [y if d else [1 - v for v in y] for y, d in zip(y_s, dev)],
    )  # fmt: skip
    flipped.features[FEATURE] = states.features[FEATURE]
    again = logprob_forecaster(DevView.of(flipped, dev), dev)
    assert np.allclose(again.q_think, fc.q_think) and np.allclose(again.q_search, fc.q_search)


def test_the_logprob_forecaster_is_unavailable_without_log_probabilities() -> None:
    states = table([("a", "k"), ("b", "k")], [0, 0], ["initial"] * 2, [[0, 1]] * 2, [[1, 1]] * 2)
    dev = np.array([True, True])
    with pytest.raises(ForecasterUnavailable, match="model.logprobs"):
        logprob_forecaster(DevView.of(states, dev), dev)
