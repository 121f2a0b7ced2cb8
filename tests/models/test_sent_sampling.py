"""The sampling as sent: every client's request bodies feed `SentSampling`, so a record's
`sampling` is what the server received, for the OpenAI-compatible client (completion and chat:
embedded llama.cpp, vLLM, the simulated server), the LangChain client and the scripted model;
and `model.extra_body` may not set the sampling fields runs and forks send themselves."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from branchpoint.models import ModelSpec, OpenAICompatibleClient, ScriptedModel
from branchpoint.models.langchain_chat import LangChainChatClient
from branchpoint.models.request_log import current_execution
from branchpoint.models.sent_sampling import SentSampling, sampling_of
from tests.models.http_fakes import FakeServer
from tests.models.test_openai_compat import CHAT_LLAMACPP, COMPLETION_LLAMACPP

MESSAGES = [{"role": "user", "content": "capital of Australia?"}]


def openai_client(server: FakeServer, **fields: Any) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(ModelSpec(provider="openai", base_url=server.base_url, name="m", **fields))


@pytest.mark.parametrize("style", ["completion", "chat"])
@pytest.mark.parametrize("use_async", [False, True])
def test_openai_compatible_requests_report_their_sampling(server: FakeServer, style: str, use_async: bool) -> None:
    server.reply("/v1/completions", (200, COMPLETION_LLAMACPP))
    server.reply("/v1/chat/completions", (200, CHAT_LLAMACPP))
    sink = SentSampling()
    base = openai_client(server, style=style, temperature=0.2, seed=3, extra_body={"top_k": 5})
    client = base.with_request_log(sink).with_sampling(temperature=0.6, top_p=0.95, seed=11)

    async def call() -> None:
        current_execution.set("e1")
        if style == "chat":
            await client.achat(MESSAGES)
        else:
            await client.acomplete("Q:")

    if use_async:
        asyncio.run(call())
    else:
        token = current_execution.set("e1")
        try:
            client.chat(MESSAGES) if style == "chat" else client.complete("Q:")
        finally:
            current_execution.reset(token)
    body = server.bodies("/v1/chat/completions" if style == "chat" else "/v1/completions")[-1]
    sent = sink.pop("e1")
    assert sent == sampling_of(body)
    assert sent is not None and (sent["temperature"], sent["top_p"], sent["seed"], sent["top_k"]) == (0.6, 0.95, 11, 5)
    assert sink.pop("e1") is None  # forgotten once taken


def test_langchain_requests_report_the_models_own_sampling_and_the_calls(server: FakeServer) -> None:
    server.reply("/v1/chat/completions", (200, CHAT_LLAMACPP), (200, CHAT_LLAMACPP))
    options = {"model": "m", "base_url": f"{server.base_url}", "api_key": "x", "max_retries": 0}
    spec = ModelSpec(
        provider="langchain",
        style="chat",
        name="m",
        factory="langchain_openai:ChatOpenAI",
        options=options,
        temperature=0.3,
    )
    sink = SentSampling()
    client = LangChainChatClient(spec).with_request_log(sink)
    token = current_execution.set("run")
    try:
        client.chat(MESSAGES)  # a run: the spec's temperature goes out
        run_sent = sink.pop("run")
        client.with_sampling(temperature=0.6, top_p=0.95, seed=7).chat(MESSAGES)  # a fork branch
        fork_sent = sink.pop("run")
    finally:
        current_execution.reset(token)
    bodies = server.bodies("/v1/chat/completions")
    assert run_sent is not None and run_sent["temperature"] == 0.3 == bodies[0]["temperature"]
    assert fork_sent is not None and (fork_sent["temperature"], fork_sent["top_p"]) == (0.6, 0.95)
    assert (bodies[1]["temperature"], bodies[1]["top_p"], bodies[1]["seed"]) == (0.6, 0.95, 7)


def test_the_scripted_model_reports_what_it_was_given() -> None:
    sink = SentSampling()
    model = ScriptedModel(["x"], cycle=True).with_request_log(sink).with_sampling(temperature=0.6, seed=2)
    token = current_execution.set("s")
    try:
        model.complete("Q:")
    finally:
        current_execution.reset(token)
    assert sink.pop("s") == {"temperature": 0.6, "seed": 2}  # unset fields are not sent


@pytest.mark.parametrize("field", ["temperature", "top_p", "seed"])
def test_extra_body_may_not_set_the_sampling_runs_and_forks_send(field: str) -> None:
    with pytest.raises(ValidationError, match=f"sets {field}, which runs and fork studies send themselves"):
        ModelSpec(extra_body={field: 0.5, "top_k": 4})
    assert ModelSpec(extra_body={"top_k": 4}).extra_body == {"top_k": 4}  # other sampling fields: sent and recorded
