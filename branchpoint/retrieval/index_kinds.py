"""The index kinds (flat, hnsw, ivf: dense FAISS; bm25) and their parameters.

Kinds and parameters (recorded in a saved index's manifest, `params`):
- `flat`: exact inner product (faiss.IndexFlatIP); no parameters.
- `hnsw`: faiss.IndexHNSWFlat, inner product. `M` (links per node, build), `efConstruction`
  (build), `efSearch` (search; may be changed when loading).
- `ivf`: faiss.IndexIVFFlat over a flat inner-product quantizer. `nlist` (cells, build;
  default about 4·sqrt(n), at most n/39 so every cell has training points), `nprobe` (cells
  visited per query, search; may be changed when loading).
- `bm25`: `k1`, `b`, `method`, `stopwords` (bm25.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from branchpoint.errors import InputError
from branchpoint.registry import REGISTRY
from branchpoint.retrieval.corpus import Passage

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
    REGISTRY.add(
        "index", _kind, DEFAULT_PARAMS[_kind], origin=f"{__name__}:DEFAULT_PARAMS", search_params=SEARCH_PARAMS[_kind]
    )

Params = dict[str, int | float | str]

Hits = list[list[tuple[Passage, float]]]
"""What an index search returns: per query, (passage, score) pairs, best first."""


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


def default_factory(kind: str, params: Mapping[str, Any]) -> str | None:
    """The factory string of the index `branchpoint index build` makes for a kind and parameters."""
    if kind == "flat":
        return "Flat"
    if kind == "hnsw" and "M" in params:
        return f"HNSW{params['M']}"
    if kind == "ivf" and "nlist" in params:
        return f"IVF{params['nlist']},Flat"
    return None
