"""Dense index kinds (flat, hnsw, ivf): recall against the exact index on real embeddings,
parameters in the manifest, save / load, stale refusal, FlashRAG index files, GPU requests."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval import DenseIndex, Passage, corpus_fingerprint
from branchpoint.retrieval import gpu as gpu_module
from branchpoint.retrieval.index_kinds import auto_nlist, resolve_params

from .conftest import FakeEncoder, PrecomputedEncoder, RealEmbeddings

K = 10


def recall_at_k(approx: DenseIndex, exact: DenseIndex, queries: np.ndarray, k: int = K) -> float:
    """Mean share of the exact top-k that the approximate top-k finds."""
    got = approx.search_vectors(queries, k)
    want = exact.search_vectors(queries, k)
    return float(np.mean([len({p.doc_id for p, _ in g} & {p.doc_id for p, _ in w}) / k for g, w in zip(got, want)]))


@pytest.fixture(scope="module")
def exact(wiki_embeddings: RealEmbeddings) -> DenseIndex:
    return DenseIndex.from_vectors(wiki_embeddings.passages, wiki_embeddings.vectors, PrecomputedEncoder())


# Parameters chosen so that the search is really approximate on 1,000 passages (the defaults
# are nearly exhaustive at this size), and still must reach recall@10 >= 0.9.
APPROXIMATE = [("hnsw", {"M": 8, "efConstruction": 40, "efSearch": 24}), ("ivf", {"nlist": 32, "nprobe": 6})]


@pytest.mark.parametrize(
    ("kind", "params"),
    [*APPROXIMATE, ("hnsw", {}), ("ivf", {})],
    ids=["hnsw-small", "ivf-small", "hnsw-default", "ivf-default"],
)
def test_recall_against_exact(
    kind: str, params: dict, wiki_embeddings: RealEmbeddings, exact: DenseIndex, record_property: pytest.FixtureRequest
) -> None:
    approx = DenseIndex.from_vectors(
        wiki_embeddings.passages, wiki_embeddings.vectors, PrecomputedEncoder(), kind=kind, params=params
    )
    recall = recall_at_k(approx, exact, wiki_embeddings.query_vectors)
    record_property(f"recall@{K}", recall)
    print(f"{kind} {approx.manifest.params}: recall@{K} = {recall:.3f}")
    assert recall >= 0.9, f"{kind} {approx.manifest.params}: recall@{K} = {recall:.3f}"
    # what it finds is scored like the exact index (inner product of the same vectors)
    q = wiki_embeddings.query_vectors[:5]
    for hits in approx.search_vectors(q, 3):
        for p, score in hits:
            row = int(p.doc_id[1:])
            expected = [float(v @ wiki_embeddings.vectors[row]) for v in q]
            assert min(abs(score - e) for e in expected) < 1e-4


def test_parameters_recorded_and_defaults(fake_encoder: FakeEncoder, facts: list[Passage], tmp_path: Path) -> None:
    hnsw = DenseIndex.build(facts, fake_encoder, kind="hnsw", params={"M": 8})
    assert hnsw.manifest.params == {"M": 8, "efConstruction": 200, "efSearch": 128}
    assert isinstance(hnsw.faiss_index, faiss.IndexHNSWFlat)
    assert hnsw.faiss_index.metric_type == faiss.METRIC_INNER_PRODUCT
    ivf = DenseIndex.build(facts * 1, fake_encoder, kind="ivf")
    assert ivf.manifest.params == {"nlist": 1, "nprobe": 1}  # 6 passages: one cell
    assert auto_nlist(10_000) == 256 and auto_nlist(100_000) == 1264 and auto_nlist(20) == 1
    saved = json.loads((hnsw.save(tmp_path / "h") / "manifest.json").read_text())
    assert saved["kind"] == "hnsw" and saved["params"]["M"] == 8
    with pytest.raises(InputError, match="'hnsw' has no parameter 'nprobe'"):
        DenseIndex.build(facts, fake_encoder, kind="hnsw", params={"nprobe": 4})
    with pytest.raises(InputError, match="whole number of at least 1"):
        resolve_params("ivf", {"nlist": 0.5})
    with pytest.raises(InputError, match="exceeds the 6 passages"):
        DenseIndex.build(facts, fake_encoder, kind="ivf", params={"nlist": 50})
    with pytest.raises(InputError, match="unknown dense index kind 'lsh'"):
        DenseIndex.from_vectors(facts, np.zeros((6, 64)), fake_encoder, kind="lsh")


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_save_load_and_search_params(kind: str, wiki_embeddings: RealEmbeddings, tmp_path: Path) -> None:
    passages, vectors = wiki_embeddings.passages[:300], wiki_embeddings.vectors[:300]
    built = DenseIndex.from_vectors(passages, vectors, PrecomputedEncoder(), kind=kind)
    out = built.save(tmp_path / kind)
    loaded = DenseIndex.load(out, PrecomputedEncoder(), corpus_fingerprint(passages), kind=kind)
    assert loaded.manifest == built.manifest and loaded.kind == kind
    q = wiki_embeddings.query_vectors[:20]
    assert loaded.search_vectors(q, 5) == built.search_vectors(q, 5)

    search_param = {"hnsw": "efSearch", "ivf": "nprobe"}[kind]
    tuned = DenseIndex.load(out, PrecomputedEncoder(), params={search_param: 2})
    assert tuned.manifest.params[search_param] == 2
    if kind == "hnsw":
        assert tuned.faiss_index.hnsw.efSearch == 2
    else:
        assert tuned.faiss_index.nprobe == 2
    build_param = {"hnsw": "M", "ivf": "nlist"}[kind]
    with pytest.raises(StaleIndexError, match=f"built with {build_param}=.*rebuild"):
        DenseIndex.load(out, PrecomputedEncoder(), params={build_param: 3})
    other = "flat" if kind == "hnsw" else "hnsw"
    with pytest.raises(StaleIndexError, match=f"a {kind} index, but kind {other} was asked for"):
        DenseIndex.load(out, PrecomputedEncoder(), kind=other)


def write_flashrag(
    tmp_path: Path, passages: list[Passage], vectors: np.ndarray, faiss_type: str = "Flat"
) -> tuple[Path, Path]:
    """An index and corpus written the way FlashRAG's index builder writes them."""
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as fh:
        for p in passages:
            fh.write(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n")
    index = faiss.index_factory(vectors.shape[1], faiss_type, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        index.train(vectors)
    index.add(vectors)
    path = tmp_path / f"e5_{faiss_type.replace(',', '_')}.index"
    faiss.write_index(index, str(path))
    return path, corpus


@pytest.mark.parametrize("faiss_type", ["Flat", "HNSW16", "IVF8,Flat"])
def test_flashrag_index_round_trip(
    faiss_type: str, wiki_embeddings: RealEmbeddings, exact: DenseIndex, tmp_path: Path
) -> None:
    passages, vectors = wiki_embeddings.passages[:400], wiki_embeddings.vectors[:400]
    index_file, corpus = write_flashrag(tmp_path, passages, vectors, faiss_type)
    loaded = DenseIndex.load_flashrag(
        index_file, corpus, PrecomputedEncoder(), params={"nprobe": 8} if faiss_type.startswith("IVF") else None
    )
    assert list(loaded.passages) == passages and len(loaded) == 400
    assert loaded.kind == {"Flat": "flat", "HNSW16": "hnsw", "IVF8,Flat": "ivf"}[faiss_type]
    assert loaded.manifest.corpus_fingerprint == corpus_fingerprint(passages)
    if faiss_type == "HNSW16":
        assert loaded.manifest.params["M"] == 16
    ours = DenseIndex.from_vectors(passages, vectors, PrecomputedEncoder())
    q = wiki_embeddings.query_vectors[:30]
    got = [[p.doc_id for p, _ in hits] for hits in loaded.search_vectors(q, 5)]
    want = [[p.doc_id for p, _ in hits] for hits in ours.search_vectors(q, 5)]
    agree = np.mean([len(set(g) & set(w)) / 5 for g, w in zip(got, want)])
    assert agree >= (1.0 if faiss_type == "Flat" else 0.9)
    # and it saves as one of ours
    again = DenseIndex.load(loaded.save(tmp_path / "ours"), PrecomputedEncoder())
    assert again.search_vectors(q, 5) == loaded.search_vectors(q, 5)


def test_flashrag_mismatches_refused(wiki_embeddings: RealEmbeddings, tmp_path: Path) -> None:
    passages, vectors = wiki_embeddings.passages[:50], wiki_embeddings.vectors[:50]
    index_file, corpus = write_flashrag(tmp_path, passages, vectors)
    short = tmp_path / "short.jsonl"
    short.write_text("".join(corpus.read_text().splitlines(keepends=True)[:49]))
    with pytest.raises(StaleIndexError, match="holds 50 vectors but .*short.jsonl has 49 passages"):
        DenseIndex.load_flashrag(index_file, short, PrecomputedEncoder())
    with pytest.raises(StaleIndexError, match='dim 384, but encoder "fake" gives dim 64'):
        DenseIndex.load_flashrag(index_file, corpus, FakeEncoder())
    l2 = faiss.IndexFlatL2(384)
    l2.add(vectors)
    faiss.write_index(l2, str(tmp_path / "l2.index"))
    with pytest.raises(InputError, match="does not use inner product"):
        DenseIndex.load_flashrag(tmp_path / "l2.index", corpus, PrecomputedEncoder())
    (tmp_path / "junk.index").write_bytes(b"not faiss")
    with pytest.raises(InputError, match="junk.index: not a faiss index file"):
        DenseIndex.load_flashrag(tmp_path / "junk.index", corpus, PrecomputedEncoder())
    with pytest.raises(InputError, match="missing.index: faiss index file not found"):
        DenseIndex.load_flashrag(tmp_path / "missing.index", corpus, PrecomputedEncoder())


def test_gpu_without_faiss_gpu_is_one_clear_error(fake_encoder: FakeEncoder, facts: list[Passage]) -> None:
    if hasattr(faiss, "StandardGpuResources"):
        pytest.skip("this faiss has GPU support")
    with pytest.raises(InputError, match=r"device gpu: the installed faiss .* has no GPU support.*faiss-gpu") as info:
        DenseIndex.build(facts, fake_encoder, device="gpu")
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="no GPU HNSW"):
        DenseIndex.build(facts, fake_encoder, kind="hnsw", device="gpu")


def test_gpu_path_moves_index_and_saves_cpu_copy(
    fake_encoder: FakeEncoder, facts: list[Passage], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a faiss that has GPU support (simulated: no GPU here), the index goes to GPU 0."""
    moved: list[str] = []

    class GpuIndexFlatIP(faiss.IndexFlatIP):  # stands in for faiss.GpuIndexFlatIP
        pass

    def cpu_to_gpu(resources: object, device: int, index: object) -> object:
        moved.append(f"to gpu {device}")
        gpu = GpuIndexFlatIP(index.d)
        return gpu

    def gpu_to_cpu(index: object) -> object:
        moved.append("to cpu")
        cpu = faiss.IndexFlatIP(index.d)
        cpu.add(index.reconstruct_n(0, index.ntotal))
        return cpu

    monkeypatch.setattr(faiss, "StandardGpuResources", lambda: object(), raising=False)
    monkeypatch.setattr(faiss, "index_cpu_to_gpu", cpu_to_gpu, raising=False)
    monkeypatch.setattr(faiss, "index_gpu_to_cpu", gpu_to_cpu, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)
    monkeypatch.setattr(gpu_module, "_GPU_RESOURCES", None)
    built = DenseIndex.build(facts, fake_encoder, device="gpu")
    assert moved == ["to gpu 0"] and isinstance(built.faiss_index, GpuIndexFlatIP)
    assert built.search(["capital of Australia"], 1)[0][0][0].title == "Canberra"
    out = built.save(tmp_path / "g")
    assert moved == ["to gpu 0", "to cpu"]
    assert type(faiss.read_index(str(out / "index.faiss"))).__name__.startswith("IndexFlat")
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0)
    with pytest.raises(InputError, match="sees no GPU"):
        DenseIndex.load(out, fake_encoder, device="gpu")
