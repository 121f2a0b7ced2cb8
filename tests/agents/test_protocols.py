from branchpoint.agents.protocols import (
    Decision,
    decision_grammar,
    parse_json_decision,
    parse_tagged,
    parse_tool_call,
)
from branchpoint.models.call import ModelCall
from branchpoint.traces import Usage


def call(text: str = "", tool_calls=None, finish: str = "stop") -> ModelCall:
    return ModelCall(text=text, usage=Usage(), latency_s=0.0, finish_reason=finish, tool_calls=tool_calls or [])


def test_json_decision_parses_continuation_of_prefix():
    assert parse_json_decision('search", "text": "capital of Australia"}') == ("search", "capital of Australia")
    assert parse_json_decision('answer", "text": "Canberra"} trailing') == ("answer", "Canberra")
    # stopped after the closing quote: the object is closed for it
    assert parse_json_decision('search", "text": "Shakespeare birthday"') == ("search", "Shakespeare birthday")


def test_json_decision_rejects_invalid_output():
    assert parse_json_decision("Canberra") is None
    assert parse_json_decision('answer", "text": ""}') is None
    assert parse_json_decision('jump", "text": "x"}') is None
    assert parse_json_decision('answer", "text": "unterminated') is None


def test_json_decision_refuses_search_when_not_offered():
    assert parse_json_decision('search", "text": "q"}', allow_search=False) is None


def test_grammar_only_allows_answer_without_search():
    assert '"search' in decision_grammar(True)
    assert "search" not in decision_grammar(False)
    assert decision_grammar(False).startswith("root ::=")


def test_tagged_protocol_ignores_think_and_takes_first_action():
    text = "<think>maybe <answer>wrong</answer></think> <search> capital of Australia </search>"
    assert parse_tagged(text) == ("search", "capital of Australia")
    assert parse_tagged("<answer>Canberra</answer>") == ("answer", "Canberra")
    assert parse_tagged("no tags at all") is None
    assert parse_tagged("<search>q</search>", allow_search=False) is None


def test_tool_call_protocol():
    assert parse_tool_call(call(tool_calls=[{"name": "search", "args": {"query": "x"}}])) == ("search", "x")
    assert parse_tool_call(call(tool_calls=[{"name": "search", "args": '{"query": "y"}'}])) == ("search", "y")
    assert parse_tool_call(call("Canberra.")) == ("answer", "Canberra.")
    assert parse_tool_call(call(tool_calls=[{"name": "other", "args": {}}])) is None
    assert parse_tool_call(call("")) is None


def test_failed_decision_status_reflects_finish_reason():
    assert Decision.failed([call("x", finish="length")]).status == "length"
    assert Decision.failed([call("x")]).status == "malformed"
