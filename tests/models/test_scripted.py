"""ScriptedModel: the deterministic stand-in model the agent and runner tests rely on."""

from __future__ import annotations

import pytest

from branchpoint.models import ScriptedModel, TransportError

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
TOOL_REPLY = {
    "text": "",
    "tool_calls": [{"name": "search", "args": {"query": "capital of Australia"}}],
    "finish_reason": "tool_calls",
}


def test_replies_in_order_and_records_prompts() -> None:
    model = ScriptedModel(["one", "two", "three"])
    assert [model.complete(f"p{i}").text for i in range(3)] == ["one", "two", "three"]
    assert model.prompts == ["p0", "p1", "p2"]
    assert model.calls == 3
    assert model.name == "scripted"


def test_cycling() -> None:
    model = ScriptedModel(["a", "b"], cycle=True)
    assert [model.complete("p").text for _ in range(5)] == ["a", "b", "a", "b", "a"]


def test_exhaustion_raises() -> None:
    model = ScriptedModel(["only"])
    model.complete("p")
    with pytest.raises(RuntimeError, match="exhausted after 1"):
        model.complete("p")


def test_empty_script_with_cycle_is_exhausted_not_a_zero_division() -> None:
    with pytest.raises(RuntimeError, match="exhausted"):
        ScriptedModel([], cycle=True).complete("p")


def test_needs_exactly_one_of_replies_or_responder() -> None:
    with pytest.raises(ValueError):
        ScriptedModel()
    with pytest.raises(ValueError):
        ScriptedModel(["x"], responder=lambda p: p)


def test_responder_sees_the_prompt() -> None:
    model = ScriptedModel(responder=lambda prompt: prompt.upper())
    assert model.complete("hello there").text == "HELLO THERE"
    chat = model.chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert chat.text == "SYSTEM: BE BRIEF\nUSER: HI"
    assert model.prompts[-1] == "system: be brief\nuser: hi"


def test_responder_may_return_a_dict() -> None:
    model = ScriptedModel(responder=lambda prompt: {"text": "x", "reasoning": "because"})
    call = model.chat([{"role": "user", "content": None}])
    assert call.reasoning == "because"
    assert model.prompts == ["user: "]


def test_stop_strings_cut_the_text() -> None:
    model = ScriptedModel(['{"action": "answer"}\nQuestion: next', "a STOP b END c"])
    assert model.complete("p", stop=["\n"]).text == '{"action": "answer"}'
    assert model.complete("p", stop=["END", "STOP"]).text == "a "


def test_stop_string_absent_leaves_text() -> None:
    assert ScriptedModel(["no stops here"]).complete("p", stop=["\n"]).text == "no stops here"


def test_max_tokens_truncation_gives_length() -> None:
    model = ScriptedModel(["one two three four five", "one two"])
    call = model.complete("p", max_tokens=3)
    assert call.text == "one two three"
    assert call.finish_reason == "length"
    assert call.usage.output_tokens == 3
    short = model.complete("p", max_tokens=3)
    assert short.text == "one two"
    assert short.finish_reason == "stop"


def test_usage_counts_whitespace_tokens() -> None:
    call = ScriptedModel(["an answer of five tokens"]).complete("a prompt with six tokens here")
    assert call.usage.input_tokens == 6
    assert call.usage.output_tokens == 5
    assert call.usage.reasoning_tokens is None
    assert call.latency_s == 0.0


def test_fail_first_raises_transport_errors_then_replies() -> None:
    model = ScriptedModel(["ok"], fail_first=2)
    for _ in range(2):
        with pytest.raises(TransportError):
            model.complete("p")
    assert model.complete("p").text == "ok"
    assert model.calls == 3
    assert model.prompts == ["p"]  # failed calls record no prompt and consume no reply


def test_tool_calls_kept_when_tools_offered() -> None:
    call = ScriptedModel([TOOL_REPLY]).chat([{"role": "user", "content": "q"}], tools=TOOLS)
    assert call.tool_calls == [{"name": "search", "args": {"query": "capital of Australia"}}]
    assert call.finish_reason == "tool_calls"


def test_tool_calls_dropped_when_no_tools_offered() -> None:
    model = ScriptedModel([TOOL_REPLY, TOOL_REPLY])
    assert model.chat([{"role": "user", "content": "q"}]).tool_calls == []
    assert model.chat([{"role": "user", "content": "q"}], tools=[]).tool_calls == []


def test_replies_are_not_mutated_between_cycles() -> None:
    reply = {"text": "one two three", "tool_calls": [{"name": "search", "args": {"query": "q"}}]}
    model = ScriptedModel([reply], cycle=True)
    model.chat([{"role": "user", "content": "q"}])  # drops tool calls on its copy
    model.complete("p", max_tokens=1)
    call = model.chat([{"role": "user", "content": "q"}], tools=TOOLS)
    assert call.text == "one two three"
    assert call.tool_calls == [{"name": "search", "args": {"query": "q"}}]
    assert reply["tool_calls"] == [{"name": "search", "args": {"query": "q"}}]
