"""Each server gets the structured-output field it reads; refusals and odd usage from vLLM.

Bodies replayed from tests/models/recorded/: vllm_version.json (vLLM's `GET /version`),
llamacpp_props.json (llama.cpp's `GET /props`, abridged), vllm_completion_structured.json (a
`/v1/completions` answer under a grammar), vllm_400_thinking_token_budget.json (vLLM's 400 for a
thinking budget without --reasoning-parser / --reasoning-config), vllm_qwen3_reasoning_tokens_zero.json
(`reasoning_tokens: 0` beside reasoning text).
"""

from __future__ import annotations

import pytest

from branchpoint.errors import ModelServerError
from branchpoint.models import ModelSpec, OpenAICompatibleClient
from branchpoint.models.server_kind import detect_server_kind, server_root
from tests.models.http_fakes import FakeServer, recorded

GRAMMAR = 'root ::= "{" [^}]* "}"'
COMPLETIONS = "/v1/completions"


def client(server: FakeServer, **spec: object) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(ModelSpec(**{"provider": "openai", "base_url": server.base_url, "name": "m", **spec}))


def test_vllm_detected_from_version_gets_structured_outputs(server: FakeServer) -> None:
    server.reply("/version", (200, recorded("vllm_version.json")))
    server.reply(COMPLETIONS, (200, recorded("vllm_completion_structured.json")))
    model = client(server)
    call = model.complete("Q: capital of Australia?\nDecision:", grammar=GRAMMAR, stop=["\n"])
    assert call.text == '{"action": "answer", "text": "Canberra"}' and call.usage.output_tokens == 14
    body = server.bodies(COMPLETIONS)[0]
    assert body["structured_outputs"] == {"grammar": GRAMMAR} and "grammar" not in body
    model.with_seed(3).complete("Q: again", grammar=GRAMMAR)  # detected once, kept by seeded copies
    assert server.paths().count("/version") == 1
    model.complete("Q: free text")  # no grammar: neither field, and no probing
    assert "structured_outputs" not in server.bodies(COMPLETIONS)[-1]


def test_llamacpp_detected_from_props_gets_grammar(server: FakeServer) -> None:
    server.reply("/props", (200, recorded("llamacpp_props.json")))  # /version: 404, as llama.cpp
    server.reply(COMPLETIONS, (200, recorded("vllm_completion_structured.json")))
    client(server).complete("Q", grammar=GRAMMAR)
    body = server.bodies(COMPLETIONS)[0]
    assert body["grammar"] == GRAMMAR and "structured_outputs" not in body
    assert detect_server_kind(server.base_url) == "llamacpp"


def test_unknown_server_gets_grammar_and_the_spec_can_say_the_kind(server: FakeServer) -> None:
    server.reply(COMPLETIONS, (200, recorded("vllm_completion_structured.json")))
    client(server).complete("Q", grammar=GRAMMAR)
    assert server.bodies(COMPLETIONS)[0]["grammar"] == GRAMMAR
    before = len(server.requests)
    client(server, server_kind="vllm").complete("Q", grammar=GRAMMAR)
    assert server.paths()[before:] == [COMPLETIONS]  # no probe when the spec says
    assert server.bodies(COMPLETIONS)[-1]["structured_outputs"] == {"grammar": GRAMMAR}
    assert server_root("http://h:8000/v1/") == "http://h:8000"


@pytest.mark.parametrize(
    "body",
    [
        recorded("vllm_400_thinking_token_budget.json"),
        {
            "object": "error",
            "type": "BadRequestError",
            "param": None,
            "code": 400,  # older vLLM's shape
            "message": recorded("vllm_400_thinking_token_budget.json")["error"]["message"],
        },
    ],
)
def test_thinking_budget_refusal_is_one_line_naming_the_flag(server: FakeServer, body: dict) -> None:
    server.reply("/v1/chat/completions", (400, body))
    qwen = client(server, style="chat", name="Qwen/Qwen3-8B", reasoning_effort="medium")
    with pytest.raises(ModelServerError) as info:
        qwen.chat([{"role": "user", "content": "hi"}])
    message = str(info.value)
    assert "\n" not in message and "--reasoning-parser" in message and "--reasoning-config" in message
    assert "refused thinking_token_budget (HTTP 400)" in message
    assert server.bodies("/v1/chat/completions")[0]["thinking_token_budget"] == 1024
    assert len(server.bodies("/v1/chat/completions")) == 1  # not retried


def test_zero_reasoning_tokens_beside_reasoning_text_are_recounted(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_reasoning_tokens_zero.json")
    server.reply("/v1/chat/completions", (200, body))
    tokenize = {**recorded("vllm_tokenize_qwen3.json"), "count": 24}  # the reasoning text's count
    server.reply("/tokenize", (200, tokenize))
    call = client(server, style="chat", name="Qwen/Qwen3-8B").chat([{"role": "user", "content": "Mona Lisa?"}])
    assert call.reasoning == body["choices"][0]["message"]["reasoning"]
    assert call.usage.reasoning_tokens == 24 and call.usage.output_tokens == 31
    assert server.bodies("/tokenize")[0]["prompt"] == call.reasoning
