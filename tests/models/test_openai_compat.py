"""OpenAICompatibleClient against a real local HTTP server that replays recorded response bodies.

The bodies below are shaped like what vLLM's OpenAI server and llama.cpp's server return; the
server (tests/models/http_fakes.py) records every request (path, headers, JSON body) so the tests
can check what was sent.
"""

from __future__ import annotations

import copy
import json
import socket
import time
from typing import Any

import pytest
from tenacity import wait_none

import branchpoint.models.openai_compat as oc
import branchpoint.models.openai_transport as oc_transport
import branchpoint.models.reasoning as oc_reasoning
from branchpoint.errors import InputError, ModelServerError
from branchpoint.models import ModelSpec, OpenAICompatibleClient, TransportError
from tests.models.http_fakes import FakeServer

# --- recorded response bodies -------------------------------------------------------------

#: llama.cpp server, /v1/completions (a few-shot decision, stopped at "\n").
COMPLETION_LLAMACPP = {
    "id": "cmpl-6f1c2a",
    "object": "text_completion",
    "created": 1764480000,
    "model": "m",
    "choices": [
        {"text": ' {"action": "answer", "text": "Canberra"}', "index": 0, "logprobs": None, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 203, "completion_tokens": 12, "total_tokens": 215},
}

#: vLLM, /v1/completions cut at the token limit.
COMPLETION_VLLM_LENGTH = {
    "id": "cmpl-b2e0d0c9a1",
    "object": "text_completion",
    "created": 1764480001,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "text": " The capital of Australia is",
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
            "prompt_logprobs": None,
        }
    ],
    "usage": {"prompt_tokens": 9, "total_tokens": 26, "completion_tokens": 17, "prompt_tokens_details": None},
}

#: vLLM with --reasoning-parser (current name `reasoning`) and reasoning-token details.
CHAT_VLLM_REASONING = {
    "id": "chatcmpl-9a8b7c",
    "object": "chat.completion",
    "created": 1764480002,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Canberra",
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning": "The capital of Australia is Canberra.",
            },
            "logprobs": None,
            "finish_reason": "stop",
            "stop_reason": None,
        }
    ],
    "usage": {
        "prompt_tokens": 31,
        "total_tokens": 71,
        "completion_tokens": 40,
        "completion_tokens_details": {"reasoning_tokens": 35},
        "prompt_tokens_details": None,
    },
    "prompt_logprobs": None,
}

#: Older vLLM (`reasoning_content`, no completion_tokens_details).
CHAT_VLLM_REASONING_CONTENT = {
    "id": "chatcmpl-1d2e3f",
    "object": "chat.completion",
    "created": 1764480003,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Paris",
                "tool_calls": [],
                "reasoning_content": "France's capital is Paris.",
            },
            "logprobs": None,
            "finish_reason": "stop",
            "stop_reason": None,
        }
    ],
    "usage": {"prompt_tokens": 20, "total_tokens": 32, "completion_tokens": 12},
}

#: vLLM with --enable-auto-tool-choice: a `search` tool call.
CHAT_VLLM_TOOL_CALL = {
    "id": "chatcmpl-tool1",
    "object": "chat.completion",
    "created": 1764480004,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning": None,
                "tool_calls": [
                    {
                        "id": "chatcmpl-tool-4f2a",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"query": "capital of Australia"}'},
                    }
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
            "stop_reason": None,
        }
    ],
    "usage": {"prompt_tokens": 150, "total_tokens": 172, "completion_tokens": 22, "prompt_tokens_details": None},
}

#: llama.cpp server chat answer (no reasoning, no details).
CHAT_LLAMACPP = {
    "id": "chatcmpl-abc",
    "object": "chat.completion",
    "created": 1764480005,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Leonardo da Vinci"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 14, "completion_tokens": 5, "total_tokens": 19},
}

#: vLLM's HTTP 400 when `tool_choice: auto` is asked without --enable-auto-tool-choice.
ERROR_400 = {
    "object": "error",
    "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
ERROR_503 = {"object": "error", "message": "Service Unavailable", "type": "ServiceUnavailable", "code": 503}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]

MESSAGES = [{"role": "user", "content": "What is the capital of Australia?"}]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without the exponential backoff waits, so retry tests take milliseconds."""
    monkeypatch.setattr(oc, "wait_exponential", lambda **_: wait_none())


def client_for(server: FakeServer, **overrides: Any) -> OpenAICompatibleClient:
    fields: dict[str, Any] = dict(provider="openai", base_url=server.base_url, name="m", max_tokens=17)
    fields.update(overrides)
    return OpenAICompatibleClient(ModelSpec(**fields))


# --- complete() -----------------------------------------------------------------------------


def test_complete_returns_text_usage_finish_reason_latency(server: FakeServer) -> None:
    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    call = client_for(server).complete("Question: capital of Australia?\nDecision:", stop=["\n"])
    assert call.text == ' {"action": "answer", "text": "Canberra"}'
    assert call.usage.input_tokens == 203
    assert call.usage.output_tokens == 12
    assert call.usage.reasoning_tokens is None
    assert call.finish_reason == "stop"
    assert call.latency_s > 0
    assert call.tool_calls == []


def test_complete_request_body(server: FakeServer) -> None:
    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    client = client_for(server, seed=7)
    client.complete("Q: x\nDecision:", stop=["\n"])
    grammar = 'root ::= "{" [^}]* "}"'
    client.complete("Q: y\nDecision:", stop=["\n", "Question:"], grammar=grammar, max_tokens=5)
    first, second = server.bodies("/v1/completions")
    assert first["prompt"] in ("Q: x\nDecision:", ["Q: x\nDecision:"])
    assert first["model"] == "m"
    assert first["max_tokens"] == 17
    assert first["stop"] == ["\n"]
    assert first["seed"] == 7
    assert "grammar" not in first
    assert second["max_tokens"] == 5
    assert second["stop"] == ["\n", "Question:"]
    assert second["grammar"] == grammar
    assert second["seed"] == 7


def test_complete_length_finish_reason(server: FakeServer) -> None:
    server.reply("/v1/completions", (200, COMPLETION_VLLM_LENGTH))
    call = client_for(server).complete("The capital")
    assert call.finish_reason == "length"
    assert (call.usage.input_tokens, call.usage.output_tokens) == (9, 17)


def test_complete_sends_extra_body(server: FakeServer) -> None:
    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    client_for(server, extra_body={"top_k": 1}).complete("p")
    (body,) = server.bodies("/v1/completions")
    assert body["top_k"] == 1
    assert body["max_tokens"] == 17


# --- chat() ---------------------------------------------------------------------------------


def test_chat_sends_max_tokens_and_no_tools_by_default(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, CHAT_LLAMACPP))
    client = client_for(server)
    call = client.chat(MESSAGES)
    client.chat(MESSAGES, max_tokens=5)
    first, second = server.bodies("/v1/chat/completions")
    assert first["max_tokens"] == 17  # llama.cpp ignores max_completion_tokens
    assert first.get("max_completion_tokens", 17) == 17
    assert first["messages"] == MESSAGES
    assert first["model"] == "m"
    assert first["seed"] == 0
    assert "tools" not in first
    assert second["max_tokens"] == 5
    assert second.get("max_completion_tokens", 5) == 5
    assert call.text == "Leonardo da Vinci"
    assert call.finish_reason == "stop"
    assert call.tool_calls == []
    assert call.reasoning is None
    assert (call.usage.input_tokens, call.usage.output_tokens) == (14, 5)
    assert call.usage.reasoning_tokens is None
    assert call.latency_s > 0


def test_chat_tool_call(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, CHAT_VLLM_TOOL_CALL))
    call = client_for(server).chat(MESSAGES, tools=TOOLS)
    (body,) = server.bodies("/v1/chat/completions")
    assert body["tools"] == TOOLS
    assert body["max_tokens"] == 17
    assert [{"name": c["name"], "args": c["args"]} for c in call.tool_calls] == [
        {"name": "search", "args": {"query": "capital of Australia"}}
    ]
    assert call.text == ""
    assert call.finish_reason == "tool_calls"
    assert (call.usage.input_tokens, call.usage.output_tokens) == (150, 22)


def test_chat_reasoning_field_and_reasoning_tokens(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, CHAT_VLLM_REASONING))
    call = client_for(server).chat(MESSAGES)
    assert call.text == "Canberra"
    assert call.reasoning == "The capital of Australia is Canberra."
    assert call.usage.input_tokens == 31
    assert call.usage.output_tokens == 40  # vLLM counts reasoning inside completion_tokens
    assert call.usage.reasoning_tokens == 35


def test_chat_reasoning_content_without_details(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, CHAT_VLLM_REASONING_CONTENT))
    call = client_for(server).chat(MESSAGES)
    assert call.text == "Paris"
    assert call.reasoning == "France's capital is Paris."
    assert (call.usage.input_tokens, call.usage.output_tokens) == (20, 12)
    # No details and no tokenize endpoint on this server: counted from the text, flagged as an estimate.
    assert call.usage.reasoning_tokens == oc_reasoning.estimate_tokens("France's capital is Paris.")
    assert call.usage.model_dump()["reasoning_tokens_estimated"] is True


def test_chat_extra_body_is_sent(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, CHAT_LLAMACPP))
    spec_extra = {"chat_template_kwargs": {"enable_thinking": False}}
    client_for(server, extra_body=copy.deepcopy(spec_extra)).chat(MESSAGES, tools=TOOLS)
    (body,) = server.bodies("/v1/chat/completions")
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["max_tokens"] == 17


# --- retries and errors ---------------------------------------------------------------------


def test_503_twice_then_ok_is_retried(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (503, ERROR_503), (503, ERROR_503), (200, CHAT_LLAMACPP))
    call = client_for(server, retries=3).chat(MESSAGES)
    assert call.text == "Leonardo da Vinci"
    assert len(server.bodies("/v1/chat/completions")) == 3


def test_completion_503_then_ok_is_retried(server: FakeServer) -> None:
    server.reply("/v1/completions", (503, ERROR_503), (200, COMPLETION_LLAMACPP))
    call = client_for(server, retries=1).complete("p")
    assert call.finish_reason == "stop"
    assert len(server.bodies("/v1/completions")) == 2


def test_always_503_raises_transport_error_after_retries(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (503, ERROR_503))
    server.reply("/v1/completions", (503, ERROR_503))
    client = client_for(server, retries=3)
    with pytest.raises(TransportError, match="503|Service Unavailable"):
        client.chat(MESSAGES)
    assert len(server.bodies("/v1/chat/completions")) == 4  # 1 call + 3 retries
    with pytest.raises(TransportError):
        client.complete("p")
    assert len(server.bodies("/v1/completions")) == 4


def test_429_is_retried(server: FakeServer) -> None:
    server.reply(
        "/v1/completions", (429, {"object": "error", "message": "busy", "code": 429}), (200, COMPLETION_LLAMACPP)
    )
    assert client_for(server, retries=2).complete("p").finish_reason == "stop"
    assert len(server.bodies("/v1/completions")) == 2


def test_400_is_not_retried_and_names_the_server_message(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (400, ERROR_400))
    client = client_for(server, retries=3)
    start = time.perf_counter()
    with pytest.raises(ModelServerError, match="enable-auto-tool-choice") as info:
        client.chat(MESSAGES, tools=TOOLS)
    assert time.perf_counter() - start < 5
    assert not isinstance(info.value, TransportError)
    assert "400" in str(info.value)
    assert len(server.bodies("/v1/chat/completions")) == 1  # not retried


def test_400_on_completions_is_not_retried(server: FakeServer) -> None:
    server.reply("/v1/completions", (400, {"object": "error", "message": "bad grammar", "code": 400}))
    with pytest.raises(ModelServerError, match="bad grammar"):
        client_for(server, retries=3).complete("p", grammar="root ::= oops")
    assert len(server.bodies("/v1/completions")) == 1


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


def test_connection_refused_raises_transport_error() -> None:
    port = _closed_port()
    spec = ModelSpec(provider="openai", base_url=f"http://127.0.0.1:{port}/v1", name="m", retries=1)
    client = OpenAICompatibleClient(spec)
    with pytest.raises(TransportError, match=f"127.0.0.1:{port}"):
        client.chat(MESSAGES)
    with pytest.raises(TransportError):
        client.complete("p")


def test_timeout_is_retried_then_a_transport_error(server: FakeServer) -> None:
    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    server.delay_s = 0.6
    with pytest.raises(TransportError):
        client_for(server, timeout_s=0.2, retries=1).complete("p")
    assert len(server.bodies("/v1/completions")) == 2


# --- API keys -------------------------------------------------------------------------------


def test_api_key_env_unset_is_an_input_error(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRANCHPOINT_TEST_KEY_UNSET", raising=False)
    with pytest.raises(InputError, match="BRANCHPOINT_TEST_KEY_UNSET"):
        client_for(server, api_key_env="BRANCHPOINT_TEST_KEY_UNSET")


def test_api_key_env_is_sent_as_bearer_and_not_recorded(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-5ecret-do-not-leak"
    monkeypatch.setenv("BRANCHPOINT_TEST_KEY", secret)
    server.reply("/v1/chat/completions", (200, CHAT_VLLM_TOOL_CALL))
    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    client = client_for(server, api_key_env="BRANCHPOINT_TEST_KEY")
    calls = [client.chat(MESSAGES, tools=TOOLS), client.complete("p")]
    for req in server.requests:
        headers = {k.lower(): v for k, v in req.headers.items()}
        assert headers["authorization"] == f"Bearer {secret}"
    assert len(server.requests) == 2
    for call in calls:
        assert secret not in repr(call)
        assert secret not in json.dumps(call.usage.model_dump())
    assert secret not in client.spec.model_dump_json()


def test_no_api_key_env_sends_placeholder(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    client_for(server).complete("p")
    (req,) = server.requests
    headers = {k.lower(): v for k, v in req.headers.items()}
    assert headers["authorization"] == f"Bearer {oc_transport.NO_KEY}"


def test_missing_base_url_is_an_input_error() -> None:
    with pytest.raises(InputError, match="base_url"):
        OpenAICompatibleClient(ModelSpec(provider="openai", name="m"))


def test_sampling_copies_share_the_http_clients_and_keep_logging(server: FakeServer, tmp_path) -> None:
    from branchpoint.models.request_log import RequestLog, read_requests

    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP), (200, COMPLETION_LLAMACPP))
    log = RequestLog(tmp_path / "requests.jsonl")
    client = client_for(server, seed=1).with_request_log(log)
    branch = client.with_sampling(seed=2, temperature=0.5)
    assert branch._http_clients is client._http_clients  # one connection pool: no new connection per branch
    client.complete("Q: a\nDecision:", stop=["\n"])
    branch.complete("Q: b\nDecision:", stop=["\n"])
    log.close()
    first, second = server.bodies("/v1/completions")
    assert (first["seed"], first["temperature"]) == (1, 0.0)
    assert (second["seed"], second["temperature"]) == (2, 0.5)
    assert [entry["body"] for entry in read_requests(tmp_path / "requests.jsonl")] == [first, second]


def test_a_seed_copy_shares_every_client_and_sends_the_same_bodies_with_its_seed(server: FakeServer) -> None:
    import asyncio

    server.reply("/v1/completions", *[(200, COMPLETION_LLAMACPP)] * 4)
    server.reply("/v1/chat/completions", *[(200, CHAT_VLLM_TOOL_CALL)] * 4)
    client = client_for(server, seed=1)
    fresh = client_for(server, seed=2)  # what a seed copy must send, built from scratch
    copy = client.with_seed(2)
    assert (copy._completion, copy._openai, copy._loop_clients) == (
        client._completion,
        client._openai,
        client._loop_clients,
    )  # no client built per execution or fork branch
    assert (client.spec.seed, copy.spec.seed) == (1, 2)

    async def calls(c: OpenAICompatibleClient) -> None:
        await c.acomplete("Q: y\nDecision:", stop=["\n"])
        await c.achat(MESSAGES, tools=TOOLS)
        await c.aclose()

    for c in (fresh, copy):
        c.complete("Q: y\nDecision:", stop=["\n"])
        c.chat(MESSAGES, tools=TOOLS)
        asyncio.run(calls(c))
    for path in ("/v1/completions", "/v1/chat/completions"):
        bodies = server.bodies(path)
        assert bodies[0] == bodies[1] == bodies[2] == bodies[3] and bodies[0]["seed"] == 2


# --- acomplete() / achat(): the same requests on an event loop ------------------------------


def test_async_calls_send_the_same_bodies_and_return_the_same_calls(server: FakeServer, tmp_path) -> None:
    import asyncio

    from branchpoint.models.request_log import RequestLog, read_requests

    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    server.reply("/v1/chat/completions", (200, CHAT_VLLM_TOOL_CALL))
    log = RequestLog(tmp_path / "requests.jsonl")
    client = client_for(server, seed=7).with_request_log(log)
    grammar = 'root ::= "{" [^}]* "}"'
    blocking = [
        client.complete("Q: y\nDecision:", stop=["\n"], grammar=grammar, max_tokens=5),
        client.chat(MESSAGES, tools=TOOLS),
    ]

    async def both() -> list[Any]:
        calls = [
            await client.acomplete("Q: y\nDecision:", stop=["\n"], grammar=grammar, max_tokens=5),
            await client.achat(MESSAGES, tools=TOOLS),
        ]
        await client.aclose()
        return calls

    awaited = asyncio.run(both())
    log.close()
    for b, a in zip(blocking, awaited, strict=True):
        assert (a.text, a.usage, a.finish_reason, a.tool_calls) == (b.text, b.usage, b.finish_reason, b.tool_calls)
    for path in ("/v1/completions", "/v1/chat/completions"):
        first, second = server.bodies(path)
        assert first == second  # byte for byte the same request (fingerprints, golden traces)
    logged = [r["body"] for r in read_requests(tmp_path / "requests.jsonl")]  # the async hook logs too
    completion, chat = server.bodies("/v1/completions")[0], server.bodies("/v1/chat/completions")[0]
    assert logged == [completion, chat, completion, chat]


def test_async_retries_then_transport_error_and_refusals(server: FakeServer) -> None:
    import asyncio

    server.reply("/v1/chat/completions", (503, ERROR_503), (200, CHAT_LLAMACPP))
    assert asyncio.run(client_for(server, retries=1).achat(MESSAGES)).text == "Leonardo da Vinci"
    server.reply("/v1/completions", (503, ERROR_503))
    with pytest.raises(TransportError, match="503|Service Unavailable"):
        asyncio.run(client_for(server, retries=2).acomplete("p"))
    assert len(server.bodies("/v1/completions")) == 3
    server.reply("/v1/chat/completions", (400, ERROR_400))
    with pytest.raises(ModelServerError):
        asyncio.run(client_for(server, retries=3).achat(MESSAGES))
    refused = ModelSpec(provider="openai", base_url=f"http://127.0.0.1:{_closed_port()}/v1", name="m", retries=1)
    with pytest.raises(TransportError):
        asyncio.run(OpenAICompatibleClient(refused).acomplete("p"))


def test_transport_faults_of_both_http_stacks_are_retried() -> None:
    import httpx
    import httpx2

    for exc in (httpx2.ConnectError("refused"), httpx2.RemoteProtocolError("cut"), httpx.ReadTimeout("slow")):
        assert oc_transport.is_transport_fault(exc), exc
    assert not oc_transport.is_transport_fault(ValueError("a bug"))
