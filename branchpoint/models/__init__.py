"""Models: specs, the OpenAI-compatible client, the embedded llama.cpp server, a scripted model."""

from branchpoint.models.call import ModelCall, ModelClient, TransportError
from branchpoint.models.factory import open_model
from branchpoint.models.llamacpp import LlamaCppServer, packaged_gguf
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.scripted import ScriptedModel
from branchpoint.models.spec import EmbeddedServerSpec, ModelSpec

__all__ = [
    "EmbeddedServerSpec",
    "LlamaCppServer",
    "ModelCall",
    "ModelClient",
    "ModelSpec",
    "OpenAICompatibleClient",
    "ScriptedModel",
    "TransportError",
    "open_model",
    "packaged_gguf",
]
