"""Reasoning effort per model family (what the request body carries) and reasoning-token counting."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from pydantic import ValidationError

from branchpoint.models import ModelSpec, OpenAICompatibleClient
from branchpoint.models.reasoning import (
    DEFAULT_THINKING_BUDGET,
    ServerTokenCounter,
    TokenCount,
    estimate_tokens,
    infer_family,
    merge_body,
    reasoning_fields,
    server_root,
)
from tests.models.http_fakes import FakeServer, recorded

ANSWER = recorded("vllm_qwen3_no_thinking.json")
MESSAGES = [{"role": "user", "content": "What is the capital of Australia?"}]
REASONING_KEYS = ("reasoning_effort", "chat_template_kwargs", "thinking_token_budget")


def spec(name: str = "m", **fields: Any) -> ModelSpec:
    return ModelSpec(provider="openai", base_url="http://127.0.0.1:1/v1", name=name, style="chat", **fields)


# --- family and mapping ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("openai/gpt-oss-20b", "gpt-oss"),
        ("gpt-oss-120b", "gpt-oss"),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("qwen3-30b-a3b-thinking-2507", "qwen3"),
        ("Qwen/Qwen3.5-27B-FP8", "qwen3"),
        ("Qwen/Qwen2.5-7B-Instruct", "generic"),
        ("meta-llama/Llama-3.1-8B-Instruct", "generic"),
        ("gemma-3-270m", "generic"),
    ],
)
def test_infer_family_from_the_model_name(name: str, family: str) -> None:
    assert infer_family(name) == family


@pytest.mark.parametrize(
    ("name", "effort", "fields"),
    [
        ("openai/gpt-oss-20b", "low", {"reasoning_effort": "low"}),
        ("openai/gpt-oss-20b", "medium", {"reasoning_effort": "medium"}),
        ("openai/gpt-oss-20b", "high", {"reasoning_effort": "high"}),
        ("Qwen/Qwen3-8B", "low", {"chat_template_kwargs": {"enable_thinking": False}}),
        ("Qwen/Qwen3-8B", "medium", {"chat_template_kwargs": {"enable_thinking": True}, "thinking_token_budget": 1024}),
        ("Qwen/Qwen3-8B", "high", {"chat_template_kwargs": {"enable_thinking": True}}),
        ("meta-llama/Llama-3.1-8B-Instruct", "low", {"reasoning_effort": "low"}),
        ("meta-llama/Llama-3.1-8B-Instruct", "high", {"reasoning_effort": "high"}),
    ],
)
def test_effort_mapping_per_family(name: str, effort: str, fields: dict[str, Any]) -> None:
    assert reasoning_fields(spec(name, reasoning_effort=effort)) == fields


def test_no_effort_sends_nothing() -> None:
    for name in ("openai/gpt-oss-20b", "Qwen/Qwen3-8B", "m"):
        assert reasoning_fields(spec(name)) == {}


def test_explicit_family_overrides_the_name() -> None:
    assert reasoning_fields(spec("my-finetune", family="qwen3", reasoning_effort="low")) == {
        "chat_template_kwargs": {"enable_thinking": False}
    }
    assert reasoning_fields(spec("Qwen/Qwen3-8B", family="generic", reasoning_effort="low")) == {
        "reasoning_effort": "low"
    }
    assert reasoning_fields(spec("Qwen/Qwen3-8B", family="gpt-oss", reasoning_effort="high")) == {
        "reasoning_effort": "high"
    }


def test_thinking_budgets_are_configurable() -> None:
    assert DEFAULT_THINKING_BUDGET == {"medium": 1024, "high": None}
    custom = spec("Qwen/Qwen3-8B", thinking_budget={"medium": 256, "high": 8192})
    assert reasoning_fields(custom.model_copy(update={"reasoning_effort": "medium"}))["thinking_token_budget"] == 256
    assert reasoning_fields(custom.model_copy(update={"reasoning_effort": "high"}))["thinking_token_budget"] == 8192
    # Only `high` given: medium keeps its default budget; `null` removes a budget.
    only_high = spec("Qwen/Qwen3-8B", reasoning_effort="medium", thinking_budget={"high": 4096})
    assert reasoning_fields(only_high)["thinking_token_budget"] == 1024
    no_budget = spec("Qwen/Qwen3-8B", reasoning_effort="medium", thinking_budget={"medium": None})
    assert reasoning_fields(no_budget) == {"chat_template_kwargs": {"enable_thinking": True}}
    # low is thinking off: a budget for it means nothing and is refused.
    with pytest.raises(ValidationError, match="thinking_budget"):
        spec("Qwen/Qwen3-8B", thinking_budget={"low": 10})
    with pytest.raises(ValidationError, match="thinking_budget"):
        spec("Qwen/Qwen3-8B", thinking_budget={"medium": 0})


def test_spec_refuses_unknown_effort_and_family() -> None:
    with pytest.raises(ValidationError, match="reasoning_effort"):
        spec(reasoning_effort="max")
    with pytest.raises(ValidationError, match="family"):
        spec(family="llama")


def test_merge_body_merges_dicts_one_level() -> None:
    base = {"max_tokens": 5, "chat_template_kwargs": {"enable_thinking": False}}
    assert merge_body(base, {"chat_template_kwargs": {"x": 1}, "top_k": 2}) == {
        "max_tokens": 5,
        "chat_template_kwargs": {"enable_thinking": False, "x": 1},
        "top_k": 2,
    }
    assert merge_body(base, {"chat_template_kwargs": {"enable_thinking": True}})["chat_template_kwargs"] == {
        "enable_thinking": True
    }
    assert base == {"max_tokens": 5, "chat_template_kwargs": {"enable_thinking": False}}  # not mutated


# --- what the chat request carries ------------------------------------------------------------


def client_for(server: FakeServer, name: str, **fields: Any) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(
        ModelSpec(provider="openai", base_url=server.base_url, name=name, style="chat", max_tokens=64, **fields)
    )


@pytest.mark.parametrize(
    ("name", "fields", "expected"),
    [
        ("openai/gpt-oss-20b", {"reasoning_effort": "high"}, {"reasoning_effort": "high"}),
        ("Qwen/Qwen3-8B", {"reasoning_effort": "low"}, {"chat_template_kwargs": {"enable_thinking": False}}),
        (
            "Qwen/Qwen3-8B",
            {"reasoning_effort": "medium", "thinking_budget": {"medium": 300}},
            {"chat_template_kwargs": {"enable_thinking": True}, "thinking_token_budget": 300},
        ),
        ("some-org/model", {"reasoning_effort": "medium"}, {"reasoning_effort": "medium"}),
        ("Qwen/Qwen3-8B", {}, {}),
    ],
)
def test_chat_body_carries_the_effort(
    server: FakeServer, name: str, fields: dict[str, Any], expected: dict[str, Any]
) -> None:
    server.reply("/v1/chat/completions", (200, ANSWER))
    client_for(server, name, **fields).chat(MESSAGES)
    (body,) = server.bodies("/v1/chat/completions")
    assert {k: body[k] for k in REASONING_KEYS if k in body} == expected
    assert body["max_tokens"] == 64
    assert body["model"] == name


def test_extra_body_wins_over_the_effort_fields(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, ANSWER))
    extra = {"chat_template_kwargs": {"enable_thinking": True, "custom": "x"}, "thinking_token_budget": 77}
    client_for(server, "Qwen/Qwen3-8B", reasoning_effort="medium", extra_body=extra).chat(MESSAGES)
    client_for(
        server, "Qwen/Qwen3-8B", reasoning_effort="low", extra_body={"chat_template_kwargs": {"custom": "y"}}
    ).chat(MESSAGES)
    first, second = server.bodies("/v1/chat/completions")
    assert first["chat_template_kwargs"] == {"enable_thinking": True, "custom": "x"}
    assert first["thinking_token_budget"] == 77
    assert second["chat_template_kwargs"] == {"enable_thinking": False, "custom": "y"}


def test_effort_is_kept_by_with_seed_and_not_sent_to_completions(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, ANSWER))
    server.reply(
        "/v1/completions",
        (
            200,
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "text": " x", "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        ),
    )
    client = client_for(server, "openai/gpt-oss-20b", reasoning_effort="low")
    seeded = client.with_seed(5)
    assert seeded.token_counter is client.token_counter  # one probe of the tokenize endpoint per server
    seeded.chat(MESSAGES)
    seeded.complete("p")
    (chat,) = server.bodies("/v1/chat/completions")
    (completion,) = server.bodies("/v1/completions")
    assert chat["reasoning_effort"] == "low" and chat["seed"] == 5
    assert not set(REASONING_KEYS) & set(completion)


# --- counting tokens ------------------------------------------------------------------------------


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("the capital") == 2  # words of up to 7 letters: one token each
    assert estimate_tokens("the capitals") == 3  # 8 letters: two
    assert estimate_tokens("Canberra.") == 3  # 8 letters: 2 pieces, and the full stop
    assert estimate_tokens("25 * 37") == 5  # digits one each, the operator one
    assert estimate_tokens("北京是首都") == 5  # CJK: a token per character
    text = "Okay, the user asks which city is the capital of Australia. The evidence says Canberra."
    assert 15 <= estimate_tokens(text) <= 25


def test_server_root() -> None:
    assert server_root("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000"
    assert server_root("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert server_root("https://gw.example/openai/v1") == "https://gw.example/openai"
    assert server_root("http://h:9") == "http://h:9"


def test_counter_uses_vllm_tokenize_and_remembers_it(server: FakeServer) -> None:
    server.reply("/tokenize", (200, recorded("vllm_tokenize_qwen3.json")))
    counter = ServerTokenCounter(server.base_url, "Qwen/Qwen3-8B", api_key="k")
    first = counter.count("some reasoning")
    assert (first.tokens, first.estimated) == (58, False)
    assert counter.count("more reasoning").tokens == 58
    assert server.paths() == ["/tokenize", "/tokenize"]  # no other endpoint tried
    body = server.bodies("/tokenize")[0]
    assert body == {"model": "Qwen/Qwen3-8B", "prompt": "some reasoning", "add_special_tokens": False}
    assert {k.lower(): v for k, v in server.requests[0].headers.items()}["authorization"] == "Bearer k"


def test_counter_uses_llama_cpp_python_and_subtracts_bos(server: FakeServer) -> None:
    # text -> 12 tokens with BOS, "" -> 1 (the BOS alone), next text -> 9 with BOS
    server.reply("/extras/tokenize/count", (200, {"count": 12}), (200, {"count": 1}), (200, {"count": 9}))
    counter = ServerTokenCounter(server.base_url, "gemma-3-270m")
    assert counter.count("first").tokens == 11
    assert counter.count("second") == TokenCount(8, estimated=False)
    assert server.paths() == ["/tokenize", "/extras/tokenize/count", "/extras/tokenize/count", "/extras/tokenize/count"]
    assert [b["input"] for b in server.bodies("/extras/tokenize/count")] == ["first", "", "second"]
    assert counter.route is not None and counter.route.name == "llama-cpp-python"


def test_counter_without_tokenize_estimates_and_stops_asking(server: FakeServer) -> None:
    counter = ServerTokenCounter(server.base_url, "m")
    text = "The evidence is clear, so no further search is needed."
    first = counter.count(text)
    assert (first.tokens, first.estimated) == (estimate_tokens(text), True)
    asked = len(server.requests)
    assert asked == 2  # both endpoints tried once
    assert counter.count(text).estimated
    assert len(server.requests) == asked


def test_counter_transient_failure_estimates_once_then_asks_again(server: FakeServer) -> None:
    server.reply(
        "/tokenize",
        (503, {"object": "error", "message": "busy", "code": 503}),
        (200, {"count": 4, "tokens": [1, 2, 3, 4]}),
    )
    counter = ServerTokenCounter(server.base_url, "m")
    assert counter.count("a b c d").estimated
    assert counter.count("a b c d") == TokenCount(4, estimated=False)


def test_counter_unreachable_server_estimates() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    counter = ServerTokenCounter(f"http://127.0.0.1:{port}/v1", "m", timeout_s=1)
    assert counter.count("two words").estimated
    assert counter.count("").tokens == 0
