"""The response cache at the client: what is served, what is sent, what is stored.

Requests go to a loopback server that records every request (`http_fakes`), answering
`/v1/models` and `/version` as vLLM does, so the model's fingerprint is the server's own answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from branchpoint.errors import DamagedFileError, InputError
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.response_cache import RESPONSES_FILE, ResponseCache, determined, request_key
from branchpoint.models.spec import ModelSpec
from tests.models.http_fakes import FakeServer, recorded

MESSAGES = [{"role": "user", "content": "What is the capital of Australia?"}]


def vllm(server: FakeServer, version: str = "0.11.0", name: str = "qwen") -> None:
    """Make the fake server answer like vLLM `version` serving `name`, with a recorded chat reply."""
    server.reply("/v1/models", (200, {"object": "list", "data": [{"id": name, "owned_by": "vllm"}]}))
    server.reply("/version", (200, {"version": version}))
    server.reply("/v1/chat/completions", (200, recorded("vllm_qwen3_no_thinking.json")))


def client(server: FakeServer, cache: Path, **fields: Any) -> OpenAICompatibleClient:
    settings: dict[str, Any] = {"seed": 1, "temperature": 0.6, "retries": 0, **fields}
    spec = ModelSpec(
        provider="openai", name="qwen", base_url=server.base_url, style="chat", response_cache=str(cache), **settings
    )
    return OpenAICompatibleClient(spec)


def chats(server: FakeServer) -> int:
    return len(server.bodies("/v1/chat/completions"))


def test_a_request_sent_before_is_answered_from_the_cache(server: FakeServer, tmp_path: Path) -> None:
    vllm(server)
    first = client(server, tmp_path).chat(MESSAGES)
    again = client(server, tmp_path).chat(MESSAGES)  # a new client: another process, another run
    assert chats(server) == 1
    assert (first.cache_hit, again.cache_hit) == (False, True)
    assert (again.text, again.usage, again.finish_reason) == (first.text, first.usage, first.finish_reason)
    assert len(ResponseCache(tmp_path)) == 1 and (tmp_path / RESPONSES_FILE).is_file()


def test_two_seeds_are_two_requests_each_sent_once(server: FakeServer, tmp_path: Path) -> None:
    vllm(server)
    base = client(server, tmp_path)
    one, two = base.with_seed(11), base.with_seed(12)
    assert [one.chat(MESSAGES).cache_hit, two.chat(MESSAGES).cache_hit] == [False, False]
    assert [one.chat(MESSAGES).cache_hit, two.chat(MESSAGES).cache_hit] == [True, True]
    assert chats(server) == 2
    assert sorted(b["seed"] for b in server.bodies("/v1/chat/completions")) == [11, 12]


def test_another_server_version_misses(server: FakeServer, tmp_path: Path) -> None:
    vllm(server, "0.11.0")
    assert client(server, tmp_path).chat(MESSAGES).cache_hit is False
    vllm(server, "0.11.1")  # the server upgraded: its replies may differ
    assert client(server, tmp_path).chat(MESSAGES).cache_hit is False
    assert client(server, tmp_path).chat(MESSAGES).cache_hit is True
    assert chats(server) == 2


def test_unseeded_sampling_is_sent_and_not_stored_but_greedy_is_cached(server: FakeServer, tmp_path: Path) -> None:
    vllm(server)
    sampled = client(server, tmp_path, seed=None, temperature=0.7)
    assert [sampled.chat(MESSAGES).cache_hit for _ in range(2)] == [None, None]
    assert chats(server) == 2 and len(ResponseCache(tmp_path)) == 0
    greedy = client(server, tmp_path, seed=None, temperature=0.0)
    assert [greedy.chat(MESSAGES).cache_hit for _ in range(2)] == [False, True]
    assert chats(server) == 3


def test_determined_requests() -> None:
    assert determined({"seed": 3, "temperature": 0.9})
    assert determined({"temperature": 0})
    assert not determined({"temperature": 0.6})
    assert not determined({})  # no temperature sent: the server's default, usually 1
    assert not determined({"seed": 3, "stream": True})


def test_the_key_is_the_body_as_sent_and_the_fingerprint() -> None:
    fp = {"kind": "vllm", "version": "0.11.0", "model": "qwen"}
    body = {"model": "qwen", "messages": MESSAGES, "seed": 1, "temperature": 0.6}
    key = request_key("chat", body, fp)
    assert key == request_key("chat", dict(reversed(list(body.items()))), fp)  # canonical: key order aside
    assert key != request_key("chat", {**body, "seed": 2}, fp)
    assert key != request_key("completions", body, fp)
    assert key != request_key("chat", body, {**fp, "version": "0.11.1"})


def test_errors_and_malformed_replies_are_not_stored(server: FakeServer, tmp_path: Path) -> None:
    vllm(server)
    server.reply(
        "/v1/chat/completions",
        (200, {"error": {"message": "upstream timeout"}}),  # a gateway's 200 that is no completion
        (200, recorded("vllm_qwen3_no_thinking.json")),
    )
    assert client(server, tmp_path, retries=1).chat(MESSAGES).cache_hit is False  # the retry's request, stored
    assert client(server, tmp_path).chat(MESSAGES).cache_hit is True
    assert chats(server) == 2 and len(ResponseCache(tmp_path)) == 1


def test_async_calls_share_the_cache_with_blocking_ones(server: FakeServer, tmp_path: Path) -> None:
    vllm(server)
    assert client(server, tmp_path).chat(MESSAGES).cache_hit is False

    async def twice() -> list[bool | None]:
        c = client(server, tmp_path)
        return [(await c.achat(MESSAGES)).cache_hit, (await c.with_seed(5).achat(MESSAGES)).cache_hit]

    assert asyncio.run(twice()) == [True, False]
    assert chats(server) == 2


def test_a_damaged_cache_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / RESPONSES_FILE).write_bytes(b"not a database at all, " * 100)
    with pytest.raises(DamagedFileError, match="response cache is damaged"):
        ResponseCache(tmp_path)


def test_a_langchain_model_the_cache_cannot_see_is_refused(tmp_path: Path) -> None:
    from branchpoint.models.langchain_chat import LangChainChatClient

    spec = ModelSpec(
        provider="langchain",
        name="fake",
        style="chat",
        factory="langchain_core.language_models.fake_chat_models:FakeListChatModel",
        options={"responses": ["hi"]},
        response_cache=str(tmp_path),
    )
    with pytest.raises(InputError, match="response cache cannot see its requests"):
        LangChainChatClient(spec)
