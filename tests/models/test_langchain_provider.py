"""`model.provider: langchain`: any LangChain chat model from a factory, through its public API.

Two real LangChain models: `langchain_core`'s GenericFakeChatModel (given bind_tools, as
LangChain's own docs do for tool tests) and `langchain_openai.ChatOpenAI` against a loopback
server replaying recorded vLLM bodies. And one whole run: the native policy's agent, searching
the demo corpus, with the fake model as its model.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.models import ModelSpec, open_model
from branchpoint.models.langchain_chat import LangChainChatClient
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
