"""The simulated server speaks vLLM's wire format: same fields and shapes as recorded vLLM replies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from branchpoint.agents import prompts
from branchpoint.models import ModelSpec, OpenAICompatibleClient
from branchpoint.sim.server import build_state, create_app
from branchpoint.tools.search import SEARCH_TOOL_SCHEMA
from tests.models.http_fakes import recorded

QUESTION = "Who painted the Mona Lisa?"
DOC = {"doc_id": "demo-004", "title": "Mona Lisa", "text": "The Mona Lisa was painted by Leonardo da Vinci."}


@pytest.fixture(scope="module")
def sim() -> tuple[TestClient, str]:
    state = build_state("over_searching", latency_scale=0.0)
    return TestClient(create_app(state)), state.served_name


def shape(value: Any) -> Any:
    """The shape of a JSON value: dict keys with their shapes, a list's first item, else the type
    (null matches anything, since vLLM sends null where a field is unset)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None if value is None else type(value).__name__


def assert_same_shape(ours: Any, theirs: Any, path: str = "$") -> None:
    if theirs is None or ours is None:
        return
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), path
        assert set(ours) >= set(theirs), f"{path}: missing {sorted(set(theirs) - set(ours))}"
        for k in theirs:
            assert_same_shape(ours[k], theirs[k], f"{path}.{k}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list), path
        if theirs and ours:
            assert_same_shape(ours[0], theirs[0], f"{path}[0]")
    else:
        assert type(ours) is type(theirs) or {type(ours), type(theirs)} <= {int, float}, (
            f"{path}: {ours!r} vs {theirs!r}"
        )


def chat(client: TestClient, name: str, **body: Any) -> dict[str, Any]:
    r = client.post("/v1/chat/completions", json={"model": name, "temperature": 0.6, "seed": 3, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_answer_with_reasoning_has_the_fields_of_recorded_gpt_oss(sim: tuple[TestClient, str]) -> None:
    client, name = sim
    msgs = prompts.chat_messages(
        {"question": QUESTION, "steps": [{"kind": "search", "query": "q", "retrieved": [DOC]}]},
        tools=True,
        allow_search=False,
        evidence_words=60,
    )
    body = chat(client, name, messages=msgs, max_tokens=2048, reasoning_effort="medium")
    theirs = recorded("vllm_gpt_oss_answer_details.json")
    assert set(body) == set(theirs) and set(body["choices"][0]) == set(theirs["choices"][0])
    assert set(body["choices"][0]["message"]) == set(theirs["choices"][0]["message"])
    assert_same_shape(body, theirs)
    msg, usage = body["choices"][0]["message"], body["usage"]
    assert msg["reasoning"] and body["choices"][0]["finish_reason"] == "stop"
    assert usage["completion_tokens_details"]["reasoning_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] > usage["completion_tokens_details"]["reasoning_tokens"]


def test_tool_call_has_the_fields_of_recorded_qwen3(sim: tuple[TestClient, str]) -> None:
    client, name = sim
    msgs = prompts.chat_messages({"question": QUESTION, "steps": []}, tools=True, allow_search=True, evidence_words=60)
    body = chat(client, name, messages=msgs, tools=[SEARCH_TOOL_SCHEMA], tool_choice="required", max_tokens=2048)
    theirs = recorded("vllm_qwen3_tool_call_reasoning.json")
    assert_same_shape(body, theirs)
    call = body["choices"][0]["message"]["tool_calls"][0]
    assert call["id"].startswith("chatcmpl-tool-") and call["function"]["name"] == "search"
    assert json.loads(call["function"]["arguments"])["query"]
    assert body["choices"][0]["finish_reason"] == "tool_calls" and body["choices"][0]["message"]["content"] is None


def test_thinking_off_gives_reasoning_null(sim: tuple[TestClient, str]) -> None:
    client, name = sim
    msgs = [{"role": "user", "content": QUESTION}]
    body = chat(client, name, messages=msgs, chat_template_kwargs={"enable_thinking": False}, max_tokens=64)
    assert_same_shape(body, recorded("vllm_qwen3_no_thinking.json"))
    assert body["choices"][0]["message"]["reasoning"] is None
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0


def test_tokenize_matches_recorded_vllm(sim: tuple[TestClient, str]) -> None:
    client, name = sim
    body = client.post(
        "/tokenize", json={"model": name, "prompt": "Who painted it?", "add_special_tokens": False}
    ).json()
    assert set(body) == set(recorded("vllm_tokenize_qwen3.json"))
    assert body["count"] == len(body["tokens"]) > 0


def test_unknown_model_is_404_like_vllm(sim: tuple[TestClient, str]) -> None:
    client, _ = sim
    r = client.post("/v1/chat/completions", json={"model": "nope", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and "does not exist" in r.json()["error"]["message"]


def test_stream_with_usage(sim: tuple[TestClient, str]) -> None:
    client, name = sim
    r = client.post(
        "/v1/chat/completions",
        json={
            "model": name,
            "messages": [{"role": "user", "content": QUESTION}],
            "stream": True,
            "seed": 1,
            "temperature": 0.6,
            "stream_options": {"include_usage": True},
            "reasoning_effort": "low",
        },
    )
    events = [line.removeprefix("data: ") for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning") or "" for c in chunks if c["choices"])
    assert reasoning and (text or any(c["choices"] and c["choices"][0]["delta"].get("tool_calls") for c in chunks))


def test_completion_continues_the_fewshot_decision_and_honours_grammar(sim: tuple[TestClient, str]) -> None:
    from branchpoint.agents.protocols import decision_grammar, parse_json_decision

    client, name = sim
    prompt = prompts.fewshot_prompt(QUESTION, [DOC], True, 60)
    for seed in range(20):
        body = client.post(
            "/v1/completions",
            json={
                "model": name,
                "prompt": prompt,
                "seed": seed,
                "temperature": 1.0,
                "max_tokens": 48,
                "stop": ["\n"],
                "structured_outputs": {"grammar": decision_grammar(False)},
            },
        ).json()
        assert body["object"] == "text_completion" and set(body["choices"][0]) >= {
            "text",
            "finish_reason",
            "stop_reason",
        }
        if body["choices"][0]["finish_reason"] == "stop":
            assert parse_json_decision(body["choices"][0]["text"], allow_search=False) is not None


def test_the_real_client_reads_the_simulator(sim: tuple[TestClient, str]) -> None:
    """Through a real HTTP server and the OpenAI-compatible client: reasoning tokens as reported."""
    import threading

    import uvicorn

    from branchpoint.models.server import free_port

    state = build_state("over_searching", latency_scale=0.0)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(state), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        import time

        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        spec = ModelSpec(
            provider="openai",
            base_url=f"http://127.0.0.1:{port}/v1",
            name=state.served_name,
            style="chat",
            max_tokens=2048,
            temperature=0.6,
            seed=5,
            reasoning_effort="high",
        )
        call = OpenAICompatibleClient(spec).chat([{"role": "user", "content": QUESTION}], tools=[SEARCH_TOOL_SCHEMA])
        assert call.reasoning and call.usage.reasoning_tokens and call.usage.reasoning_tokens >= 200
        assert call.tool_calls or call.text
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_capacity_mode_shares_a_tokens_per_second_ceiling() -> None:
    import asyncio

    from branchpoint.sim.capacity import Scheduler

    async def batch(n: int) -> float:
        sched = Scheduler(tokens_per_s=1000.0, max_batch=4, decode_s_per_token=0.002)
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.gather(*(sched.decode(100) for _ in range(n)))
        return loop.time() - start

    one = asyncio.run(batch(1))  # one stream: 100 tokens at 500 tokens/s
    eight = asyncio.run(batch(8))  # 800 tokens at the 1000 tokens/s ceiling, 4 at a time
    assert 0.18 <= one <= 0.35
    assert 0.75 <= eight <= 1.2
