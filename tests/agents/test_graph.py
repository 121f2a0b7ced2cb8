"""The agent state machine with the scripted model: search, cap, forced answer, malformed, policies."""

from __future__ import annotations

import pytest

from branchpoint.agents import (
    AgentContext,
    Decision,
    apply_decision,
    build_graph,
    initial_state,
    policy,
    recursion_limit,
    resolve_policy,
)
from branchpoint.agents.protocols import decision_grammar
from branchpoint.errors import InputError
from branchpoint.models import ScriptedModel
from branchpoint.registry import REGISTRY
from branchpoint.tools import SearchTool
from tests.graphs import invoke

Q = "What is the capital of Australia?"


def run(policy_name, model, source, *, cap=3, search=True):
    ctx = AgentContext(
        model=model,
        search=SearchTool({"mem": source}, "mem", top_k=2) if search else None,
        search_cap=cap,
    )
    graph = build_graph(resolve_policy(policy_name))
    cfg = {"recursion_limit": recursion_limit(cap)}
    return invoke(graph, initial_state("q1", Q, "mem"), cfg, context=ctx)


def test_constrained_searches_then_answers(keyword_source):
    model = ScriptedModel(['search", "text": "capital of Australia"}', 'answer", "text": "Canberra"}'])
    out = run("constrained", model, keyword_source)
    assert out["final_answer"] == "Canberra"
    assert out["searches"] == 1
    assert [s["kind"] for s in out["steps"]] == ["decide", "search", "decide"]
    assert out["steps"][1]["retrieved"][0]["doc_id"] == "d-canberra"
    # the second prompt shows the evidence the search returned
    assert "Canberra is the capital city of Australia" in model.prompts[1]
    assert keyword_source.queries == ["capital of Australia"]


def test_search_cap_forces_final_answer(keyword_source):
    model = ScriptedModel(['search", "text": "a"}', 'search", "text": "b"}', 'answer", "text": "Canberra"}'])
    out = run("constrained", model, keyword_source, cap=2)
    assert out["searches"] == 2
    assert [s["kind"] for s in out["steps"]] == ["decide", "search", "decide", "search", "forced_answer"]
    assert out["final_answer"] == "Canberra"
    # the forced answer reuses the search prompt (server prompt cache) with an answer-only grammar
    assert "may search an encyclopedia" in model.prompts[-1]
    assert model.requests[-1]["grammar"] == decision_grammar(allow_search=False)
    # the forced answer's step keeps both the parsed answer and the raw completion
    forced = out["steps"][-1]
    assert forced["text"] == "Canberra" and forced["raw"] == 'answer", "text": "Canberra"}'


def test_chat_forced_answer_keeps_raw_and_parsed_text(keyword_source):
    model = ScriptedModel(
        [
            {"text": "", "tool_calls": [{"name": "search", "args": {"query": "q"}, "id": "c1"}]},
            "<think>hmm</think>Canberra",
        ]
    )
    out = run("native", model, keyword_source, cap=1)
    forced = out["steps"][-1]
    assert forced["kind"] == "forced_answer" and forced["text"] == "Canberra"
    assert forced["raw"] == "<think>hmm</think>Canberra" and out["final_answer"] == "Canberra"
    # the search's model turn (its tool-call id) is in the transcript the forced prompt was built from
    assert out["transcript"][0]["turn"]["call_id"] == "c1"


def test_no_search_condition_never_calls_the_tool(keyword_source):
    model = ScriptedModel(['answer", "text": "Sydney"}'])
    out = run("constrained", model, keyword_source, search=False)
    assert out["final_answer"] == "Sydney"
    assert out["searches"] == 0
    assert keyword_source.queries == []
    assert "Evidence:" not in model.prompts[0]


def test_unparseable_output_retries_with_grammar_then_malformed(keyword_source):
    model = ScriptedModel(["gibberish", "more gibberish"])
    out = run("constrained", model, keyword_source)
    assert out["status"] == "malformed"
    assert out["final_answer"] is None
    assert len(out["steps"]) == 2  # the unconstrained call and the grammar retry, both recorded


def test_grammar_retry_recovers(keyword_source):
    model = ScriptedModel(["gibberish", 'answer", "text": "Canberra"}'])
    out = run("constrained", model, keyword_source)
    assert out["status"] == "ok" and out["final_answer"] == "Canberra"


def test_native_tool_call_policy(keyword_source):
    model = ScriptedModel(
        [
            {"text": "", "tool_calls": [{"name": "search", "args": {"query": "capital of Australia"}}]},
            {"text": "Canberra"},
        ]
    )
    out = run("native", model, keyword_source)
    assert out["final_answer"] == "Canberra"
    assert out["searches"] == 1
    assert "tool: Doc 1(Title: Canberra)" in model.prompts[1]


def test_tagged_policy(keyword_source):
    model = ScriptedModel(
        ["<think>look it up</think><search>capital of Australia</search>", "<answer>Canberra</answer>"]
    )
    out = run("tagged", model, keyword_source)
    assert out["final_answer"] == "Canberra"
    assert "<information>" in model.prompts[1]


def test_no_search_policy_answers_directly(keyword_source):
    model = ScriptedModel([{"text": "Canberra", "tool_calls": [{"name": "search", "args": {"query": "x"}}]}])
    out = run("no_search", model, keyword_source)
    assert out["final_answer"] == "Canberra"
    assert out["searches"] == 0


def test_length_status_when_answer_runs_out_of_tokens(keyword_source):
    model = ScriptedModel([{"text": "", "finish_reason": "length"}, {"text": "", "finish_reason": "length"}])
    out = run("native", model, keyword_source)
    assert out["status"] == "length"


def test_registry_and_unknown_policy():
    assert {"constrained", "native", "no_search", "tagged"} <= set(REGISTRY.names("policy"))
    with pytest.raises(InputError, match='unknown policy "nope" \\(known: constrained, native'):
        resolve_policy("nope")
    with pytest.raises(InputError, match="cannot import module"):
        resolve_policy("no_such_module_xyz:fn")
    with pytest.raises(InputError, match='has no attribute "missing_fn"'):
        resolve_policy("tests.agents.test_graph:missing_fn")


def search_once_then_answer(state, runtime):
    """A user policy: search the question once, then answer with the first passage's title."""
    ctx = runtime.context
    if state["searches"] == 0:
        return apply_decision(state, Decision("search", state["question"]), ctx)
    return apply_decision(state, Decision("answer", state["evidence"][0]["title"]), ctx)


def test_user_policy_by_module_path(keyword_source):
    out = run("tests.agents.test_graph:search_once_then_answer", ScriptedModel([]), keyword_source)
    assert out["final_answer"] == "Canberra"


def test_policy_decorator_registers_a_new_policy(keyword_source):
    @policy("test_always_answer")
    def always_answer(state, runtime):
        return apply_decision(state, Decision("answer", "I don't know"), runtime.context)

    out = run("test_always_answer", ScriptedModel([]), keyword_source)
    assert out["final_answer"] == "I don't know"


def test_policy_that_ignores_the_cap_gets_a_forced_answer(keyword_source):
    @policy("test_search_forever")
    def search_forever(state, runtime):
        return apply_decision(state, Decision("search", "more"), runtime.context)

    out = run("test_search_forever", ScriptedModel(["Canberra"]), keyword_source, search=False)
    assert out["searches"] == 0
    assert out["steps"][-1]["kind"] == "forced_answer"
    assert out["final_answer"] == "Canberra"
