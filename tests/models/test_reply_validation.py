"""Replies validated before they are scored (issue 28): a 200 reply that is no completion (a
gateway's `{"error": ...}`, no `choices`) is retried, then makes the execution `incomplete`,
exactly like an HTTP 500, for the completion and chat styles and every policy."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments import RunStore
from branchpoint.models import TransportError
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.replies import MalformedReply, check_chat, check_chat_message, check_completion
from branchpoint.models.spec import ModelSpec
from tests.servers.openai_fault_server import FaultConfig, FaultServer

runner = CliRunner()

GOOD_COMPLETION = {
    "id": "c",
    "object": "text_completion",
    "choices": [{"index": 0, "text": "hi", "finish_reason": "stop"}],
}
GOOD_CHAT = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    "reply",
    [
        {"error": {"message": "upstream overloaded"}},
        {"choices": []},
        {"choices": [{"index": 0, "finish_reason": "stop"}]},  # no text
        {"choices": [{"index": 0, "text": None}]},
        {"choices": [{"text": "x"}], "usage": {"prompt_tokens": "many"}},
        ["not", "an", "object"],
    ],
)
def test_completion_replies_off_the_schema_are_malformed(reply):
    with pytest.raises(MalformedReply, match="completion reply"):
        check_completion(reply)


@pytest.mark.parametrize(
    "reply",
    [
        {"error": "bad gateway"},
        {"choices": None},
        {"choices": [{"index": 0, "message": None}]},
        {"choices": [{"message": {"content": 3}}]},
        {
            "choices": [
                {"message": {"content": None, "tool_calls": [{"function": {"name": "search", "arguments": {}}}]}}
            ]
        },
    ],
)
def test_chat_replies_off_the_schema_are_malformed(reply):
    with pytest.raises(MalformedReply, match="chat reply"):
        check_chat(reply)


def test_valid_replies_pass_and_keep_their_extra_fields():
    assert check_completion(GOOD_COMPLETION)["choices"][0]["text"] == "hi"
    reasoning = {"choices": [{"message": {"content": None, "reasoning": "hmm"}}], "usage": {"prompt_tokens": None}}
    assert check_chat(reasoning)["choices"][0]["message"]["reasoning"] == "hmm"
    assert check_chat(GOOD_CHAT)["choices"][0]["message"]["content"] == "hi"


def test_langchain_replies_are_checked_too():
    from langchain_core.messages import AIMessage, HumanMessage

    assert check_chat_message(AIMessage(content="hi")).content == "hi"
    with pytest.raises(MalformedReply, match="not an AIMessage"):
        check_chat_message(HumanMessage(content="hi"))
    with pytest.raises(MalformedReply, match="not an AIMessage"):
        check_chat_message({"error": "upstream overloaded"})


def client(base_url: str, style: str, retries: int = 2) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(
        ModelSpec(provider="openai", base_url=base_url, name="m", style=style, retries=retries, timeout_s=5)
    )


def test_every_call_of_the_client_retries_a_malformed_reply_then_gives_up(monkeypatch):
    monkeypatch.setattr("branchpoint.models.openai_compat.wait_exponential", lambda **kw: lambda rs: 0.0)
    config = FaultConfig(malformed_rate=1.0)
    with FaultServer(config) as server:
        c = client(server.base_url, "completion", retries=2)
        calls = {
            "complete": lambda: c.complete("Question: x"),
            "chat": lambda: c.chat([{"role": "user", "content": "x"}]),
            "acomplete": lambda: asyncio.run(c.acomplete("Question: x")),
            "achat": lambda: asyncio.run(c.achat([{"role": "user", "content": "x"}])),
        }
        for name, call in calls.items():
            before = config.counts["malformed"]
            with pytest.raises(TransportError, match="does not follow the OpenAI schema.*upstream overloaded"):
                call()
            assert config.counts["malformed"] - before == 3, name  # 1 + 2 retries, then incomplete
        config.malformed_rate = 0.0
        assert c.complete("Question: x").text and c.chat([{"role": "user", "content": "x"}]).text


def spec_file(tmp_path, base_url: str, policy: str, name: str) -> str:
    style = "completion" if policy == "constrained" else "chat"
    data = {
        "name": name,
        "questions": {"path": "demo", "limit": 10},
        "model": {
            "provider": "openai",
            "base_url": base_url,
            "name": "m",
            "style": style,
            "max_tokens": 32,
            "retries": 1,
        },
        "agent": {"policy": policy, "search": False, "malformed_retries": 0},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def outcomes(run_dir) -> dict[str, tuple]:
    return {r.question_id: (r.status, r.final_answer) for r in RunStore(run_dir).records() if r.status != "incomplete"}


@pytest.mark.parametrize("policy", ["constrained", "tagged", "native", "no_search"])
def test_malformed_replies_make_executions_incomplete_never_scored(tmp_path, monkeypatch, policy):
    """40% of the replies are a gateway's 200 `{"error": ...}`: the run exits 3 (or 0), never
    crashes, records no `malformed` action for them, and the reruns end with every execution's
    outcome equal to a healthy run's."""
    monkeypatch.setattr("branchpoint.models.openai_compat.wait_exponential", lambda **kw: lambda rs: 0.0)
    chat_text = "<answer>Canberra</answer>" if policy == "tagged" else "Canberra"
    with FaultServer(FaultConfig(chat_text=chat_text)) as healthy:
        ref = tmp_path / "ref"
        done = runner.invoke(
            app, ["run", spec_file(tmp_path, healthy.base_url, policy, "ref"), "--out", str(ref), "--no-progress"]
        )
        assert done.exit_code == 0, done.output
    reference = outcomes(ref)
    assert len(reference) == 10 and all(status == "ok" for status, _ in reference.values())
    config = FaultConfig(malformed_rate=0.4, seed=7, chat_text=chat_text)
    with FaultServer(config) as server:
        spec = spec_file(tmp_path, server.base_url, policy, "ref")
        run_dir = tmp_path / "run"
        codes = []
        for _ in range(12):
            result = runner.invoke(app, ["run", spec, "--out", str(run_dir), "--no-progress"])
            codes.append(result.exit_code)
            assert result.exit_code in (0, 3), result.output
            if result.exit_code == 0:
                break
    assert config.counts["malformed"] > 0 and codes[0] == 3 and codes[-1] == 0, codes
    records = RunStore(run_dir).records()
    assert not [r for r in records if r.status == "malformed"]
    assert all("OpenAI schema" in (r.error or "") for r in records if r.status == "incomplete")
    assert outcomes(run_dir) == reference
