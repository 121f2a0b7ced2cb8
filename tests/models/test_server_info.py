"""The model server a provenance block names: kind and version asked over HTTP for a server that
runs elsewhere, known without asking for the servers branchpoint starts itself.

Bodies replayed from tests/models/recorded/ (vllm_version.json, llamacpp_props.json); the
/v1/models lists are vLLM's and llama.cpp's shape (`owned_by` names the server).
"""

from __future__ import annotations

import socket

import branchpoint
from branchpoint.models import ModelSpec
from branchpoint.models.server_info import describe_model, probe_server
from tests.models.http_fakes import FakeServer, recorded


def models(model_id: str, owner: str) -> dict:
    return {"object": "list", "data": [{"id": model_id, "object": "model", "owned_by": owner}]}


def test_vllm_kind_and_version_from_version_and_models(server: FakeServer) -> None:
    server.reply("/version", (200, recorded("vllm_version.json")))
    server.reply("/v1/models", (200, models("Qwen/Qwen3-8B", "vllm")))
    found = describe_model(ModelSpec(provider="openai", base_url=server.base_url, name="Qwen/Qwen3-8B"))
    assert (found.provider, found.kind, found.version) == ("openai", "vllm", "0.11.2")
    assert found.served_models == ["Qwen/Qwen3-8B"] and found.error is None


def test_llamacpp_kind_and_build_from_props(server: FakeServer) -> None:
    server.reply("/props", (200, recorded("llamacpp_props.json")))
    server.reply("/v1/models", (200, models("gemma", "llamacpp")))
    found = probe_server(server.base_url)
    assert (found["kind"], found["version"]) == ("llamacpp", "b6123-0d8831543")


def test_a_server_that_does_not_answer_is_recorded_with_the_error_not_refused() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    found = describe_model(
        ModelSpec(provider="openai", base_url=f"http://bp:hunter2secret@127.0.0.1:{port}/v1", name="m")
    )
    assert found.error and found.kind is None
    assert "hunter2secret" not in found.model_dump_json()  # the URL's password is masked


def test_servers_branchpoint_starts_are_known_without_asking() -> None:
    sim = describe_model(ModelSpec(provider="sim", name="branchpoint-sim-instruct"))
    assert (sim.kind, sim.version) == ("branchpoint-sim", branchpoint.__version__)
    embedded = describe_model(ModelSpec(provider="embedded"))
    assert embedded.kind == "llama-cpp-python"
