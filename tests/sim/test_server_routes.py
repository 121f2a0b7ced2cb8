"""The simulated server's routes that the wire-format and vLLM-rule tests leave unpinned: `/health`,
`/v1/models`, `/v1/sim/stats`, the 400s and 404s of a malformed request on each generation route,
`/tokenize` of chat messages, and a streamed completion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from branchpoint.agents import prompts
from branchpoint.sim.server import build_state, create_app
from branchpoint.sim.tokens import token_ids
from branchpoint.sim.wire_format import MAX_MODEL_LEN

QUESTION = "Who painted the Mona Lisa?"
DOC = {"doc_id": "demo-004", "title": "Mona Lisa", "text": "The Mona Lisa was painted by Leonardo da Vinci."}
GENERATION_ROUTES = ["/v1/chat/completions", "/v1/completions", "/tokenize"]


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(build_state("instruct", latency_scale=0.0, served_name="sim-m")))


def error_of(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    assert err["code"] == status
    return err


def test_health_is_an_empty_200_and_models_lists_the_served_name(client: TestClient) -> None:
    health = client.get("/health")
    assert health.status_code == 200 and health.content == b""
    models = client.get("/v1/models").json()
    assert models["object"] == "list" and len(models["data"]) == 1
    model = models["data"][0]
    assert model["id"] == model["root"] == "sim-m" and model["object"] == "model"
    assert model["owned_by"] == "branchpoint-sim" and model["max_model_len"] == MAX_MODEL_LEN
    assert client.post("/v1/models").status_code == 405


def test_stats_count_the_requests_served_by_protocol(client: TestClient) -> None:
    chat = {"model": "sim-m", "messages": [{"role": "user", "content": QUESTION}], "seed": 1}
    assert client.post("/v1/chat/completions", json=chat).status_code == 200
    prompt = prompts.fewshot_prompt(QUESTION, [DOC], True, 60)
    assert client.post("/v1/completions", json={"prompt": prompt, "seed": 1, "temperature": 0.6}).status_code == 200
    stats = client.get("/v1/sim/stats").json()
    assert stats["profile"] == "instruct" and stats["questions_path"] == "demo" and stats["questions"] > 0
    assert stats["requests"] == {"plain": 1, "completion": 1}
    assert stats["sampling"] == {
        json.dumps({"temperature": 1.0, "top_p": 1.0, "seeded": True}): 1,
        json.dumps({"temperature": 0.6, "top_p": 1.0, "seeded": True}): 1,
    }
    assert stats["unknown_questions"] == {} and stats["flags"][:2] == ["--reasoning-parser", "qwen3"]


@pytest.mark.parametrize("path", GENERATION_ROUTES)
@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{not json", "request body is not valid JSON"), (b"[1, 2]", "request body must be a JSON object")],
)
def test_a_body_that_is_not_a_json_object_is_400(client: TestClient, path: str, content: bytes, message: str) -> None:
    r = client.post(path, content=content, headers={"content-type": "application/json"})
    assert error_of(r, 400) == {"message": message, "type": "BadRequestError", "param": None, "code": 400}


@pytest.mark.parametrize("path", GENERATION_ROUTES)
def test_another_model_is_404_and_n_not_1_is_400_on_every_route(client: TestClient, path: str) -> None:
    body = {"prompt": "x", "messages": [{"role": "user", "content": QUESTION}]}
    err = error_of(client.post(path, json={**body, "model": "other"}), 404)
    assert err["message"] == "The model `other` does not exist." and err["type"] == "NotFoundError"
    assert err["param"] == "model"
    err = error_of(client.post(path, json={**body, "n": 2}), 400)
    assert err["message"] == "the simulated server supports n = 1 only" and err["param"] == "n"
    err = error_of(client.post(path, json={**body, "n": "x"}), 400)
    assert err["message"] == "n: expected a whole number, got 'x'" and err["param"] == "n"


@pytest.mark.parametrize(
    ("path", "body", "param", "message"),
    [
        ("/v1/chat/completions", {}, "messages", "messages: expected a non-empty list"),
        ("/v1/chat/completions", {"messages": []}, "messages", "messages: expected a non-empty list"),
        ("/v1/completions", {"prompt": 3}, "prompt", "prompt: expected a string"),
        ("/tokenize", {}, "prompt", "tokenize: expected prompt (a string) or messages"),
    ],
)
def test_a_missing_field_is_400_naming_it(
    client: TestClient, path: str, body: dict[str, Any], param: str, message: str
) -> None:
    err = error_of(client.post(path, json=body), 400)
    assert err["param"] == param and err["message"] == message


def test_tokenize_counts_the_joined_message_contents(client: TestClient) -> None:
    messages = [{"role": "system", "content": "Be brief"}, {"role": "user"}, {"role": "user", "content": QUESTION}]
    body = client.post("/tokenize", json={"messages": messages}).json()
    ids = token_ids(f"Be brief\n\n{QUESTION}")  # the contents kept apart: "briefWho" would be other tokens
    assert body == {"count": len(ids), "max_model_len": MAX_MODEL_LEN, "tokens": ids, "token_strs": None}


@pytest.mark.parametrize("include_usage", [False, True])
def test_a_streamed_completion_is_the_same_completion_in_pieces(client: TestClient, include_usage: bool) -> None:
    prompt = prompts.fewshot_prompt(QUESTION, [DOC], True, 60)
    body = {"model": "sim-m", "prompt": prompt, "seed": 4, "temperature": 1.0, "max_tokens": 48}
    whole = client.post("/v1/completions", json=body).json()
    r = client.post(
        "/v1/completions", json={**body, "stream": True, "stream_options": {"include_usage": include_usage}}
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "text_completion" and c["model"] == "sim-m" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("cmpl-")
    pieces = [c for c in chunks if c["choices"]]
    choice = whole["choices"][0]
    assert "".join(c["choices"][0]["text"] for c in pieces) == choice["text"]
    assert [c["choices"][0]["finish_reason"] for c in pieces] == [None] * (len(pieces) - 1) + [choice["finish_reason"]]
    usage = [c["usage"] for c in chunks if not c["choices"]]
    assert usage == ([whole["usage"]] if include_usage else [])
