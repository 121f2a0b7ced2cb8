"""Dense FAISS indexes (exact, HNSW, IVF) over encoded passages, saved with a manifest.

On disk (a directory): `index.faiss` (faiss.write_index), `passages.jsonl` (FlashRAG
`{"id", "contents"}`, row i = FAISS id i) and `manifest.json` (IndexManifest: kind, encoder,
dimension, corpus fingerprint, build and search parameters). A saved index is only reused with
the encoder, corpus and kind it was built from. BM25 indexes (bm25.py) share the manifest and
the passages file.

Kinds and parameters (recorded in the manifest's `params`):
- `flat`: exact inner product (faiss.IndexFlatIP); no parameters.
- `hnsw`: faiss.IndexHNSWFlat, inner product. `M` (links per node, build), `efConstruction`
  (build), `efSearch` (search; may be changed when loading).
- `ivf`: faiss.IndexIVFFlat over a flat inner-product quantizer. `nlist` (cells, build;
  default about 4·sqrt(n), at most n/39 so every cell has training points), `nprobe` (cells
  visited per query, search; may be changed when loading).

A FlashRAG index (a bare faiss file whose row i is line i of the corpus jsonl) loads with
`DenseIndex.load_flashrag`, checked against the corpus size and the encoder's dimension.

`device="gpu"` moves the faiss index to the first GPU (flat and ivf; faiss has no GPU HNSW)
when the installed faiss has GPU support (the faiss-gpu wheels), else a clear InputError.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ValidationError, model_validator

import branchpoint
from branchpoint.errors import InputError, StaleIndexError
from branchpoint.registry import REGISTRY
from branchpoint.retrieval._deps import require
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.corpus_store import fingerprint_of, open_corpus, open_mapped_corpus
from branchpoint.retrieval.encoder import Encoder, encode_passages, encode_queries
from branchpoint.traces import describe_validation_error

log = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
PASSAGES_FILE = "passages.jsonl"
MANIFEST_FILE = "manifest.json"

IndexKind = Literal["flat", "hnsw", "ivf", "bm25"]
DENSE_KINDS = ("flat", "hnsw", "ivf")
INDEX_KINDS = (*DENSE_KINDS, "bm25")

#: Default parameters per kind; `nlist: 0` means "choose from the corpus size".
DEFAULT_PARAMS: Mapping[str, Mapping[str, int | float | str]] = {
    "flat": {},
    "hnsw": {"M": 32, "efConstruction": 200, "efSearch": 128},
    "ivf": {"nlist": 0, "nprobe": 16},
    "bm25": {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en"},
}
#: Parameters that only change searching: a saved index may be loaded with other values.
SEARCH_PARAMS = {"hnsw": ("efSearch",), "ivf": ("nprobe",), "flat": (), "bm25": ()}
for _kind in INDEX_KINDS:  # the index kinds by name (kind `index` of `branchpoint.registry`)
    REGISTRY.add("index", _kind, DEFAULT_PARAMS[_kind], origin=f"{__name__}:DEFAULT_PARAMS",
                 search_params=SEARCH_PARAMS[_kind])

Params = dict[str, int | float | str]


def _faiss() -> Any:
    """The faiss module, or one line saying what to install."""
    return require("faiss", "faiss-cpu", "the dense index")


def auto_nlist(n_passages: int) -> int:
    """IVF cells for n passages: about 4·sqrt(n), and at most n/39 (faiss wants 39 points a cell)."""
    return max(1, min(int(4 * math.sqrt(n_passages)), n_passages // 39))


def resolve_params(kind: str, given: Mapping[str, Any] | None, n_passages: int | None = None) -> Params:
    """The kind's defaults updated with `given`; unknown names or bad values raise InputError."""
    if kind not in DEFAULT_PARAMS:
        raise InputError(f"unknown index kind {kind!r} (expected one of: {', '.join(INDEX_KINDS)})")
    defaults = DEFAULT_PARAMS[kind]
    params: Params = dict(defaults)
    for name, value in (given or {}).items():
        if name not in defaults:
            known = ", ".join(defaults) or "none"
            raise InputError(f"index kind {kind!r} has no parameter {name!r} (its parameters: {known})")
        expected = type(defaults[name])
        if expected is int and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"index parameter {name!r} must be a whole number of at least 1, got {value!r}")
        if expected is float and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise InputError(f"index parameter {name!r} must be a number of at least 0, got {value!r}")
        if expected is str and not isinstance(value, str):
            raise InputError(f"index parameter {name!r} must be a string, got {value!r}")
        params[name] = float(value) if expected is float else value
    if kind == "ivf" and n_passages is not None:
        if not params["nlist"]:
            params["nlist"] = auto_nlist(n_passages)
        if int(params["nlist"]) > n_passages:
            raise InputError(f"ivf nlist {params['nlist']} exceeds the {n_passages} passages to index")
        params["nprobe"] = min(int(params["nprobe"]), int(params["nlist"]))
    return params


class IndexManifest(BaseModel):
    """What an index was built from and how; checked before a saved index is reused."""

    kind: IndexKind = "flat"
    encoder: str | None = None
    dim: int | None = None
    n_passages: int
    corpus_fingerprint: str
    params: Params = {}
    #: The faiss index factory string, exactly (`IVF4096,PQ64x8`, `HNSW32`, `Flat`): IVF-PQ and
    #: IVF-Flat are both kind ivf, so the kind alone does not say what the results are.
    factory: str | None = None
    #: For an index file served as it is (FlashRAG): sha256 of its size and first and last MiB,
    #: so a swapped file never matches another file's cached results.
    index_digest: str | None = None
    created_at: str
    branchpoint_version: str

    @model_validator(mode="after")
    def _dense_needs_encoder(self) -> IndexManifest:
        if self.kind in DENSE_KINDS and (not self.encoder or not self.dim):
            raise ValueError(f"a {self.kind} index needs its encoder and dim")
        return self

    def cache_params(self) -> str:
        """What, besides query and k, decides this index's results (the retrieval cache key part).

        Same form as `cache.source_params` for an exact index, plus the parameters otherwise;
        the factory string when it says more than kind and parameters (IVF-PQ, OPQ, SQ), and
        the digest of an index file served as it is.
        """
        factory = None if self.factory == default_factory(self.kind, self.params) else self.factory
        parts = {"kind": self.kind, "corpus": self.corpus_fingerprint, "encoder": self.encoder,
                 "dim": self.dim, "factory": factory, "index": self.index_digest}
        text = ";".join(f"{k}={v}" for k, v in parts.items() if v is not None)
        if self.params:
            text += ";params=" + json.dumps(self.params, sort_keys=True)
        return text


def default_factory(kind: str, params: Mapping[str, Any]) -> str | None:
    """The factory string of the index `branchpoint index build` makes for a kind and parameters."""
    if kind == "flat":
        return "Flat"
    if kind == "hnsw" and "M" in params:
        return f"HNSW{params['M']}"
    if kind == "ivf" and "nlist" in params:
        return f"IVF{params['nlist']},Flat"
    return None


def factory_string(index: Any) -> str | None:
    """The faiss index factory string that rebuilds `index`'s structure (None if faiss cannot say)."""
    try:
        from faiss.contrib.factory_tools import reverse_index_factory

        return str(reverse_index_factory(_to_cpu(index)))
    except Exception:  # noqa: BLE001 - faiss raises NotImplementedError / RuntimeError for exotic types
        return None


def file_digest(path: Path, window: int = 1 << 20) -> str:
    """sha256 of a file's size and its first and last `window` bytes: cheap on a 60 GB index, and
    different for any two index files that differ in size, training or head/tail contents."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as fh:
        digest.update(fh.read(window))
        if size > window:
            fh.seek(max(window, size - window))
            digest.update(fh.read(window))
    return digest.hexdigest()


def new_manifest(kind: str, n_passages: int, fingerprint: str, params: Params,
                 encoder: Encoder | None = None, factory: str | None = None) -> IndexManifest:
    """A manifest stamped with the time and branchpoint's version."""
    return IndexManifest(
        kind=kind,  # type: ignore[arg-type]
        factory=factory,
        encoder=encoder.name if encoder is not None else None,
        dim=encoder.dim if encoder is not None else None,
        n_passages=n_passages,
        corpus_fingerprint=fingerprint,
        params=params,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        branchpoint_version=branchpoint.__version__,
    )


# --- encoding, optionally resumable -------------------------------------------------------

SHARD_STATE = "state.json"
DEFAULT_SHARD_SIZE = 8192


def _progress_bar(description: str, total: int) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TimeRemainingColumn())
    progress.add_task(description, total=total)
    return progress


def encode_corpus(passages: list[Passage], encoder: Encoder, batch_size: int = 64, *,
                  shard_dir: str | Path | None = None, shard_size: int = DEFAULT_SHARD_SIZE,
                  fingerprint: str | None = None, progress: bool = False) -> np.ndarray:
    """Passage vectors (`"Title"\\ntext`, with the encoder's passage prefix), `batch_size` a call.

    With `shard_dir`, vectors are also written there as `emb-00000.npy`, ... (`shard_size`
    passages each, written atomically) beside `state.json` (corpus fingerprint, encoder,
    dimension, shard size): a rerun after an interruption loads the complete shards and
    encodes only the rest. Shards of another corpus or encoder are discarded.
    """
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, got {batch_size}")
    if shard_size < 1:
        raise InputError(f"shard_size must be at least 1, got {shard_size}")
    n = len(passages)
    out = np.zeros((n, encoder.dim), dtype=np.float32)
    texts = [p.contents for p in passages]
    shards = [(start, min(start + shard_size, n)) for start in range(0, n, shard_size)]
    done = [False] * len(shards)
    directory = Path(shard_dir) if shard_dir is not None else None
    if directory is not None:
        state = {"corpus_fingerprint": fingerprint or fingerprint_of(passages),
                 "encoder": encoder.name, "dim": encoder.dim, "n_passages": n,
                 "shard_size": shard_size}
        _prepare_shard_dir(directory, state)
        for i, (start, stop) in enumerate(shards):
            vectors = _read_shard(directory / f"emb-{i:05d}.npy", stop - start, encoder.dim)
            if vectors is not None:
                out[start:stop] = vectors
                done[i] = True
    reused = sum(stop - start for (start, stop), d in zip(shards, done) if d)
    bar = _progress_bar(f"encoding {n} passages ({encoder.name})", n) if progress else None
    if bar is not None:
        bar.start()
        bar.update(bar.task_ids[0], completed=reused)
    try:
        for i, (start, stop) in enumerate(shards):
            if done[i]:
                continue
            for b in range(start, stop, batch_size):
                e = min(b + batch_size, stop)
                out[b:e] = encode_passages(encoder, texts[b:e], batch_size=batch_size)
                if bar is not None:
                    bar.update(bar.task_ids[0], advance=e - b)
            if directory is not None:
                _write_shard(directory / f"emb-{i:05d}.npy", out[start:stop])
    finally:
        if bar is not None:
            bar.stop()
    return out


def _prepare_shard_dir(directory: Path, state: dict[str, Any]) -> None:
    """Create the shard directory, discarding shards that belong to another corpus or encoder."""
    state_file = directory / SHARD_STATE
    if state_file.is_file():
        try:
            old = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if old == state:
            return
        log.warning("%s: shards of another corpus, encoder or shard size; encoding anew", directory)
        shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SHARD_STATE}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, state_file)


def _read_shard(path: Path, rows: int, dim: int) -> np.ndarray | None:
    """A complete shard's vectors, or None (absent, damaged, or of the wrong shape)."""
    if not path.is_file():
        return None
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable shard, encoding it again (%s)", path, exc)
        return None
    if vectors.shape != (rows, dim) or vectors.dtype != np.float32:
        log.warning("%s: shard of shape %s, expected (%d, %d); encoding it again", path,
                    vectors.shape, rows, dim)
        return None
    return vectors


def _write_shard(path: Path, vectors: np.ndarray) -> None:
    """np.save into a temporary file, then rename it into place (a shard is whole or absent)."""
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}.npy")
    try:
        np.save(tmp, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# --- faiss index construction -------------------------------------------------------------


def check_gpu(kind: str) -> None:
    """InputError unless the installed faiss can put a `kind` index on a GPU."""
    faiss = _faiss()
    if kind == "hnsw":
        raise InputError("device gpu: faiss has no GPU HNSW index; use index kind flat or ivf "
                         "on the GPU, or device cpu for hnsw")
    if not hasattr(faiss, "StandardGpuResources") or not hasattr(faiss, "index_cpu_to_gpu"):
        raise InputError(
            f"device gpu: the installed faiss ({getattr(faiss, '__version__', '?')}) has no GPU "
            "support; on a CUDA machine install faiss with GPU support instead of faiss-cpu "
            "(pip install faiss-gpu-cu12), or use device cpu"
        )
    if faiss.get_num_gpus() < 1:
        raise InputError("device gpu: faiss has GPU support but sees no GPU (check "
                         "CUDA_VISIBLE_DEVICES and the driver), or use device cpu")


_GPU_RESOURCES: Any = None


def to_gpu(index: Any) -> Any:
    """The index copied to GPU 0 (one shared StandardGpuResources per process)."""
    global _GPU_RESOURCES
    faiss = _faiss()
    if _GPU_RESOURCES is None:
        _GPU_RESOURCES = faiss.StandardGpuResources()
    return faiss.index_cpu_to_gpu(_GPU_RESOURCES, 0, index)


def _on_gpu(index: Any) -> bool:
    return "Gpu" in type(index).__name__


def _to_cpu(index: Any) -> Any:
    return _faiss().index_gpu_to_cpu(index) if _on_gpu(index) else index


def _new_faiss_index(kind: str, dim: int, params: Params) -> Any:
    faiss = _faiss()
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, int(params["M"]), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(params["efConstruction"])
        return index
    if kind == "ivf":
        quantizer = faiss.IndexFlatIP(dim)
        # faiss's Python wrapper keeps `quantizer` referenced by the index it is given to.
        index = faiss.IndexIVFFlat(quantizer, dim, int(params["nlist"]), faiss.METRIC_INNER_PRODUCT)
        if int(params["nlist"]) == 1:  # a tiny corpus: one cell, nothing to warn about
            index.cp.min_points_per_centroid = 1
        return index
    raise InputError(f"unknown dense index kind {kind!r} (expected one of: {', '.join(DENSE_KINDS)})")


def apply_search_params(index: Any, kind: str, params: Mapping[str, Any]) -> None:
    """Set efSearch (hnsw) or nprobe (ivf) on a faiss index (CPU or GPU)."""
    faiss = _faiss()
    if kind == "hnsw":
        index.hnsw.efSearch = int(params["efSearch"])
    elif kind == "ivf":
        if _on_gpu(index):
            faiss.GpuParameterSpace().set_index_parameter(index, "nprobe", int(params["nprobe"]))
        else:
            faiss.extract_index_ivf(index).nprobe = int(params["nprobe"])


def _ivf_training_sample(vectors: np.ndarray, nlist: int, seed: int = 0) -> np.ndarray:
    """All vectors, or a seeded sample of 256 per cell when there are more (faiss's own cap)."""
    cap = 256 * nlist
    if len(vectors) <= cap:
        return vectors
    rows = np.random.default_rng(seed).choice(len(vectors), size=cap, replace=False)
    return vectors[np.sort(rows)]


def _describe_faiss(index: Any, where: str) -> tuple[str, Params]:
    """(kind, parameters) of a faiss index read from a file; InputError for other types.

    Any IVF index (Flat, PQ, SQ, fast-scan, behind an OPQ / PCA transform or not) is kind ivf;
    its factory string (recorded beside) says which.
    """
    faiss = _faiss()
    if isinstance(index, faiss.IndexFlat):
        return "flat", {}
    if isinstance(index, faiss.IndexHNSW):
        return "hnsw", {"M": int(index.hnsw.nb_neighbors(1)),
                        "efConstruction": int(index.hnsw.efConstruction),
                        "efSearch": int(index.hnsw.efSearch)}
    try:
        ivf = faiss.extract_index_ivf(index)
    except (RuntimeError, AttributeError):
        ivf = None
    if ivf is not None:
        return "ivf", {"nlist": int(ivf.nlist), "nprobe": int(ivf.nprobe)}
    raise InputError(f"{where}: faiss index type {type(index).__name__} is not supported "
                     "(expected a Flat, HNSW or IVF index, as FlashRAG builds)")


# --- atomic directory writes --------------------------------------------------------------


def write_dir_atomically(directory: str | Path, fill: Callable[[Path], None]) -> Path:
    """Call `fill(tmp)` on a temporary sibling directory, then rename it over `directory`.

    An interruption leaves `directory` as it was (absent or the previous index).
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        fill(tmp)
        old = None
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(directory, old)
        os.rename(tmp, directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return directory


def write_passages(path: Path, passages: list[Passage]) -> None:
    """FlashRAG jsonl `{"id", "contents"}`, one passage a line, in index order."""
    with path.open("w", encoding="utf-8") as fh:
        for p in passages:
            fh.write(json.dumps({"id": p.doc_id, "contents": p.contents}, ensure_ascii=False) + "\n")


def write_manifest(path: Path, manifest: IndexManifest) -> None:
    path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")


Hits = list[list[tuple[Passage, float]]]


class DenseIndex:
    """Passages, their vectors in a faiss index (flat, hnsw or ivf), and the encoder that made them."""

    def __init__(self, passages: Sequence[Passage], faiss_index: Any, encoder: Encoder,
                 manifest: IndexManifest) -> None:
        """Wrap parts already checked to agree; use `build`, `load` or `load_flashrag` to make one."""
        self.passages = passages
        self.faiss_index = faiss_index
        self.encoder = encoder
        self.manifest = manifest

    @property
    def kind(self) -> str:
        """flat, hnsw or ivf."""
        return self.manifest.kind

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the corpus this index was built from."""
        return self.manifest.corpus_fingerprint

    def __len__(self) -> int:
        """Number of indexed passages."""
        return len(self.passages)

    @classmethod
    def build(cls, passages: list[Passage], encoder: Encoder, batch_size: int = 64,
              progress: bool = False, *, kind: str = "flat", params: Mapping[str, Any] | None = None,
              device: str = "cpu") -> DenseIndex:
        """Encode every passage's `"Title"\\ntext` and index the vectors (`kind`, `params`)."""
        if not passages:
            raise InputError("cannot build an index over an empty corpus (no passages given)")
        resolve_params(kind, params, len(passages))  # bad parameters: fail before encoding
        if device == "gpu":
            check_gpu(kind)
        vectors = encode_corpus(passages, encoder, batch_size, progress=progress)
        return cls.from_vectors(passages, vectors, encoder, kind=kind, params=params, device=device)

    @classmethod
    def from_vectors(cls, passages: list[Passage], vectors: np.ndarray, encoder: Encoder, *,
                     kind: str = "flat", params: Mapping[str, Any] | None = None,
                     device: str = "cpu", fingerprint: str | None = None) -> DenseIndex:
        """Index already-encoded passage vectors (row i = passages[i])."""
        if not passages:
            raise InputError("cannot build an index over an empty corpus (no passages given)")
        if kind not in DENSE_KINDS:
            raise InputError(f"unknown dense index kind {kind!r} (expected one of: {', '.join(DENSE_KINDS)})")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(passages), encoder.dim):
            raise InputError(f"expected vectors of shape ({len(passages)}, {encoder.dim}), got {vectors.shape}")
        resolved = resolve_params(kind, params, len(passages))
        index = _new_faiss_index(kind, encoder.dim, resolved)
        factory = factory_string(index)
        if device == "gpu":
            check_gpu(kind)
            index = to_gpu(index)
        if kind == "ivf":
            index.train(_ivf_training_sample(vectors, int(resolved["nlist"])))
        index.add(vectors)
        apply_search_params(index, kind, resolved)
        manifest = new_manifest(kind, len(passages), fingerprint or fingerprint_of(passages),
                                resolved, encoder, factory=factory)
        return cls(list(passages), index, encoder, manifest)

    def search(self, queries: list[str], k: int) -> Hits:
        """Top-k (passage, inner-product score) per query, best first, queries encoded as queries."""
        if not queries:
            return []
        return self.search_vectors(encode_queries(self.encoder, list(queries)), k)

    def search_vectors(self, vectors: np.ndarray, k: int) -> Hits:
        """Top-k (passage, score) per already-encoded query row, best first."""
        if k < 1:
            raise InputError(f"k (passages per query) must be at least 1, got {k}")
        if len(vectors) == 0:
            return []
        scores, ids = self.faiss_index.search(
            np.ascontiguousarray(vectors, dtype=np.float32), min(k, len(self.passages))
        )
        passages = self.passages
        return [
            [(passages[i], s) for s, i in zip(row_s.tolist(), row_i.tolist()) if i >= 0]
            for row_s, row_i in zip(scores, ids)
        ]

    def save(self, directory: str | Path) -> Path:
        """Write the index directory atomically: into a temporary sibling, then renamed into place."""
        cpu_index = _to_cpu(self.faiss_index)

        def fill(tmp: Path) -> None:
            _faiss().write_index(cpu_index, str(tmp / INDEX_FILE))
            write_passages(tmp / PASSAGES_FILE, self.passages)
            open_mapped_corpus(tmp / PASSAGES_FILE).close()  # its offsets and fingerprint, once
            write_manifest(tmp / MANIFEST_FILE, self.manifest)

        return write_dir_atomically(directory, fill)

    @classmethod
    def load(cls, directory: str | Path, encoder: Encoder, expected_fingerprint: str | None = None,
             *, kind: str | None = None, params: Mapping[str, Any] | None = None,
             device: str = "cpu") -> DenseIndex:
        """Load a saved index; StaleIndexError if its kind, encoder, dimension, corpus or build
        parameters differ from those given. Search parameters in `params` (efSearch, nprobe)
        replace the saved ones."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        where = directory / MANIFEST_FILE
        check_manifest(manifest, where, kind=kind, expected_fingerprint=expected_fingerprint,
                       params=params)
        if manifest.kind not in DENSE_KINDS:
            raise StaleIndexError(f"{where}: a {manifest.kind} index, not a dense one (flat, hnsw, ivf)")
        if manifest.encoder != encoder.name or manifest.dim != encoder.dim:
            raise StaleIndexError(
                f'{where}: index was built with encoder "{manifest.encoder}" (dim {manifest.dim}) '
                f'but encoder "{encoder.name}" (dim {encoder.dim}) was given; rebuild the index'
            )
        for name in (INDEX_FILE, PASSAGES_FILE):
            if not (directory / name).is_file():
                raise InputError(f"{directory / name}: file missing (expected a saved index)")
        faiss_index = _faiss().read_index(str(directory / INDEX_FILE))
        passages = open_mapped_corpus(directory / PASSAGES_FILE)
        if faiss_index.d != manifest.dim or faiss_index.ntotal != manifest.n_passages:
            raise StaleIndexError(
                f"{directory / INDEX_FILE}: holds {faiss_index.ntotal} vectors of dim "
                f"{faiss_index.d}, but {where} says {manifest.n_passages} of dim {manifest.dim}; "
                "the index is damaged, rebuild it"
            )
        if passages.fingerprint != manifest.corpus_fingerprint:
            raise StaleIndexError(
                f"{directory / PASSAGES_FILE}: fingerprint {passages.fingerprint} differs "
                f"from corpus_fingerprint {manifest.corpus_fingerprint} in {where}; the index is "
                "damaged, rebuild it"
            )
        manifest = _with_search_params(manifest, params)
        faiss_index = _place(faiss_index, manifest, device)
        return cls(passages, faiss_index, encoder, manifest)

    @staticmethod
    def check_flashrag_file(index_file: str | Path, n_passages: int, corpus: str | Path) -> None:
        """Check a FlashRAG index file against its corpus without loading it (memory-mapped, read
        only): it must be a faiss index with one row per corpus passage. For a driver that
        validates before its workers open the source (their encoder checks the dimension)."""
        index_file = Path(index_file)
        if not index_file.is_file():
            raise InputError(f"{index_file}: faiss index file not found")
        faiss = _faiss()
        try:
            faiss_index = faiss.read_index(str(index_file), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError as exc:
            raise InputError(f"{index_file}: not a faiss index file ({str(exc).strip().splitlines()[-1]})") from None
        if faiss_index.ntotal != n_passages:
            raise StaleIndexError(
                f"{index_file}: holds {faiss_index.ntotal} vectors but {corpus} has {n_passages} passages; a "
                "FlashRAG index and its corpus must match row for row (give the corpus the index was built from)"
            )

    @classmethod
    def load_flashrag(cls, index_file: str | Path, corpus: str | Path, encoder: Encoder, *,
                      fmt: str = "auto", params: Mapping[str, Any] | None = None,
                      device: str = "cpu") -> DenseIndex:
        """A FlashRAG-built index: a bare faiss file whose row i is passage i of `corpus`.

        Checked: the file holds one vector per corpus passage, of the encoder's dimension, with
        inner-product metric. `params` may set efSearch / nprobe.
        """
        index_file, corpus = Path(index_file), Path(corpus)
        if not index_file.is_file():
            raise InputError(f"{index_file}: faiss index file not found")
        faiss = _faiss()
        try:
            faiss_index = faiss.read_index(str(index_file))
        except RuntimeError as exc:
            raise InputError(f"{index_file}: not a faiss index file ({str(exc).strip().splitlines()[-1]})") from None
        passages = open_corpus(corpus, fmt)
        if faiss_index.ntotal != len(passages):
            raise StaleIndexError(
                f"{index_file}: holds {faiss_index.ntotal} vectors but {corpus} has "
                f"{len(passages)} passages; a FlashRAG index and its corpus must match row for "
                "row (give the corpus the index was built from, unchunked)"
            )
        if faiss_index.d != encoder.dim:
            raise StaleIndexError(
                f'{index_file}: vectors of dim {faiss_index.d}, but encoder "{encoder.name}" gives '
                f"dim {encoder.dim}; give the encoder the index was built with"
            )
        if faiss_index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise InputError(f"{index_file}: the index does not use inner product (metric "
                             f"{faiss_index.metric_type}); FlashRAG and branchpoint build inner-product indexes")
        kind, found = _describe_faiss(faiss_index, str(index_file))
        manifest = IndexManifest(
            kind=kind,  # type: ignore[arg-type]
            factory=factory_string(faiss_index), index_digest=file_digest(index_file),
            encoder=encoder.name, dim=encoder.dim, n_passages=len(passages),
            corpus_fingerprint=fingerprint_of(passages), params=found,
            created_at=datetime.fromtimestamp(index_file.stat().st_mtime, timezone.utc)
            .isoformat(timespec="seconds"),
            branchpoint_version=branchpoint.__version__,
        )
        if params:
            check_manifest(manifest, index_file, params=params)
        manifest = _with_search_params(manifest, params)
        return cls(passages, _place(faiss_index, manifest, device), encoder, manifest)


def _with_search_params(manifest: IndexManifest, params: Mapping[str, Any] | None) -> IndexManifest:
    """The manifest with the search-time parameters of `params` (efSearch, nprobe) put in."""
    searchable = SEARCH_PARAMS.get(manifest.kind, ())
    update = {k: v for k, v in (params or {}).items() if k in searchable}
    if not update:
        return manifest
    merged = resolve_params(manifest.kind, {**manifest.params, **update})
    if manifest.kind == "ivf":
        merged["nprobe"] = min(int(merged["nprobe"]), int(merged["nlist"]))
    return manifest.model_copy(update={"params": merged})


def _place(faiss_index: Any, manifest: IndexManifest, device: str) -> Any:
    """Apply the manifest's search parameters and move the index to the GPU if asked."""
    if device == "gpu":
        check_gpu(manifest.kind)
        faiss_index = to_gpu(faiss_index)
    apply_search_params(faiss_index, manifest.kind, manifest.params)
    return faiss_index


def check_manifest(manifest: IndexManifest, where: str | Path, *, kind: str | None = None,
                   expected_fingerprint: str | None = None,
                   params: Mapping[str, Any] | None = None) -> None:
    """StaleIndexError if the saved index is of another kind, corpus, or build parameters."""
    if kind is not None and manifest.kind != kind:
        raise StaleIndexError(
            f"{where}: a {manifest.kind} index, but kind {kind} was asked for; rebuild the index "
            "with that kind or ask for the saved one"
        )
    if expected_fingerprint is not None and manifest.corpus_fingerprint != expected_fingerprint:
        raise StaleIndexError(
            f"{where}: corpus_fingerprint {manifest.corpus_fingerprint} differs from the "
            f"expected {expected_fingerprint}; the corpus changed since the index was built, "
            "rebuild the index"
        )
    if params:
        searchable = SEARCH_PARAMS.get(manifest.kind, ())
        wanted = resolve_params(manifest.kind, params, manifest.n_passages)
        for name in params:
            if name in searchable:
                continue
            if manifest.params.get(name) != wanted[name]:
                raise StaleIndexError(
                    f"{where}: built with {name}={manifest.params.get(name)!r} but "
                    f"{name}={wanted[name]!r} was asked for; rebuild the index"
                )


def read_manifest(directory: str | Path) -> IndexManifest:
    """Read and validate `manifest.json` of a saved index; errors name the file and field."""
    where = Path(directory) / MANIFEST_FILE
    if not where.is_file():
        raise InputError(f"{where}: file not found (expected a saved index directory)")
    try:
        return IndexManifest.model_validate_json(where.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise InputError(f"{where}: {describe_validation_error(exc)}") from None
