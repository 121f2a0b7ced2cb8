"""The simulated server returns token log probabilities in vLLM's shapes when asked, from its own
decision probabilities, and nothing else about a reply changes."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from branchpoint.agents import prompts
from branchpoint.agents.decision_logprobs import decision_record
from branchpoint.models.logprobs import read_chat_logprobs, read_completion_logprobs
from branchpoint.sim.behaviour import request_rng, search_prob
from branchpoint.sim.logprobs import sim_tokens
from branchpoint.sim.passages import features
from branchpoint.sim.server import build_state, create_app
from branchpoint.tools.search import SEARCH_TOOL_SCHEMA

QUESTION = "Who painted the Mona Lisa?"


@pytest.fixture(scope="module")
def sim() -> tuple[TestClient, Any]:
    state = build_state("over_searching", latency_scale=0.0)
    return TestClient(create_app(state)), state


def post(client: TestClient, path: str, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    return r.json()


def true_p_search(state: Any, chat: bool) -> float:
    """The simulator's P(SEARCH) at temperature 1 for the question with nothing shown (completions never reason)."""
    q = state.bank.lookup(QUESTION)
    return search_prob(state.profile, q, features(q, []), state.profile.default_effort if chat else "none")


def chat_body(state: Any, **extra: Any) -> dict[str, Any]:
    return {
        "model": state.served_name,
        "messages": [{"role": "user", "content": QUESTION}],
        "tools": [SEARCH_TOOL_SCHEMA],
        "temperature": 0.6,
        "seed": 11,
        **extra,
    }


def test_chat_logprobs_have_vllms_shape_and_the_true_decision_probability(sim) -> None:
    client, state = sim
    choice = post(client, "/v1/chat/completions", chat_body(state, logprobs=True, top_logprobs=4))["choices"][0]
    content = choice["logprobs"]["content"]
    assert all(set(e) == {"token", "logprob", "bytes", "top_logprobs"} for e in content)
    assert all(len(e["top_logprobs"]) <= 4 and e["bytes"] == list(e["token"].encode()) for e in content)
    assert content[0]["token"] == "<think>"  # the reasoning block is listed, as vLLM lists it
    record = decision_record(read_chat_logprobs(choice["logprobs"]), "native")
    assert record is not None
    assert record["p_search"] == pytest.approx(true_p_search(state, chat=True))
    assert record["p_search"] + record["p_answer"] == pytest.approx(record["top_mass"])


def test_completion_logprobs_have_vllms_legacy_shape(sim) -> None:
    client, state = sim
    prompt = prompts.fewshot_prompt(QUESTION, [], True, 60, None)
    body = {"model": state.served_name, "prompt": prompt, "temperature": 0, "stop": ["\n"], "logprobs": 2}
    choice = post(client, "/v1/completions", body)["choices"][0]
    lp = choice["logprobs"]
    assert set(lp) == {"text_offset", "token_logprobs", "tokens", "top_logprobs"}
    assert "".join(lp["tokens"]) == choice["text"] and lp["text_offset"][0] == len(prompt)
    assert all(t in top and len(top) <= 3 for t, top in zip(lp["tokens"], lp["top_logprobs"]))  # sampled included
    record = decision_record(read_completion_logprobs(lp), "constrained")
    assert record is not None and record["position"] == 0
    assert record["p_search"] == pytest.approx(true_p_search(state, chat=False))
    assert math.exp(lp["token_logprobs"][0]) in (pytest.approx(record["p_search"]), pytest.approx(record["p_answer"]))


@pytest.mark.parametrize("chat", [True, False])
def test_asking_for_logprobs_changes_nothing_else(sim, chat: bool) -> None:
    client, state = sim
    for seed in range(6):
        if chat:
            plain = post(client, "/v1/chat/completions", chat_body(state, seed=seed))
            asked = post(client, "/v1/chat/completions", chat_body(state, seed=seed, logprobs=True, top_logprobs=3))
        else:
            body = {"model": state.served_name, "prompt": prompts.fewshot_prompt(QUESTION, [], True, 60, None)}
            body.update(temperature=1.0, seed=seed, stop=["\n"], logprobs=None)  # as langchain-openai sends
            plain = post(client, "/v1/completions", body)
            asked = post(client, "/v1/completions", {**body, "logprobs": 3})
        assert plain["choices"][0]["logprobs"] is None and asked["choices"][0]["logprobs"] is not None
        for reply in (plain, asked):
            reply["choices"][0].pop("logprobs")
            for key in ("id", "created"):
                reply.pop(key)
        plain_choice, asked_choice = plain["choices"][0], asked["choices"][0]
        if chat:  # tool-call ids are drawn too: equal, since the draws are
            assert plain_choice["message"] == asked_choice["message"]
        assert plain == asked


@pytest.mark.parametrize("extra", [{}, {"logprobs": None}, {"logprobs": False}])
def test_a_request_that_asks_for_none_is_drawn_as_before_the_setting_existed(extra: dict[str, Any]) -> None:
    """The draws' seed is the body's hash (stream fields left out) exactly as it was: a null
    `logprobs` (langchain-openai sends one on every completion) stays in it."""
    body = {"model": "m", "prompt": "p", "temperature": 1.0, "seed": 4, "stream": False, **extra}
    material = {k: v for k, v in body.items() if k != "stream"}
    digest = hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).digest()
    expected = np.random.default_rng(int.from_bytes(digest[:16])).random(3)
    assert np.array_equal(request_rng(body, np.random.default_rng(0)).random(3), expected)


def test_logprobs_asked_for_wrongly_are_refused_as_vllm_does(sim) -> None:
    client, state = sim
    err = post(client, "/v1/chat/completions", chat_body(state, top_logprobs=2), status=400)
    assert "`logprobs` must be set to true" in err["error"]["message"]
    err = post(client, "/v1/chat/completions", chat_body(state, logprobs=True, top_logprobs=21), status=400)
    assert "greater than max allowed: 20" in err["error"]["message"]


def test_sim_tokens_join_back_into_the_text() -> None:
    text = '<tool_call>\n{"name": "search", "arguments": {"query": "Leonardo da Vinci 1503"}}\n</tool_call>'
    tokens = sim_tokens(text)
    assert "".join(tokens) == text and tokens[0] == "<tool_call>" and tokens[-1] == "</tool_call>"
    assert "Leonard" in tokens  # runs of letters are cut every 7
