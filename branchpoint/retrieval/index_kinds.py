"""The index kinds (flat, hnsw, ivf, pq: dense FAISS; bm25) and their parameters.

Each kind is an `IndexKind` registered under its name (kind `index` of `branchpoint.registry`,
so a plug-in adds one): its parameters' defaults, those that only change searching, and, for a
dense kind, the faiss index it makes (`new_index`) and how many cells its training fits
(`train_cells`). Kinds and parameters (recorded in a saved index's manifest, `params`):
- `flat`: exact inner product (faiss.IndexFlatIP); no parameters.
- `hnsw`: faiss.IndexHNSWFlat, inner product. `M` (links per node, build), `efConstruction`
  (build), `efSearch` (search; may be changed when loading).
- `ivf`: faiss.IndexIVFFlat over a flat inner-product quantizer. `nlist` (cells, build;
  default about 4·sqrt(n), at most n/39 so every cell has training points), `nprobe` (cells
  visited per query, search; may be changed when loading).
- `pq`: faiss.IndexPQ, inner product over product-quantised vectors (exhaustive search of
  compressed codes: M·nbits bits a passage instead of 32·dim). `M` (sub-vectors; must divide
  the encoder's dimension), `nbits` (bits per sub-vector code; default 8, fewer for a corpus of
  under 256 passages so that every code has a training point).
- `bm25`: `k1`, `b`, `method`, `stopwords` (bm25.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from branchpoint.errors import InputError
from branchpoint.registry import REGISTRY
from branchpoint.registry_kinds import Kind
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.gpu import faiss_module

IndexKindName = Literal["flat", "hnsw", "ivf", "pq", "bm25"]


@dataclass(frozen=True)
class IndexKind:
    """An index kind: its parameters' defaults (`nlist`/`nbits` 0: chosen from the corpus size),
    the parameters that only change searching (a saved index may be loaded with other values),
    the faiss index a dense kind makes for vectors of a dimension (None: not a faiss index, as
    bm25), and the number of cells its training fits (None: it needs no training)."""

    name: str
    defaults: Mapping[str, int | float | str]
    search_params: tuple[str, ...] = ()
    new_index: Callable[[int, Mapping[str, Any]], Any] | None = None
    train_cells: Callable[[Mapping[str, Any]], int] | None = None

    @property
    def dense(self) -> bool:
        """Whether the kind indexes encoded vectors in faiss."""
        return self.new_index is not None


#: The typed handle of the registry kind: `REGISTRY.get(INDEX, name).obj` is an `IndexKind`.
INDEX: Final = Kind[IndexKind]("index")


def _flat(dim: int, params: Mapping[str, Any]) -> Any:
    return faiss_module().IndexFlatIP(dim)


def _hnsw(dim: int, params: Mapping[str, Any]) -> Any:
    faiss = faiss_module()
    index = faiss.IndexHNSWFlat(dim, int(params["M"]), faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = int(params["efConstruction"])
    return index


def _ivf(dim: int, params: Mapping[str, Any]) -> Any:
    faiss = faiss_module()
    quantizer = faiss.IndexFlatIP(dim)
    # faiss's Python wrapper keeps `quantizer` referenced by the index it is given to.
    index = faiss.IndexIVFFlat(quantizer, dim, int(params["nlist"]), faiss.METRIC_INNER_PRODUCT)
    if int(params["nlist"]) == 1:  # a tiny corpus: one cell, nothing to warn about
        index.cp.min_points_per_centroid = 1
    return index


def _pq(dim: int, params: Mapping[str, Any]) -> Any:
    m, nbits = int(params["M"]), int(params["nbits"])
    if dim % m:
        raise InputError(f"pq M {m} does not divide the encoder's dimension {dim} (choose M among its divisors)")
    faiss = faiss_module()
    index = faiss.IndexPQ(dim, m, nbits, faiss.METRIC_INNER_PRODUCT)
    if nbits < 8:  # codes sized to a small corpus (`resolve_params`): nothing to warn about
        index.pq.cp.min_points_per_centroid = 1
    return index


BUILTIN_INDEX_KINDS: tuple[IndexKind, ...] = (
    IndexKind("flat", {}, (), _flat),
    IndexKind("hnsw", {"M": 32, "efConstruction": 200, "efSearch": 128}, ("efSearch",), _hnsw),
    IndexKind("ivf", {"nlist": 0, "nprobe": 16}, ("nprobe",), _ivf, lambda p: int(p["nlist"])),
    IndexKind("pq", {"M": 16, "nbits": 0}, (), _pq, lambda p: 2 ** int(p["nbits"])),
    IndexKind("bm25", {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en"}),
)
for _kind in BUILTIN_INDEX_KINDS:
    REGISTRY.add("index", _kind.name, _kind, origin=f"{__name__}:BUILTIN_INDEX_KINDS")

DENSE_KINDS = tuple(k.name for k in BUILTIN_INDEX_KINDS if k.dense)
INDEX_KINDS = tuple(k.name for k in BUILTIN_INDEX_KINDS)
#: Default parameters of the built-in kinds; `nlist` / `nbits` 0 mean "choose from the corpus size".
DEFAULT_PARAMS: Mapping[str, Mapping[str, int | float | str]] = {k.name: k.defaults for k in BUILTIN_INDEX_KINDS}
#: Parameters that only change searching: a saved index may be loaded with other values.
SEARCH_PARAMS: Mapping[str, tuple[str, ...]] = {k.name: k.search_params for k in BUILTIN_INDEX_KINDS}


def index_kind(name: str, *, dense: bool = False) -> IndexKind:
    """The index kind registered as `name` (built-in or plug-in); InputError listing the known
    (dense) kinds otherwise."""
    known = [n for n in REGISTRY.names("index") if not dense or REGISTRY.get(INDEX, n).obj.dense]
    found = REGISTRY.get(INDEX, name).obj if name in known else None
    if found is None:
        what = "dense index kind" if dense else "index kind"
        raise InputError(f"unknown {what} {name!r} (expected one of: {', '.join(known)})")
    return found


def dense_kind_names() -> list[str]:
    """The registered dense index kinds (built-in and plug-in)."""
    return [n for n in REGISTRY.names("index") if REGISTRY.get(INDEX, n).obj.dense]


Params = dict[str, int | float | str]

Hits = list[list[tuple[Passage, float]]]
"""What an index search returns: per query, (passage, score) pairs, best first."""


def auto_nlist(n_passages: int) -> int:
    """IVF cells for n passages: about 4·sqrt(n), and at most n/39 (faiss wants 39 points a cell)."""
    return max(1, min(int(4 * math.sqrt(n_passages)), n_passages // 39))


def resolve_params(kind: str, given: Mapping[str, Any] | None, n_passages: int | None = None) -> Params:
    """The kind's defaults updated with `given`; unknown names or bad values raise InputError."""
    defaults = index_kind(kind).defaults
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
    if kind == "pq" and n_passages is not None:
        if not params["nbits"]:
            params["nbits"] = max(1, min(8, int(math.log2(max(n_passages, 2)))))
        if 2 ** int(params["nbits"]) > n_passages:
            raise InputError(
                f"pq nbits {params['nbits']} makes {2 ** int(params['nbits'])} codes per sub-vector, more than the "
                f"{n_passages} passages to train them on (leave nbits out to choose it from the corpus size)"
            )
    return params


def default_factory(kind: str, params: Mapping[str, Any]) -> str | None:
    """The factory string of the index `branchpoint index build` makes for a kind and parameters."""
    if kind == "flat":
        return "Flat"
    if kind == "hnsw" and "M" in params:
        return f"HNSW{params['M']}"
    if kind == "ivf" and "nlist" in params:
        return f"IVF{params['nlist']},Flat"
    if kind == "pq" and "M" in params and "nbits" in params:
        return f"PQ{params['M']}x{params['nbits']}"
    return None
