"""Recorded vLLM chat-completion bodies (tests/models/recorded/) replayed through the client.

What each file is:
- vllm_gpt_oss_answer_details.json: gpt-oss, `reasoning`, usage with
  `completion_tokens_details.reasoning_tokens` (recent vLLM).
- vllm_qwen3_answer_no_details.json: Qwen3 with `--reasoning-parser qwen3`, `reasoning`, no details.
- vllm_qwen3_answer_reasoning_content.json: older vLLM, reasoning under `reasoning_content`.
- vllm_qwen3_tool_call_reasoning.json: a `search` tool call after reasoning (`--enable-auto-tool-choice`).
- vllm_qwen3_no_thinking.json: `enable_thinking: false`, `reasoning: null`.
- vllm_tokenize_qwen3.json: vLLM's `POST /tokenize` answer (count, max_model_len, tokens).
"""

from __future__ import annotations

from typing import Any

import pytest

from branchpoint.models import ModelSpec, OpenAICompatibleClient
from branchpoint.models.reasoning import estimate_tokens
from tests.models.http_fakes import FakeServer, recorded

MESSAGES = [{"role": "user", "content": "Who painted the Mona Lisa?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
]
TOKENIZE = recorded("vllm_tokenize_qwen3.json")
CHAT = "/v1/chat/completions"


def client_for(server: FakeServer, body: dict[str, Any]) -> OpenAICompatibleClient:
    server.reply(CHAT, (200, body))
    return OpenAICompatibleClient(
        ModelSpec(provider="openai", base_url=server.base_url, name=body["model"], style="chat", max_tokens=512)
    )


def reasoning_text(body: dict[str, Any]) -> str | None:
    msg = body["choices"][0]["message"]
    return msg.get("reasoning") or msg.get("reasoning_content")


@pytest.mark.parametrize(
    "name",
    [
        "vllm_gpt_oss_answer_details.json",
        "vllm_qwen3_answer_no_details.json",
        "vllm_qwen3_answer_reasoning_content.json",
        "vllm_qwen3_tool_call_reasoning.json",
        "vllm_qwen3_no_thinking.json",
    ],
)
def test_every_recorded_body_replays(server: FakeServer, name: str) -> None:
    body = recorded(name)
    call = client_for(server, body).chat(MESSAGES, tools=TOOLS)
    choice, usage = body["choices"][0], body["usage"]
    assert call.text == (choice["message"]["content"] or "")
    assert call.reasoning == reasoning_text(body)
    assert call.finish_reason == choice["finish_reason"]
    assert (call.usage.input_tokens, call.usage.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    if call.usage.reasoning_tokens is not None:
        # vLLM counts reasoning inside completion_tokens: never more reasoning than output.
        assert call.usage.reasoning_tokens <= call.usage.output_tokens


def test_reported_reasoning_tokens_are_used_as_is(server: FakeServer) -> None:
    server.reply("/tokenize", (200, TOKENIZE))
    call = client_for(server, recorded("vllm_gpt_oss_answer_details.json")).chat(MESSAGES)
    assert call.text == "Leonardo da Vinci"
    assert call.reasoning is not None and call.reasoning.startswith("The user asks who painted")
    assert call.usage.reasoning_tokens == 41
    assert "reasoning_tokens_estimated" not in call.usage.model_dump()
    assert server.paths() == [CHAT]  # nothing to count


def test_missing_details_are_counted_with_vllm_tokenize(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_answer_no_details.json")
    server.reply("/tokenize", (200, TOKENIZE))
    call = client_for(server, body).chat(MESSAGES)
    assert call.text == "\n\nCanberra"
    assert call.usage.reasoning_tokens == TOKENIZE["count"] == 58
    assert "reasoning_tokens_estimated" not in call.usage.model_dump()
    assert server.paths() == [CHAT, "/tokenize"]
    (tokenize,) = server.bodies("/tokenize")
    assert tokenize == {"model": "Qwen/Qwen3-8B", "prompt": reasoning_text(body), "add_special_tokens": False}


def test_missing_details_without_tokenize_are_estimated(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_answer_no_details.json")
    call = client_for(server, body).chat(MESSAGES)  # no /tokenize reply: the endpoint is "missing"
    text = reasoning_text(body)
    assert text is not None
    assert call.usage.reasoning_tokens == estimate_tokens(text)
    assert call.usage.model_dump()["reasoning_tokens_estimated"] is True
    # The estimate is in the right range of the recorded server count (58) and below the output.
    assert 40 <= call.usage.reasoning_tokens <= call.usage.output_tokens
    assert server.paths() == [CHAT, "/tokenize", "/extras/tokenize/count"]
    # The next call does not ask again.
    client_for(server, body).chat(MESSAGES)
    assert server.paths().count("/tokenize") == 2  # once per client; with_seed shares the counter


def test_older_reasoning_content_is_read_and_counted(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_answer_reasoning_content.json")
    server.reply(
        "/tokenize", (200, {"count": 47, "max_model_len": 32768, "tokens": list(range(47)), "token_strs": None})
    )
    call = client_for(server, body).chat(MESSAGES)
    assert call.reasoning is not None and "false premise" in call.reasoning
    assert call.text.strip().startswith("I don't know")
    assert call.usage.reasoning_tokens == 47
    assert server.bodies("/tokenize")[0]["prompt"] == body["choices"][0]["message"]["reasoning_content"]


def test_tool_call_with_reasoning(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_tool_call_reasoning.json")
    server.reply(
        "/tokenize", (200, {"count": 27, "max_model_len": 32768, "tokens": list(range(27)), "token_strs": None})
    )
    call = client_for(server, body).chat(MESSAGES, tools=TOOLS)
    assert call.tool_calls == [
        {"name": "search", "args": {"query": "Mona Lisa painter"}, "id": "chatcmpl-tool-7a3f0e9b12c84d56"}
    ]
    assert call.text == ""
    assert call.finish_reason == "tool_calls"
    assert call.reasoning is not None and "search the corpus" in call.reasoning
    assert call.usage.reasoning_tokens == 27
    (sent,) = server.bodies(CHAT)
    assert sent["tools"] == TOOLS


def test_no_thinking_means_no_reasoning_tokens(server: FakeServer) -> None:
    server.reply("/tokenize", (200, TOKENIZE))
    call = client_for(server, recorded("vllm_qwen3_no_thinking.json")).chat(MESSAGES)
    assert call.text == "Canberra"
    assert call.reasoning is None
    assert call.usage.reasoning_tokens is None
    assert server.paths() == [CHAT]


def test_counted_reasoning_never_exceeds_the_output(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_tool_call_reasoning.json")  # completion_tokens: 56
    server.reply("/tokenize", (200, TOKENIZE))  # 58: a count for another text
    call = client_for(server, body).chat(MESSAGES, tools=TOOLS)
    assert call.usage.reasoning_tokens == call.usage.output_tokens == 56
