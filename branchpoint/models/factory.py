"""Open the model a spec names: embedded llama.cpp, any OpenAI-compatible server, a LangChain
chat model, or a script."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from branchpoint.errors import InputError
from branchpoint.models.call import ModelClient
from branchpoint.models.llamacpp import LlamaCppServer
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.scripted import ScriptedModel
from branchpoint.models.spec import ModelSpec


@contextmanager
def open_model(spec: ModelSpec, log_dir: Path | None = None) -> Iterator[ModelClient]:
    """Yield a ready `ModelClient`; an embedded server is started first and stopped on exit."""
    if spec.provider == "scripted":
        if not spec.script:
            raise InputError("model.script: provider 'scripted' needs a non-empty list of replies")
        yield ScriptedModel(spec.script, cycle=True, name=spec.name)
    elif spec.provider == "embedded":
        log = log_dir / "llamacpp-server.log" if log_dir else None
        with LlamaCppServer(spec.server, alias=spec.name, log_path=log) as server:
            yield OpenAICompatibleClient(spec, base_url=server.base_url)
    elif spec.provider == "langchain":
        from branchpoint.models.langchain_chat import LangChainChatClient

        yield LangChainChatClient(spec)
    else:
        yield OpenAICompatibleClient(spec)
