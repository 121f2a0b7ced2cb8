"""Open the model a spec names: embedded llama.cpp, any OpenAI-compatible server, a LangChain
chat model, or a script (the simulated model's provider `sim` is registered by `branchpoint.sim.provider`,
above this layer). Each provider is registered by name (kind `provider` of `branchpoint.registry`): a
context manager `fn(spec, log_dir)` yielding a ready `ModelClient`; its optional `check_questions`
metadata is a hook a run calls on its planned `(ModelSpec, Question)` pairs before it writes anything."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar

from branchpoint.errors import InputError
from branchpoint.models.call import ModelClient
from branchpoint.models.llamacpp import LlamaCppServer
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.scripted import ScriptedModel
from branchpoint.models.spec import ModelSpec
from branchpoint.registry import REGISTRY
from branchpoint.registry_kinds import Kind

#: The typed handle of the registry kind: a provider opens a `ModelClient` for a model spec.
PROVIDER: Kind[Callable[[ModelSpec, Path | None], AbstractContextManager[ModelClient]]] = Kind("provider")

Q = TypeVar("Q")


@contextmanager
def open_model(spec: ModelSpec, log_dir: Path | None = None) -> Iterator[ModelClient]:
    """Yield a ready `ModelClient` from the spec's provider; an embedded server is started first
    and stopped on exit."""
    opener = REGISTRY.get(PROVIDER, spec.provider).obj
    with opener(spec, log_dir) as client:
        yield client


def check_planned_questions(planned: Iterable[tuple[ModelSpec, Q]]) -> None:
    """Hand each provider's planned `(model, question)` pairs to its `check_questions` hook
    (registry metadata; provider `sim` refuses questions outside its question set), so that a run
    is refused before it writes anything; providers without the hook are not checked."""
    by_provider: dict[str, list[tuple[ModelSpec, Q]]] = {}
    for model, question in planned:
        by_provider.setdefault(model.provider, []).append((model, question))
    for provider, pairs in by_provider.items():
        hook = REGISTRY.get("provider", provider).meta.get("check_questions")
        if hook is not None:
            hook(pairs)


@REGISTRY.register("provider", "scripted")
@contextmanager
def scripted_provider(spec: ModelSpec, log_dir: Path | None = None) -> Iterator[ModelClient]:
    """The spec's `script` replies, in order (cycled)."""
    if not spec.script:
        raise InputError("model.script: provider 'scripted' needs a non-empty list of replies")
    yield ScriptedModel(spec.script, cycle=True, name=spec.name)


@REGISTRY.register("provider", "embedded")
@contextmanager
def embedded_provider(spec: ModelSpec, log_dir: Path | None = None) -> Iterator[ModelClient]:
    """The embedded llama.cpp server (started here, stopped on exit)."""
    log = log_dir / "llamacpp-server.log" if log_dir else None
    with LlamaCppServer(spec.server, alias=spec.name, log_path=log) as server:
        yield OpenAICompatibleClient(spec, base_url=server.base_url)


@REGISTRY.register("provider", "langchain")
@contextmanager
def langchain_provider(spec: ModelSpec, log_dir: Path | None = None) -> Iterator[ModelClient]:
    """A LangChain chat model built by the spec's `factory`."""
    from branchpoint.models.langchain_chat import LangChainChatClient

    yield LangChainChatClient(spec)


@REGISTRY.register("provider", "openai")
@contextmanager
def openai_provider(spec: ModelSpec, log_dir: Path | None = None) -> Iterator[ModelClient]:
    """Any OpenAI-compatible server at the spec's `base_url`."""
    yield OpenAICompatibleClient(spec)
