"""`model.logprobs`: what is asked for, how vLLM's logprobs shapes are read, and that a spec
without it is unchanged.

Recorded-shape fixtures (tests/models/recorded/), modeled on vLLM's documented response models
(`ChatCompletionLogProbs`: `content` of {token, logprob, bytes, top_logprobs}; the completions'
legacy `logprobs`: parallel `tokens`, `token_logprobs`, `top_logprobs` objects, `text_offset`):
- vllm_qwen3_tool_call_logprobs.json: Qwen3 with a reasoning parser and a Hermes tool call; the
  token list holds the reasoning block, then `<tool_call>` (P = 0.8) against answer tokens;
- vllm_completion_logprobs.json: a few-shot completion after `{"action": "` whose first token
  `se` (P = 0.5) is not yet the whole word `search`.
"""

from __future__ import annotations

import math

import pytest

from branchpoint.agents.decision_logprobs import decision_record
from branchpoint.models import ModelSpec, OpenAICompatibleClient
from branchpoint.models.logprobs import NEG_INF_LOGPROB, read_chat_logprobs, read_completion_logprobs
from tests.models.http_fakes import FakeServer, recorded

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
TOOLS = [
    {
        "type": "function",
        "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
    }
]


def client(server: FakeServer, style: str, logprobs: int | None) -> OpenAICompatibleClient:
    spec = ModelSpec(
        provider="openai", base_url=server.base_url, name="m", style=style, logprobs=logprobs, server_kind="vllm"
    )
    return OpenAICompatibleClient(spec)


def test_chat_asks_for_top_logprobs_and_reads_vllms_shape(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_tool_call_logprobs.json")
    server.reply(CHAT, (200, body))
    call = client(server, "chat", 3).chat([{"role": "user", "content": "Who painted the Mona Lisa?"}], tools=TOOLS)
    (sent,) = server.bodies(CHAT)
    assert sent["logprobs"] is True and sent["top_logprobs"] == 3
    assert call.logprobs is not None and len(call.logprobs) == len(body["choices"][0]["logprobs"]["content"])
    assert call.logprobs[9].token == "<tool_call>" and call.logprobs[9].top[1] == ("Leonardo", -1.8971199849)
    record = decision_record(call.logprobs, "native")
    assert record is not None and record["position"] == 9  # after </think> and the blank line
    assert record["p_search"] == pytest.approx(0.8)
    assert record["p_answer"] == pytest.approx(math.exp(-1.8971199849) + math.exp(-3.2) + math.exp(-4.0))


def test_completion_asks_for_logprobs_and_reads_the_legacy_shape(server: FakeServer) -> None:
    body = recorded("vllm_completion_logprobs.json")
    server.reply(COMPLETIONS, (200, body))
    call = client(server, "completion", 3).complete('Decision: {"action": "', stop=["\n"])
    (sent,) = server.bodies(COMPLETIONS)
    assert sent["logprobs"] == 3 and "top_logprobs" not in sent
    assert call.text == body["choices"][0]["text"]
    assert call.logprobs is not None and [t.token for t in call.logprobs[:2]] == ["se", "arch"]
    record = decision_record(call.logprobs, "constrained")
    assert record is not None and record["position"] == 0 and record["token"] == "se"
    assert record["p_search"] == pytest.approx(0.5)
    assert record["p_answer"] == pytest.approx(math.exp(-0.9162907319) + math.exp(-3.0))


@pytest.mark.parametrize("style", ["chat", "completion"])
def test_without_the_setting_nothing_is_asked_or_read(server: FakeServer, style: str) -> None:
    if style == "chat":
        server.reply(CHAT, (200, recorded("vllm_qwen3_tool_call_logprobs.json")))
        call = client(server, style, None).chat([{"role": "user", "content": "?"}], tools=TOOLS)
    else:
        server.reply(COMPLETIONS, (200, recorded("vllm_completion_logprobs.json")))
        call = client(server, style, None).complete("p")
    (sent,) = server.bodies(CHAT if style == "chat" else COMPLETIONS)
    # langchain-openai has always sent `logprobs: null` on completions (a request that asks for none)
    assert sent.get("logprobs") is None and "top_logprobs" not in sent
    assert call.logprobs is None and call.decision_logprobs is None


def test_an_unset_setting_leaves_the_spec_dump_unchanged() -> None:
    assert "logprobs" not in ModelSpec().model_dump()
    assert ModelSpec(logprobs=5).model_dump()["logprobs"] == 5
    with pytest.raises(ValueError):
        ModelSpec(logprobs=21)  # vLLM's and OpenAI's most


def test_readers_tolerate_null_and_odd_entries() -> None:
    assert read_chat_logprobs(None) is None and read_completion_logprobs(None) is None
    toks = read_chat_logprobs(
        {"content": [{"token": "a", "logprob": float("-inf"), "top_logprobs": [{"token": "b", "logprob": -1}]}, 7]}
    )
    assert toks is not None and len(toks) == 1 and toks[0].logprob == NEG_INF_LOGPROB
    as_chat = read_completion_logprobs({"content": [{"token": "x", "logprob": -0.5, "top_logprobs": []}]})
    assert as_chat is not None and as_chat[0].token == "x"  # a llama.cpp completion in the chat shape
