"""The simulated server behaves as vLLM 0.33.0 at the wire: one test per rule, each citing the
vLLM source it mirrors (paths inside the `vllm` package of the 0.33.0 wheel, commit g4ba787ec9)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from branchpoint.agents import prompts
from branchpoint.agents.protocols import decision_grammar, parse_json_decision
from branchpoint.errors import InputError
from branchpoint.models import ModelSpec, OpenAICompatibleClient
from branchpoint.models.server_kind import detect_server_kind
from branchpoint.models.spec import SimServerSpec
from branchpoint.sim.server import SimState, build_state, create_app
from branchpoint.sim.vllm_rules import AUTO_TOOLS_MESSAGE, ServerFlags, apply_stop
from branchpoint.tools.search import SEARCH_TOOL_SCHEMA
from tests.models.http_fakes import recorded

QUESTION = "Who painted the Mona Lisa?"


def sim(profile: str = "over_searching", **flags: Any) -> tuple[TestClient, SimState]:
    state = build_state(profile, latency_scale=0.0, flags=ServerFlags(**flags))
    return TestClient(create_app(state)), state


def chat(client: TestClient, state: SimState, **body: Any) -> httpx.Response:
    body.setdefault("messages", [{"role": "user", "content": QUESTION}])
    return client.post("/v1/chat/completions", json={"model": state.served_name, "seed": 3, **body})


@pytest.fixture
def served() -> Iterator[tuple[str, SimState]]:
    """The simulator on a real loopback port (for branchpoint's own client)."""
    import uvicorn

    from branchpoint.models.server import free_port

    state = build_state("instruct", latency_scale=0.0)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(state), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1", state
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# --- GET /version: entrypoints/serve/instrumentator/basic.py:53-56 ----------------------------


def test_version_has_vllms_shape_so_branchpoint_detects_vllm(served: tuple[str, SimState]) -> None:
    base_url, _ = served
    body = httpx.get(base_url.removesuffix("/v1") + "/version").json()
    assert set(body) == set(recorded("vllm_version.json")) and body["version"].startswith("0.33.0")
    assert detect_server_kind(base_url) == "vllm"


def test_the_completion_policys_grammar_fallback_goes_through_structured_outputs(
    served: tuple[str, SimState],
) -> None:
    """branchpoint sends a vLLM server `structured_outputs` (not llama.cpp's `grammar`, which vLLM
    ignores), and the simulator honours it: a grammar call is never malformed."""
    base_url, state = served
    spec = ModelSpec(provider="openai", base_url=base_url, name=state.served_name, temperature=1.0, seed=0)
    model = OpenAICompatibleClient(spec)
    prompt = prompts.fewshot_prompt(QUESTION, [], True, 60)
    for seed in range(30):
        call = model.with_seed(seed).complete(prompt, stop=["\n"], grammar=decision_grammar(True), max_tokens=48)
        assert call.finish_reason == "length" or parse_json_decision(call.text, allow_search=True) is not None
    assert model.server_kind() == "vllm"
    stats = httpx.get(base_url.removesuffix("/v1") + "/v1/sim/stats").json()
    assert stats["ignored_fields"] == {} and stats["requests"]["completion"] == 30


# --- ignored fields: entrypoints/serve/engine/protocol.py:24-33, 37-76 (extra="allow") --------------


def test_removed_guided_fields_and_llamacpps_grammar_are_ignored_with_200() -> None:
    client, state = sim("instruct")
    r = chat(client, state, temperature=0.0, guided_choice=["zebra"], guided_json={"type": "object"})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] != "zebra"  # unconstrained
    prompt = prompts.fewshot_prompt(QUESTION, [], True, 60)
    bad = state.profile.model_copy(update={"failures": state.profile.failures.model_copy(update={"malformed": 1.0})})
    state.profile = bad  # every unconstrained call malformed: only a constraint vLLM reads helps
    body = {"model": state.served_name, "prompt": prompt, "temperature": 1.0, "seed": 1, "max_tokens": 48}
    ignored = client.post("/v1/completions", json={**body, "grammar": decision_grammar(True)}).json()
    assert parse_json_decision(ignored["choices"][0]["text"], allow_search=True) is None
    honoured = client.post("/v1/completions", json={**body, "structured_outputs": {"grammar": decision_grammar(True)}})
    assert parse_json_decision(honoured.json()["choices"][0]["text"], allow_search=True) is not None
    stats = client.get("/v1/sim/stats").json()["ignored_fields"]
    assert stats == {"guided_choice": 1, "guided_json": 1, "grammar": 1}


def test_structured_outputs_take_exactly_one_constraint() -> None:
    """sampling_params.py:120-141: more than one, or none, is a 400."""
    client, state = sim("instruct")
    two = chat(client, state, structured_outputs={"choice": ["a"], "regex": "a"})
    none = chat(client, state, structured_outputs={"disable_any_whitespace": True})
    assert two.status_code == none.status_code == 400
    assert two.json()["error"]["message"].startswith("You can only use one kind of structured outputs constraint")
    assert none.json()["error"]["message"].startswith("You must use one kind of structured outputs constraint")
    assert chat(client, state, structured_outputs={"choice": ["yes", "no"]}).json()["choices"][0]["message"][
        "content"
    ] in ("yes", "no")


# --- thinking_token_budget: sampling_params.py:65-85, v1/engine/input_processor.py:203-211 ------


def test_a_budget_without_a_reasoning_parser_is_vllms_400() -> None:
    client, state = sim(reasoning_parser=None)
    r = chat(client, state, thinking_token_budget=10, reasoning_effort="high", max_tokens=2048)
    assert r.status_code == 400 and r.json() == recorded("vllm_400_thinking_token_budget.json")
    assert chat(client, state, thinking_token_budget=-1, max_tokens=2048).status_code == 200  # -1: unlimited


@pytest.mark.parametrize("value", [-5, 1.5, True, "10"])
def test_an_invalid_budget_is_refused_naming_the_parameter(value: Any) -> None:
    client, state = sim()
    r = chat(client, state, thinking_token_budget=value, max_tokens=2048)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "BadRequestError" and err["param"] == "thinking_token_budget" and err["code"] == 400
    assert err["message"] == (
        "`thinking_token_budget` must be a non-negative integer or -1 for unlimited. "
        f"(parameter=thinking_token_budget, value={value})"
    )


def test_a_valid_budget_caps_the_reasoning() -> None:
    """v1/sample/thinking_budget_state.py: reasoning ends once `budget` tokens are spent."""
    client, state = sim()
    for budget in (0, 10, 150):
        for seed in range(5):
            r = chat(client, state, seed=seed, temperature=0.6, thinking_token_budget=budget, reasoning_effort="high")
            usage = r.json()["usage"]
            assert r.status_code == 200 and usage["completion_tokens_details"]["reasoning_tokens"] <= budget
    free = chat(client, state, temperature=0.6, reasoning_effort="high").json()["usage"]
    assert free["completion_tokens_details"]["reasoning_tokens"] >= 200  # effort high: 200-600 unbudgeted


def test_without_a_reasoning_parser_reasoning_stays_in_the_content() -> None:
    """entrypoints/openai/chat_completion/serving.py:165: reasoning details only with a parser."""
    client, state = sim(reasoning_parser=None)
    body = chat(client, state, temperature=0.6, reasoning_effort="medium", max_tokens=2048).json()
    msg = body["choices"][0]["message"]
    assert msg["reasoning"] is None and msg["content"].startswith("<think>\n") and "</think>" in msg["content"]
    assert "completion_tokens_details" not in body["usage"]


# --- tools: chat_completion/protocol.py:972-1020, renderers/online_renderer.py:269-289 ----------


def test_tools_with_auto_choice_need_enable_auto_tool_choice() -> None:
    client, state = sim(enable_auto_tool_choice=False, tool_call_parser=None)
    auto = chat(client, state, tools=[SEARCH_TOOL_SCHEMA])  # no tool_choice with tools: "auto"
    assert auto.status_code == 400 and auto.json()["error"]["message"] == AUTO_TOOLS_MESSAGE
    assert auto.json()["error"]["type"] == "BadRequestError"
    required = chat(client, state, tools=[SEARCH_TOOL_SCHEMA], tool_choice="required")
    assert required.status_code == 400
    assert required.json()["error"]["message"] == 'tool_choice="required" requires --tool-call-parser to be set'
    assert chat(client, state, tools=[SEARCH_TOOL_SCHEMA], tool_choice="none").status_code == 200
    served = sim()  # the default simulator: --enable-auto-tool-choice --tool-call-parser hermes
    assert chat(*served, tools=[SEARCH_TOOL_SCHEMA]).status_code == 200


def test_tool_choice_without_tools_and_empty_tools_are_refused() -> None:
    client, state = sim()
    assert chat(client, state, tools=[]).json()["error"]["param"] == "tools"
    assert (
        chat(client, state, tool_choice="required")
        .json()["error"]["message"]
        .startswith("When using `tool_choice`, `tools` must be set.")
    )


def test_auto_tool_choice_without_a_tool_parser_stops_at_start_up() -> None:
    """entrypoints/common/cli_args.py:553-554."""
    with pytest.raises(InputError, match="--enable-auto-tool-choice requires --tool-call-parser"):
        ServerFlags(enable_auto_tool_choice=True, tool_call_parser=None)
    with pytest.raises(ValueError, match="enable_auto_tool_choice needs tool_call_parser"):
        SimServerSpec(tool_call_parser=None)


# --- stop strings: v1/engine/detokenizer.py:321-372, v1/engine/output_processor.py:825-830 -----


def test_stop_cuts_at_the_stop_string_that_completes_first() -> None:
    assert apply_stop("xabcdy", ["abcd", "bc"], False) == ("xa", "bc")  # "bc" completes first, starts later
    assert apply_stop("xabcdy", ["abc", "bc"], True) == ("xabc", "abc")  # both end at 4: list order
    assert apply_stop("no stop here", ["</search>"], False) == ("no stop here", None)


def _tagged(client: TestClient, state: SimState, **body: Any) -> dict[str, Any]:
    msgs = prompts.chat_messages({"question": QUESTION, "steps": []}, tools=False, allow_search=True, evidence_words=60)
    body = {"max_tokens": 512, **body}
    for seed in range(40):  # a seed whose reply is a search
        r = chat(client, state, messages=msgs, seed=seed, temperature=0.6, **body).json()
        if "<search>" in (r["choices"][0]["message"]["content"] or ""):
            return r
    raise AssertionError("no search in 40 seeds")


def test_a_profile_that_writes_past_search_unless_stopped() -> None:
    client, state = sim("runs_past_search")
    free = _tagged(client, state)
    text = free["choices"][0]["message"]["content"]
    assert text.index("</search>") < text.index("<information>") < text.index("<answer>")
    assert free["choices"][0]["stop_reason"] is None
    cut = _tagged(client, state, stop=["</search>"])
    choice = cut["choices"][0]
    assert choice["message"]["content"].startswith("<search>") and "</search>" not in choice["message"]["content"]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == "</search>"
    kept = _tagged(client, state, stop=["</search>"], include_stop_str_in_output=True)["choices"][0]
    assert kept["message"]["content"].endswith("</search>") and kept["stop_reason"] == "</search>"
    assert cut["usage"]["completion_tokens"] < free["usage"]["completion_tokens"]
    short = _tagged(client, state, max_tokens=30)["choices"][0]
    assert short["finish_reason"] == "length"  # nothing stops it: cut off at max_tokens
    default = _tagged(*sim("instruct"))["choices"][0]  # the other profiles end the turn at </search>
    assert default["message"]["content"].endswith("</search>") and default["stop_reason"] is None


def test_the_searchr1_sequence_is_read_and_continued_as_vllm_would() -> None:
    """Search-R1's prompt and a continued assistant sequence: the simulator finds the question
    inside the prompt and the passages inside the sequence's `<information>` blocks, answers a
    sequence that ends with an opened `<answer>` with the answer and `</answer>`, and refuses
    `continue_final_message` with `add_generation_prompt` both true, as vLLM's validator does."""
    from branchpoint.sim.observe import observe_chat

    client, state = sim("instruct")
    docs = [{"doc_id": "d1", "title": "Mona Lisa", "text": "The Mona Lisa was painted by Leonardo da Vinci."}]
    entry = {"kind": "search", "query": "Mona Lisa", "evidence_start": 0, "evidence_count": 1, "turn": {}}
    values = {"question": QUESTION, "evidence": docs, "transcript": [entry]}
    body = {"messages": prompts.searchr1_messages(values), "continue_final_message": True}
    obs = observe_chat(state.profile, state.bank, body)
    assert obs.protocol == "tagged" and obs.can_search and obs.question is not None
    assert [(p.title, p.text) for p in obs.passages] == [("Mona Lisa", docs[0]["text"])]
    forced = prompts.searchr1_messages(values, forced=True)
    reply = chat(client, state, messages=forced, continue_final_message=True, add_generation_prompt=False)
    content = reply.json()["choices"][0]["message"]["content"]
    assert reply.status_code == 200 and content.endswith("</answer>") and "<answer>" not in content
    refused = chat(client, state, messages=forced, continue_final_message=True, add_generation_prompt=True)
    assert refused.status_code == 400 and "Cannot set both" in refused.json()["error"]["message"]


def test_stop_strings_cut_completions_as_vllm() -> None:
    client, state = sim("instruct")
    prompt = prompts.fewshot_prompt(QUESTION, [], True, 60)
    body = {"model": state.served_name, "prompt": prompt, "temperature": 0.0, "max_tokens": 48}
    full = client.post("/v1/completions", json=body).json()["choices"][0]
    cut = client.post("/v1/completions", json={**body, "stop": '"text"'}).json()["choices"][0]
    kept = client.post("/v1/completions", json={**body, "stop": ['"text"'], "include_stop_str_in_output": True})
    assert full["stop_reason"] is None and '"text"' in full["text"]
    assert cut["stop_reason"] == '"text"' and full["text"].startswith(cut["text"]) and '"text"' not in cut["text"]
    assert kept.json()["choices"][0]["text"] == cut["text"] + '"text"'


# --- the simulator's own rule: a question outside its question set -------------------------------


def test_an_unknown_question_is_refused_naming_it() -> None:
    client, state = sim("instruct")
    r = chat(client, state, messages=[{"role": "user", "content": "Who wrote the Voynich manuscript?"}])
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert "'Who wrote the Voynich manuscript?'" in message and "question set 'demo'" in message
    assert client.get("/v1/sim/stats").json()["unknown_questions"] == {"Who wrote the Voynich manuscript?": 1}
    prompt = prompts.fewshot_prompt("Who wrote the Voynich manuscript?", [], True, 60)
    assert client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 48}).status_code == 400
