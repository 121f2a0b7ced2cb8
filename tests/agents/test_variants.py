"""Prompt variants (the mitigation study), self-evaluation, and multi-turn history in prompts."""

from __future__ import annotations

from branchpoint.agents import AgentContext, build_graph, initial_state, resolve_policy
from branchpoint.agents.prompts import FEWSHOT_CHAT_EXAMPLES, SELF_EVAL_PROMPT, fewshot_prompt, system_prompt
from branchpoint.models import ScriptedModel
from branchpoint.tools import SearchTool
from tests.graphs import invoke

HISTORY = [{"question": "Who painted the Mona Lisa?", "answer": "Leonardo da Vinci"}]


def run(model, source, prompt="abstention", history=None, policy="native"):
    ctx = AgentContext(model=model, search=SearchTool({"mem": source}, "mem"), search_cap=2, prompt=prompt)
    graph = build_graph(resolve_policy(policy))
    return invoke(graph, initial_state("q", "What is the capital of Australia?", "mem", history), context=ctx)


def test_system_prompt_variants_differ_as_documented():
    plain = system_prompt(tools=True, allow_search=True, variant="plain")
    aware = system_prompt(tools=True, allow_search=True, variant="abstention")
    fewshot = system_prompt(tools=True, allow_search=True, variant="fewshot")
    assert "cannot be answered" not in plain and "cannot be answered" in aware
    assert fewshot.startswith(aware) and fewshot.endswith(FEWSHOT_CHAT_EXAMPLES)


def test_self_eval_abstain_ends_with_an_abstention(keyword_source):
    model = ScriptedModel(["ABSTAIN: nobody recorded that."])
    out = run(model, keyword_source, prompt="self_eval")
    assert out["final_answer"] == "I don't know: nobody recorded that."
    assert out["searches"] == 0 and model.calls == 1
    assert SELF_EVAL_PROMPT in model.prompts[0]


def test_self_eval_answerable_goes_on_and_keeps_the_cost(keyword_source):
    model = ScriptedModel(["ANSWERABLE", "Canberra"])
    out = run(model, keyword_source, prompt="self_eval")
    assert out["final_answer"] == "Canberra"
    assert [s["kind"] for s in out["steps"]] == ["decide", "decide"]  # both calls are recorded


def test_history_comes_before_the_question_in_chat_and_fewshot(keyword_source):
    model = ScriptedModel(["Canberra"])
    run(model, keyword_source, history=HISTORY)
    prompt = model.prompts[0]
    assert prompt.index("user: Who painted the Mona Lisa?") < prompt.index("assistant: Leonardo da Vinci")
    assert prompt.index("assistant: Leonardo da Vinci") < prompt.index("user: What is the capital of Australia?")
    text = fewshot_prompt("What is the capital of Australia?", [], True, 40, HISTORY)
    assert text.index('"text": "Leonardo da Vinci"') < text.rindex("Question: What is the capital of Australia?")
