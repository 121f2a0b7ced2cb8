"""`build_index` / `branchpoint index build`: resumable encoding in shards, atomic writes,
refusing an OUT that holds another index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval import DenseIndex, Passage, build_index, encode_corpus, load_index
from branchpoint.retrieval import build as build_module

from .conftest import FakeEncoder


class InterruptedEncoder(FakeEncoder):
    """Raises KeyboardInterrupt on its `fail_on`-th encode call (a killed build)."""

    def __init__(self, fail_on: int, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.fail_on = fail_on

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if self.calls + 1 == self.fail_on:
            raise KeyboardInterrupt
        return super().encode(texts, batch_size)


def ten_passages(facts: list[Passage]) -> list[Passage]:
    extra = [Passage(doc_id=f"x{i}", title=f"Extra {i}", text=f"extra passage number {i} about tea") for i in range(4)]
    return [*facts, *extra]


@pytest.fixture()
def corpus_file(tmp_path: Path, facts: list[Passage]) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        "".join(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n" for p in ten_passages(facts)),
        encoding="utf-8",
    )
    return path


def test_interrupted_build_resumes_from_last_whole_shard(
    corpus_file: Path, tmp_path: Path, facts: list[Passage]
) -> None:
    out = tmp_path / "idx"
    # 10 passages, shards of 4, batches of 2: shard 0 = calls 1-2, shard 1 = calls 3-4, shard 2 = call 5
    with pytest.raises(KeyboardInterrupt):
        build_index(corpus_file, out, encoder=InterruptedEncoder(fail_on=5), batch_size=2, shard_size=4)
    partial = out / ".partial"
    assert sorted(p.name for p in partial.iterdir()) == ["emb-00000.npy", "emb-00001.npy", "state.json"]
    assert not (out / "manifest.json").exists()
    state = json.loads((partial / "state.json").read_text())
    assert state["encoder"] == "fake" and state["n_passages"] == 10 and state["shard_size"] == 4

    rerun = FakeEncoder()
    report = build_index(corpus_file, out, encoder=rerun, batch_size=2, shard_size=4)
    assert rerun.calls == 1 and len(rerun.texts_seen) == 2  # only the last shard was encoded
    assert (report.encoded, report.reused, report.already_built) == (2, 8, False)
    assert sorted(p.name for p in out.iterdir()) == [
        "index.faiss",
        "manifest.json",
        "passages.jsonl",
        "passages.jsonl.bpoffsets.json",
        "passages.jsonl.bpoffsets.npy",
    ]
    resumed = DenseIndex.load(out, FakeEncoder())
    fresh = DenseIndex.build(ten_passages(facts), FakeEncoder())
    q = ["capital of Australia", "extra passage number 3"]
    assert resumed.search(q, 3) == fresh.search(q, 3)
    np.testing.assert_allclose(
        resumed.faiss_index.reconstruct_n(0, 10), fresh.faiss_index.reconstruct_n(0, 10), atol=1e-6
    )

    again = FakeEncoder()
    assert build_index(corpus_file, out, encoder=again).already_built and again.calls == 0


def test_shards_of_another_encoder_are_discarded(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "idx"
    with pytest.raises(KeyboardInterrupt):
        build_index(corpus_file, out, encoder=InterruptedEncoder(fail_on=3), batch_size=2, shard_size=2)
    other = FakeEncoder(name="other")
    report = build_index(corpus_file, out, encoder=other, batch_size=2, shard_size=2)
    assert other.calls == 5 and report.reused == 0 and report.manifest.encoder == "other"


def test_encode_corpus_rewrites_a_damaged_shard(tmp_path: Path, facts: list[Passage]) -> None:
    shard_dir = tmp_path / "shards"
    first = encode_corpus(facts, FakeEncoder(), 2, shard_dir=shard_dir, shard_size=3)
    (shard_dir / "emb-00001.npy").write_bytes(b"garbage")
    counting = FakeEncoder()
    second = encode_corpus(facts, counting, 2, shard_dir=shard_dir, shard_size=3)
    assert counting.calls == 2  # shard 1 (3 passages, batches of 2) only
    np.testing.assert_array_equal(first, second)


def test_out_holding_another_index_is_refused(corpus_file: Path, tmp_path: Path, facts: list[Passage]) -> None:
    out = tmp_path / "idx"
    build_index(corpus_file, out, encoder=FakeEncoder())
    with pytest.raises(StaleIndexError, match=r"holds another index \(kind flat \(asked: hnsw\)\).*--overwrite"):
        build_index(corpus_file, out, encoder=FakeEncoder(), kind="hnsw")
    with pytest.raises(StaleIndexError, match=r"encoder fake \(asked: other\)"):
        build_index(corpus_file, out, encoder=FakeEncoder(name="other"))
    with pytest.raises(StaleIndexError, match="corpus fingerprint"):
        build_index(corpus_file, out, encoder=FakeEncoder(), chunk_words=3)
    report = build_index(corpus_file, out, encoder=FakeEncoder(), chunk_words=3, overwrite=True)
    assert report.manifest.n_passages > 10 and load_index(out, FakeEncoder()).manifest.n_passages > 10


def test_changing_only_search_parameters_keeps_the_vectors(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "idx"
    build_index(corpus_file, out, encoder=FakeEncoder(), kind="hnsw", params={"efSearch": 16})
    counting = FakeEncoder()
    report = build_index(corpus_file, out, encoder=counting, kind="hnsw", params={"efSearch": 64})
    assert report.already_built and counting.calls == 0
    assert load_index(out, FakeEncoder()).faiss_index.hnsw.efSearch == 64
    with pytest.raises(StaleIndexError, match=r"M=32 \(asked: 8\)"):
        build_index(corpus_file, out, encoder=FakeEncoder(), kind="hnsw", params={"M": 8})


def test_bad_requests(corpus_file: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown index kind 'annoy'"):
        build_index(corpus_file, tmp_path / "a", encoder=FakeEncoder(), kind="annoy")
    with pytest.raises(InputError, match="bm25 index runs on the CPU"):
        build_index(corpus_file, tmp_path / "a", kind="bm25", device="gpu")
    with pytest.raises(InputError, match="has no parameter 'nlist'"):
        build_index(corpus_file, tmp_path / "a", encoder=FakeEncoder(), kind="hnsw", params={"nlist": 4})
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        build_index(corpus_file, tmp_path / "file", encoder=FakeEncoder())


runner = CliRunner()


def test_cli_index_build(corpus_file: Path, tmp_path: Path, minilm: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_module, "get_encoder", lambda name, **kwargs: minilm)
    out = tmp_path / "hnsw"
    result = runner.invoke(
        app,
        [
            "index",
            "build",
            "--corpus",
            str(corpus_file),
            "--encoder",
            "minilm-onnx",
            "--kind",
            "hnsw",
            "--out",
            str(out),
            "--param",
            "M=8",
            "--param",
            "efSearch=20",
            "--batch-size",
            "4",
            "--chunk-words",
            "100",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "hnsw index of 10 passages (minilm-onnx, dim 384), M=8, efConstruction=200, efSearch=20" in result.output
    loaded = load_index(out)  # the encoder its manifest names
    assert loaded.search(["capital of Australia"], 1)[0][0][0].title == "Canberra"
    result = runner.invoke(
        app,
        [
            "index",
            "build",
            "--corpus",
            str(corpus_file),
            "--kind",
            "hnsw",
            "--out",
            str(out),
            "--param",
            "M=8",
            "--chunk-words",
            "100",
        ],
    )
    assert result.exit_code == 0 and "already holds this hnsw index" in result.output

    bm25 = runner.invoke(
        app,
        [
            "index",
            "build",
            "--corpus",
            str(corpus_file),
            "--kind",
            "bm25",
            "--out",
            str(tmp_path / "bm25"),
            "--param",
            "k1=1.2",
            "--no-progress",
        ],
    )
    assert bm25.exit_code == 0 and "bm25 index of 10 passages, k1=1.2" in bm25.output

    for args, message in (
        (["--kind", "flat", "--out", str(out)], "holds another index"),
        (["--kind", "ivf", "--out", str(tmp_path / "x"), "--param", "nlist"], "expected NAME=VALUE"),
        (["--kind", "flat", "--out", str(tmp_path / "y"), "--device", "gpu"], "device gpu"),
    ):
        bad = runner.invoke(app, ["index", "build", "--corpus", str(corpus_file), *args])
        assert bad.exit_code == 2 and message in bad.output, bad.output
