"""Index kind `pq` (faiss.IndexPQ over product-quantised vectors): `branchpoint index build --kind
pq` on the demo corpus, searched through a spec's dense source, agreeing with the exact index;
its parameters checked and recorded; the kind looked up through the registry."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.datasets import load_questions
from branchpoint.errors import InputError
from branchpoint.registry import REGISTRY
from branchpoint.retrieval import DenseIndex
from branchpoint.retrieval.index_kinds import INDEX, resolve_params
from branchpoint.retrieval.sources import DenseSourceSpec

DEMO = Path(__file__).resolve().parents[2] / "branchpoint" / "data" / "demo" / "corpus.jsonl"


def test_index_build_kind_pq_builds_a_pq_index_that_finds_what_the_exact_one_finds(tmp_path: Path, minilm) -> None:
    out = tmp_path / "demo-pq"
    result = CliRunner().invoke(app, ["index", "build", "--corpus", str(DEMO), "--kind", "pq", "--out", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "pq" and manifest["n_passages"] == 79
    assert manifest["params"] == {"M": 16, "nbits": 6}  # 79 passages: 64 codes per sub-vector, not 256
    assert manifest["factory"] == "PQ16x6"

    pq = DenseIndex.load(out, minilm, kind="pq")
    assert isinstance(pq.faiss_index, faiss.IndexPQ) and pq.faiss_index.ntotal == 79
    exact = DenseIndex.build(pq.passages, minilm)
    questions = [q.question for q in load_questions("demo")[:20]]
    got = [hits[0][0].doc_id for hits in pq.search(questions, 3)]
    want = [hits[0][0].doc_id for hits in exact.search(questions, 3)]
    agree = sum(g == w for g, w in zip(got, want)) / len(want)
    assert agree >= 0.8, f"pq top-1 agrees with the exact index on {agree:.0%} of 20 demo questions"

    source = DenseSourceSpec(kind="dense", index=str(out), encoder="minilm-onnx").open("wiki")
    [docs] = [source.search(questions[0], 2)]
    assert docs[0].doc_id == got[0]


def test_pq_parameters_are_checked() -> None:
    assert resolve_params("pq", None, 10_000) == {"M": 16, "nbits": 8}
    assert resolve_params("pq", {"M": 8}, 20) == {"M": 8, "nbits": 4}
    with pytest.raises(InputError, match="more than the 20 passages"):
        resolve_params("pq", {"nbits": 8}, 20)
    with pytest.raises(InputError, match="'pq' has no parameter 'nprobe'"):
        resolve_params("pq", {"nprobe": 4}, 20)
    with pytest.raises(InputError, match="pq M 7 does not divide the encoder's dimension 384"):
        REGISTRY.get(INDEX, "pq").obj.new_index(384, {"M": 7, "nbits": 4})  # type: ignore[misc]


def test_every_index_kind_is_registered_and_the_listing_is_what_build_accepts() -> None:
    assert REGISTRY.names("index") == ["bm25", "flat", "hnsw", "ivf", "pq"]
    with pytest.raises(InputError, match=r"unknown index kind 'lsh' \(expected one of: bm25, flat, hnsw, ivf, pq\)"):
        resolve_params("lsh", None)
