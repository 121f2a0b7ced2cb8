"""Models: specs, the OpenAI-compatible client, managed servers (llama.cpp, vLLM), a scripted model.

Names are imported on first use, so that light commands (`branchpoint models serve vllm`) do not
pay for importing the LangChain client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # `X as X`: explicit re-exports, so type checkers see the lazily resolved names as public.
    from branchpoint.models.call import ModelCall as ModelCall
    from branchpoint.models.call import ModelClient as ModelClient
    from branchpoint.models.call import TransportError as TransportError
    from branchpoint.models.factory import open_model as open_model
    from branchpoint.models.llamacpp import LlamaCppServer as LlamaCppServer
    from branchpoint.models.llamacpp import packaged_gguf as packaged_gguf
    from branchpoint.models.openai_compat import OpenAICompatibleClient as OpenAICompatibleClient
    from branchpoint.models.scripted import ScriptedModel as ScriptedModel
    from branchpoint.models.server import ManagedServer as ManagedServer
    from branchpoint.models.spec import EmbeddedServerSpec as EmbeddedServerSpec
    from branchpoint.models.spec import ModelSpec as ModelSpec
    from branchpoint.models.vllm import VllmServeOptions as VllmServeOptions
    from branchpoint.models.vllm import VllmServer as VllmServer

_WHERE = {
    "EmbeddedServerSpec": "spec",
    "LlamaCppServer": "llamacpp",
    "ManagedServer": "server",
    "ModelCall": "call",
    "ModelClient": "call",
    "ModelSpec": "spec",
    "OpenAICompatibleClient": "openai_compat",
    "ScriptedModel": "scripted",
    "TransportError": "call",
    "VllmServeOptions": "vllm",
    "VllmServer": "vllm",
    "open_model": "factory",
    "packaged_gguf": "llamacpp",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'branchpoint.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"branchpoint.models.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
