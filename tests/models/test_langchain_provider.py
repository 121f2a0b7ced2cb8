"""`model.provider: langchain`: any LangChain chat model from a factory, through its public API.

Two real LangChain models: `langchain_core`'s GenericFakeChatModel (given bind_tools, as
LangChain's own docs do for tool tests) and `langchain_openai.ChatOpenAI` against a loopback
server replaying recorded vLLM bodies. And one whole run: the native policy's agent, searching
the demo corpus, with the fake model as its model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import yaml
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.models import ModelSpec, OpenAICompatibleClient, open_model
from branchpoint.models.langchain_chat import LangChainChatClient
from branchpoint.models.request_log import RequestLog, read_requests
from tests.evaluation.fake_openai import chat_body
from tests.models.http_fakes import FakeServer, recorded

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
BOUND: list[Any] = []  # tools each fake model was bound with (per test)


class ToolFakeChatModel(GenericFakeChatModel):
    """GenericFakeChatModel that accepts bind_tools (records the tools, replies as scripted)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        BOUND.append(tools)
        return self


def search_then_answer(answer: str = "Canberra") -> ToolFakeChatModel:
    """A factory for specs: one search tool call with usage and reasoning, then an answer, repeated."""

    def replies():
        while True:
            yield AIMessage(
                content=[{"type": "reasoning", "reasoning": "I should look this up."}],
                tool_calls=[{"name": "search", "args": {"query": "capital of Australia"}, "id": "call_1"}],
                usage_metadata={"input_tokens": 120, "output_tokens": 18, "total_tokens": 138},
            )
            yield AIMessage(
                content=answer,
                usage_metadata={
                    "input_tokens": 300,
                    "output_tokens": 4,
                    "total_tokens": 304,
                    "output_token_details": {"reasoning": 0},
                },
            )

    return ToolFakeChatModel(messages=replies())


def not_a_chat_model() -> object:
    return object()


def spec(**kw: Any) -> ModelSpec:
    return ModelSpec(
        **{
            "provider": "langchain",
            "style": "chat",
            "name": "fake",
            "factory": "tests.models.test_langchain_provider:search_then_answer",
            **kw,
        }
    )


def test_fake_chat_model_tool_call_usage_and_reasoning() -> None:
    BOUND.clear()
    with open_model(spec(options={"answer": "Canberra"})) as model:
        assert isinstance(model, LangChainChatClient)
        first = model.chat([{"role": "user", "content": "capital of Australia?"}], tools=TOOLS)
        second = model.chat([{"role": "user", "content": "capital of Australia?"}])
    assert BOUND == [TOOLS]
    assert first.tool_calls == [{"name": "search", "args": {"query": "capital of Australia"}, "id": "call_1"}]
    assert first.reasoning == "I should look this up."
    assert (first.usage.input_tokens, first.usage.output_tokens) == (120, 18)
    assert first.usage.reasoning_tokens and first.usage.model_extra.get("reasoning_tokens_estimated") is True
    assert second.text == "Canberra" and second.reasoning is None and second.usage.reasoning_tokens == 0


def test_factory_errors_are_one_line() -> None:
    with pytest.raises(InputError, match="expected package.module:function"):
        LangChainChatClient(spec(factory="nocolon"))
    with pytest.raises(InputError, match="cannot import no_such_pkg"):
        LangChainChatClient(spec(factory="no_such_pkg.mod:f"))
    with pytest.raises(InputError, match="returned object, not a LangChain BaseChatModel"):
        LangChainChatClient(spec(factory="tests.models.test_langchain_provider:not_a_chat_model"))
    with pytest.raises(InputError, match="does not accept them"):
        LangChainChatClient(spec(options={"colour": "red"}))
    with pytest.raises(InputError, match="needs style chat"):
        LangChainChatClient(spec(style="completion"))


def test_chat_openai_against_a_local_server(server: FakeServer) -> None:
    body = recorded("vllm_qwen3_tool_call_reasoning.json")
    server.reply("/v1/chat/completions", (200, body))
    model = LangChainChatClient(
        spec(
            name="Qwen/Qwen3-8B",
            factory="langchain_openai:ChatOpenAI",
            seed=5,
            options={"model": "Qwen/Qwen3-8B", "base_url": server.base_url, "api_key": "not-needed", "max_retries": 0},
        )
    )
    call = model.chat([{"role": "user", "content": "Who painted the Mona Lisa?"}], tools=TOOLS, max_tokens=77)
    sent = server.bodies("/v1/chat/completions")[0]
    assert sent["tools"][0]["function"]["name"] == "search"  # bind_tools
    assert sent["seed"] == 5 and 77 in (sent.get("max_tokens"), sent.get("max_completion_tokens"))
    wanted = body["choices"][0]["message"]["tool_calls"][0]
    assert call.tool_calls[0]["name"] == wanted["function"]["name"] == "search"
    assert call.usage.input_tokens == body["usage"]["prompt_tokens"]
    assert call.usage.output_tokens == body["usage"]["completion_tokens"]
    assert call.finish_reason == body["choices"][0]["finish_reason"]
    # ChatOpenAI drops vLLM's `reasoning` field (its documented scope): nothing to report
    assert call.reasoning is None


def test_a_whole_run_with_a_langchain_model(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    data = {
        "name": "langchain",
        "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 0}},
        "model": {
            "provider": "langchain",
            "style": "chat",
            "name": "fake",
            "factory": "tests.models.test_langchain_provider:search_then_answer",
        },
        "agent": {"policy": "native", "search_cap": 2, "top_k": 2},
        "retrieval": {"default": "demo", "sources": {"demo": {"kind": "bm25"}}},  # no encoding: fast
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    summary = run_experiment(load_spec(path), tmp_path / "run", progress=False)
    records = RunStore(tmp_path / "run").records()
    assert summary.ran == 2 and summary.statuses == {"ok": 2} and len(records) == 2
    for record in records:
        assert record.status == "ok" and record.final_answer == "Canberra" and record.search_calls == 1
        assert record.input_tokens == 420 and record.output_tokens == 22
        assert [s.query for s in record.steps if s.kind == "search"] == ["capital of Australia"]


# --- every model setting sent, and the body sent logged -------------------------------------------

#: A spec that sets every model setting the OpenAI-compatible provider sends.
ALL_SETTINGS: dict[str, Any] = {
    "temperature": 0.7,
    "top_p": 0.9,
    "seed": 3,
    "max_tokens": 99,
    "reasoning_effort": "medium",
    "extra_body": {"top_k": 20, "chat_template_kwargs": {"custom": 1}},
}


def chat_openai(
    server: FakeServer, name: str = "Qwen/Qwen3-8B", options: dict[str, Any] | None = None, **fields: Any
) -> LangChainChatClient:
    """ChatOpenAI against the loopback server (options added to the ones it needs)."""
    own = {"model": name, "base_url": server.base_url, "api_key": "not-needed", "max_retries": 0, **(options or {})}
    return LangChainChatClient(spec(name=name, factory="langchain_openai:ChatOpenAI", options=own, **fields))


def call(client: Any, kind: str, use_async: bool) -> None:
    messages = [{"role": "user", "content": "capital of Australia?"}]

    async def acall() -> None:
        await (client.achat(messages, tools=TOOLS) if kind == "chat" else client.acomplete("Q:", stop=["\n"]))

    if use_async:
        asyncio.run(acall())
    else:
        client.chat(messages, tools=TOOLS) if kind == "chat" else client.complete("Q:", stop=["\n"])


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", ["chat", "complete"])
def test_chat_openai_sends_every_model_setting(server: FakeServer, kind: str, use_async: bool) -> None:
    """The body ChatOpenAI sends holds every setting of the spec, as the openai provider's does."""
    server.reply("/v1/chat/completions", (200, recorded("vllm_qwen3_tool_call_reasoning.json")))
    call(chat_openai(server, **ALL_SETTINGS), kind, use_async)
    openai_model = OpenAICompatibleClient(
        ModelSpec(provider="openai", base_url=server.base_url, name="Qwen/Qwen3-8B", style="chat", **ALL_SETTINGS)
    )
    openai_model.chat([{"role": "user", "content": "capital of Australia?"}], tools=TOOLS)
    sent, by_openai = server.bodies("/v1/chat/completions")
    assert (sent["temperature"], sent["top_p"], sent["seed"]) == (0.7, 0.9, 3)
    assert sent["max_tokens"] == sent["max_completion_tokens"] == 99
    # qwen3 family: medium effort is thinking on with the default budget; extra_body merged over it
    assert sent["chat_template_kwargs"] == {"enable_thinking": True, "custom": 1}
    assert sent["thinking_token_budget"] == 1024 and sent["top_k"] == 20
    if kind == "chat":
        del sent["stream"]  # ChatOpenAI's own field
        assert sent == by_openai  # the same body as provider openai
    else:
        assert sent["stop"] == ["\n"] and sent["messages"] == [{"role": "user", "content": "Q:"}]


def test_reasoning_effort_in_the_models_own_field(server: FakeServer) -> None:
    """gpt-oss reads `reasoning_effort`: ChatOpenAI's own setting carries it (fork views too)."""
    server.reply("/v1/chat/completions", (200, recorded("vllm_qwen3_tool_call_reasoning.json")))
    model = chat_openai(server, name="openai/gpt-oss-20b", reasoning_effort="low")
    model.with_sampling(temperature=0.6, seed=8).chat([{"role": "user", "content": "hi"}])
    (sent,) = server.bodies("/v1/chat/completions")
    assert (sent["reasoning_effort"], sent["temperature"], sent["seed"]) == ("low", 0.6, 8)


@pytest.mark.parametrize("use_async", [False, True])
def test_the_request_log_holds_the_body_sent(server: FakeServer, tmp_path, use_async: bool) -> None:
    """`--log-requests` logs each HTTP body as the server received it, not the call's arguments."""
    server.reply("/v1/chat/completions", (200, recorded("vllm_qwen3_tool_call_reasoning.json")))
    log = RequestLog(tmp_path / "requests.jsonl")
    client = chat_openai(server, **ALL_SETTINGS).with_request_log(log)
    call(client, "chat", use_async)
    call(client.with_sampling(temperature=0.2, seed=9), "complete", use_async)  # a fork branch's view
    chat_openai(server).chat([{"role": "user", "content": "not logged"}])  # another client: no log
    log.close()
    logged = [line["body"] for line in read_requests(tmp_path / "requests.jsonl")]
    received = [json.loads(r.raw) for r in server.requests if r.path == "/v1/chat/completions"]
    assert len(logged) == 2 and logged == received[:2]
    assert [list(b) for b in logged] == [list(b) for b in received[:2]]  # the same fields in the same order
    assert logged[1]["temperature"] == 0.2 and logged[1]["stop"] == ["\n"]


def test_settings_a_model_cannot_send_are_refused(server: FakeServer) -> None:
    with pytest.raises(InputError, match="model.options.temperature: every call sends model.temperature"):
        chat_openai(server, options={"temperature": 0.3})
    # the fake model has no extra_body setting: extra fields or an effort it cannot carry are refused
    with pytest.raises(InputError, match="model.extra_body: ToolFakeChatModel has no extra_body setting"):
        LangChainChatClient(spec(extra_body={"top_k": 4}))
    with pytest.raises(InputError, match="model.reasoning_effort: ToolFakeChatModel has neither reasoning_effort"):
        LangChainChatClient(spec(reasoning_effort="high"))


def test_a_run_with_chat_openai_sends_and_logs_the_specs_settings(server: FakeServer, tmp_path, monkeypatch) -> None:
    """`run --log-requests` on ChatOpenAI: every request carries model.temperature and the
    reasoning effort, and requests.jsonl holds exactly the bodies the server received."""
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    server.responder = lambda path, body: (200, chat_body("Canberra", 90, 3))
    data = {
        "name": "langchain-http",
        "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
        "model": {
            "provider": "langchain",
            "style": "chat",
            "name": "openai/gpt-oss-20b",
            "factory": "langchain_openai:ChatOpenAI",
            "options": {"model": "openai/gpt-oss-20b", "base_url": server.base_url, "api_key": "x", "max_retries": 0},
            "temperature": 0.4,
            "reasoning_effort": "high",
        },
        "agent": {"policy": "native", "search_cap": 1, "top_k": 1},
        "retrieval": {"default": "demo", "sources": {"demo": {"kind": "bm25"}}},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    summary = run_experiment(load_spec(path), tmp_path / "run", progress=False, concurrency=2, log_requests=True)
    assert summary.statuses == {"ok": 4}
    received = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert len(received) >= 4
    assert all((r.body["temperature"], r.body["reasoning_effort"]) == (0.4, "high") for r in received)
    logged = read_requests(tmp_path / "run" / "requests.jsonl")
    key = lambda body: json.dumps(body, sort_keys=True)  # concurrent requests: compared as multisets
    assert sorted(key(line["body"]) for line in logged) == sorted(key(json.loads(r.raw)) for r in received)
    records = RunStore(tmp_path / "run").records()
    assert all(r.sampling and r.sampling["temperature"] == 0.4 for r in records)
