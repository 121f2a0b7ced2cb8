"""DenseIndex: build, search, atomic save, load, and refusal of stale indexes."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import pytest

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval import DenseIndex, MiniLMOnnxEncoder, Passage, corpus_fingerprint

from .conftest import FakeEncoder


def test_search_ranks_answer_passage_first(minilm: MiniLMOnnxEncoder, facts: list[Passage]) -> None:
    index = DenseIndex.build(facts, minilm, batch_size=4)
    results = index.search(["What is the capital of Australia?", "Who painted the Mona Lisa?"], k=3)
    assert [hits[0][0].title for hits in results] == ["Canberra", "Mona Lisa"]
    scores = [s for _, s in results[0]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    assert len(index.search(["anything"], k=50)[0]) == len(facts)  # k larger than the corpus


def test_search_rejects_bad_k(fake_encoder: FakeEncoder, facts: list[Passage]) -> None:
    with pytest.raises(InputError, match="k .* at least 1"):
        DenseIndex.build(facts, fake_encoder).search(["q"], k=0)


def test_build_refuses_empty_corpus(fake_encoder: FakeEncoder) -> None:
    with pytest.raises(InputError, match="empty corpus"):
        DenseIndex.build([], fake_encoder)


def test_save_load_round_trip(fake_encoder: FakeEncoder, facts: list[Passage], tmp_path: Path) -> None:
    built = DenseIndex.build(facts, fake_encoder, progress=True)
    out = built.save(tmp_path / "idx")
    assert sorted(p.name for p in out.iterdir()) == [
        "index.faiss",
        "manifest.json",
        "passages.jsonl",
        "passages.jsonl.bpoffsets.json",
        "passages.jsonl.bpoffsets.npy",
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "flat" and manifest["encoder"] == "fake"
    assert manifest["dim"] == 64 and manifest["n_passages"] == len(facts)
    assert manifest["corpus_fingerprint"] == corpus_fingerprint(facts)
    assert manifest["created_at"] and manifest["branchpoint_version"]
    first = json.loads((out / "passages.jsonl").read_text().splitlines()[0])
    assert first == {"id": "f0", "contents": facts[0].contents}

    loaded = DenseIndex.load(out, fake_encoder, expected_fingerprint=corpus_fingerprint(facts))
    assert list(loaded.passages) == facts
    query = ["highest mountain Himalayas"]
    assert loaded.search(query, k=2) == built.search(query, k=2)


def test_stale_fingerprint_refused(fake_encoder: FakeEncoder, facts: list[Passage], tmp_path: Path) -> None:
    out = DenseIndex.build(facts, fake_encoder).save(tmp_path / "idx")
    other = corpus_fingerprint(facts[:-1])
    with pytest.raises(StaleIndexError) as info:
        DenseIndex.load(out, fake_encoder, expected_fingerprint=other)
    msg = str(info.value)
    assert str(out / "manifest.json") in msg
    assert corpus_fingerprint(facts) in msg and other in msg


def test_other_encoder_refused(fake_encoder: FakeEncoder, facts: list[Passage], tmp_path: Path) -> None:
    out = DenseIndex.build(facts, fake_encoder).save(tmp_path / "idx")
    with pytest.raises(StaleIndexError, match='encoder "fake" \\(dim 64\\) but encoder "other"'):
        DenseIndex.load(out, FakeEncoder(name="other", dim=64))
    with pytest.raises(StaleIndexError, match="dim 64.*dim 32"):
        DenseIndex.load(out, FakeEncoder(name="fake", dim=32))


def test_damaged_index_refused(fake_encoder: FakeEncoder, facts: list[Passage], tmp_path: Path) -> None:
    out = DenseIndex.build(facts, fake_encoder).save(tmp_path / "idx")
    lines = (out / "passages.jsonl").read_text().splitlines()
    (out / "passages.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(StaleIndexError, match="damaged"):
        DenseIndex.load(out, fake_encoder)
    (out / "manifest.json").unlink()
    with pytest.raises(InputError, match="manifest.json: file not found"):
        DenseIndex.load(out, fake_encoder)


def test_save_is_atomic(
    fake_encoder: FakeEncoder, facts: list[Passage], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = DenseIndex.build(facts, fake_encoder)
    index.save(tmp_path / "idx")
    DenseIndex.build(facts[:2], fake_encoder).save(tmp_path / "idx")  # overwrite in place
    assert DenseIndex.load(tmp_path / "idx", fake_encoder).manifest.n_passages == 2
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no temporary or old dirs left

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(faiss, "write_index", interrupted)
    with pytest.raises(KeyboardInterrupt):
        index.save(tmp_path / "new")
    with pytest.raises(KeyboardInterrupt):
        index.save(tmp_path / "idx")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # nothing half-written, old one kept
    assert DenseIndex.load(tmp_path / "idx", fake_encoder).manifest.n_passages == 2
