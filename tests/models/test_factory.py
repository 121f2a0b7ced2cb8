"""open_model: which client a spec's provider gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import branchpoint.models.factory as factory
from branchpoint.errors import InputError
from branchpoint.models import ModelSpec, OpenAICompatibleClient, ScriptedModel, open_model


def test_scripted_cycles_the_script() -> None:
    spec = ModelSpec(provider="scripted", name="demo", script=["first", "second"])
    with open_model(spec) as model:
        assert isinstance(model, ScriptedModel)
        assert model.name == "demo"
        assert [model.complete("p").text for _ in range(5)] == ["first", "second", "first", "second", "first"]


@pytest.mark.parametrize("script", [None, []])
def test_scripted_without_script_is_an_input_error(script: list[str] | None) -> None:
    with pytest.raises(InputError, match="model.script"):
        with open_model(ModelSpec(provider="scripted", script=script)):
            pass


def test_openai_without_base_url_is_an_input_error() -> None:
    with pytest.raises(InputError, match="base_url"):
        with open_model(ModelSpec(provider="openai", name="m")):
            pass


def test_openai_gives_a_client_for_the_base_url() -> None:
    spec = ModelSpec(provider="openai", name="m", base_url="http://127.0.0.1:9/v1")
    with open_model(spec) as model:
        assert isinstance(model, OpenAICompatibleClient)
        assert model.base_url == "http://127.0.0.1:9/v1"
        assert model.name == "m"


def test_embedded_starts_and_stops_the_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    events: list[Any] = []

    class FakeServer:
        def __init__(self, spec: Any, alias: str, log_path: Path | None = None) -> None:
            events.append(("init", alias, log_path))
            self.base_url = "http://127.0.0.1:5555/v1"

        def __enter__(self) -> FakeServer:
            events.append("start")
            return self

        def __exit__(self, *exc: object) -> None:
            events.append("stop")

    monkeypatch.setattr(factory, "LlamaCppServer", FakeServer)
    with open_model(ModelSpec(provider="embedded", name="gemma"), log_dir=tmp_path) as model:
        assert isinstance(model, OpenAICompatibleClient)
        assert model.base_url == "http://127.0.0.1:5555/v1"
        assert events == [("init", "gemma", tmp_path / "llamacpp-server.log"), "start"]
    assert events[-1] == "stop"
