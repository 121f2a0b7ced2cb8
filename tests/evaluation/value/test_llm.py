"""The LLM forecaster with the scripted model: public history only, JSON replies, malformed → 0.5."""

from __future__ import annotations

import json

import pytest

from branchpoint.evaluation.value.llm import FORECAST_GRAMMAR, describe_history, llm_forecasts, parse_forecast
from branchpoint.evaluation.value.outcomes import build_states
from branchpoint.models import ScriptedModel
from branchpoint.traces import ExecutionRecord
from tests.evaluation.value.helpers import fork_record


def parent_record() -> ExecutionRecord:
    doc = lambda i, title: {"doc_id": f"d{i}", "score": 1.0, "title": title, "text": f"{title} passage."}
    return ExecutionRecord.model_validate(
        dict(
            execution_id="p1",
            run_id="run",
            question_id="q1",
            question="What is the capital of Australia?",
            answerable=True,
            gold_answers=["Canberra"],
            final_answer="SECRET FINAL ANSWER",
            steps=[
                {"kind": "decide", "action": "search", "text": "capital of Australia"},
                {
                    "kind": "search",
                    "query": "capital of Australia",
                    "source": "demo",
                    "retrieved": [doc(1, "Canberra")],
                },
                {"kind": "decide", "action": "search", "text": "Australian parliament"},
                {"kind": "search", "query": "Australian parliament", "source": "demo", "retrieved": [doc(2, "Hidden")]},
                {"kind": "answer", "action": "answer", "text": "SECRET FINAL ANSWER"},
            ],
        )
    )


def states_at_two_checkpoints():
    recs = []
    for ckpt, boundary, steps, actions in (
        ("c-after", "after_search_1", 2, ("THINK", "SEARCH")),
        ("c-pending", "pending_query", 3, ("STOP", "SEARCH")),
    ):
        for action in actions:
            for rep in range(2):
                budget = {"fork.search_budget": 3} if action == "SEARCH" else {}
                recs.append(
                    fork_record("p1", ckpt, action, rep, boundary=boundary, prefix_steps=steps, condition=budget)
                )
    return build_states(recs, judge="given")


def test_parse_forecast():
    assert parse_forecast('{"q_think": 0.25, "q_search": 1}') == (0.25, 1.0)
    assert parse_forecast('Sure! {"q_think": 0.3, "q_search": 0.6} hope that helps') == (0.3, 0.6)
    for bad in (
        "",
        "no json",
        '{"q_think": 0.3}',
        '{"q_think": 1.3, "q_search": 0.5}',
        '{"q_think": true, "q_search": 0.5}',
        '{"q_think": "0.3", "q_search": 0.5}',
    ):
        assert parse_forecast(bad) is None, bad


def test_history_is_the_public_prefix_only():
    steps = parent_record().steps
    text = describe_history(steps[:3])
    assert 'searched "capital of Australia" on demo' in text and "Canberra passage." in text
    assert 'decided to search "Australian parliament" (not run yet)' in text
    assert "Hidden" not in text and "SECRET" not in text
    assert describe_history([]) == "(nothing yet: no search has been made)"


def test_llm_forecaster_with_scripted_replies_and_malformed_ones():
    states = states_at_two_checkpoints()
    model = ScriptedModel([json.dumps({"q_think": 0.2, "q_search": 0.9}), "I think search is better"])
    fc = llm_forecasts(model, states, {"p1": parent_record()}, actor="gemma-3-270m (search cap 2)")
    assert fc.q_think.tolist() == [0.2, 0.5] and fc.q_search.tolist() == [0.9, 0.5]
    assert fc.info["n_calls"] == 2 and fc.info["n_malformed"] == 1 and fc.info["n_no_history"] == 0
    assert fc.info["malformed_examples"] == ["I think search is better"]
    first, second = model.prompts
    assert "Agent: gemma-3-270m (search cap 2)" in first and "Question: question of p1?" in first
    assert "Action THINK (THINK): answer now" in first and "up to 3 more searches" in first
    assert "decided to search" not in first and "Canberra passage." in first
    assert "Action THINK (STOP): cancel the pending query" in second
    assert 'decided to search "Australian parliament"' in second
    assert "SECRET" not in first + second and "Hidden" not in first + second


def test_missing_parent_is_forecast_from_the_question_and_counted():
    states = states_at_two_checkpoints()
    fc = llm_forecasts(ScriptedModel(['{"q_think": 0.4, "q_search": 0.4}'], cycle=True), states, {})
    assert fc.info["n_no_history"] == 2 and fc.q_think.tolist() == pytest.approx([0.4, 0.4])


def test_completion_style_sends_the_forecast_grammar():
    states = states_at_two_checkpoints()
    model = ScriptedModel(['{"q_think": 0.25, "q_search": 0.75}'], cycle=True)
    fc = llm_forecasts(model, states, {"p1": parent_record()}, style="completion")
    assert fc.q_think.tolist() == [0.25, 0.25] and fc.info["n_malformed"] == 0
    assert all(r["grammar"] == FORECAST_GRAMMAR and r["stop"] == ["\n"] for r in model.requests)
    assert model.prompts[0].endswith("JSON: ")
