"""Memory-mapped corpora: the offset sidecar, its fingerprint, and when it is rebuilt."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from branchpoint.errors import InputError
from branchpoint.retrieval import corpus_fingerprint, corpus_store, load_corpus
from branchpoint.retrieval.corpus_store import MappedCorpus, open_corpus, open_mapped_corpus, sidecar_paths

ROWS = [
    {"id": "a", "contents": '"Alpha"\nfirst passage'},
    {"id": 2, "contents": "Absalon\nan unquoted title line"},
    {"id": "c", "title": "Gamma", "text": "title and text shape"},
    {"id": "d", "contents": "no title at all"},
]


def write(path: Path, rows: list[dict], blank_lines: bool = False) -> Path:
    sep = "\n\n" if blank_lines else "\n"
    path.write_text(sep.join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_mapped_corpus_equals_the_loaded_one_and_its_fingerprint(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", ROWS, blank_lines=True)
    mapped = open_mapped_corpus(path)
    loaded = load_corpus(path)
    assert isinstance(mapped, MappedCorpus) and len(mapped) == 4
    assert list(mapped) == loaded and mapped[-1] == loaded[-1] and mapped[1:3] == loaded[1:3]
    assert mapped.fingerprint == corpus_fingerprint(loaded)
    assert [p.contents for p in mapped] == [
        '"Alpha"\nfirst passage',
        "Absalon\nan unquoted title line",
        '"Gamma"\ntitle and text shape',
        "no title at all",
    ]
    assert (mapped[1].title, mapped[1].text) == ("Absalon", "an unquoted title line")
    with pytest.raises(IndexError):
        mapped[4]
    offsets, meta = sidecar_paths(path)
    assert offsets.is_file() and json.loads(meta.read_text())["rows"] == 4


def test_sidecar_is_reused_until_the_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "c.jsonl", ROWS)
    first = open_mapped_corpus(path).fingerprint
    real_scan = corpus_store._scan
    monkeypatch.setattr(corpus_store, "_scan", lambda p: pytest.fail("rescanned an unchanged corpus"))
    assert open_mapped_corpus(path).fingerprint == first
    write(path, ROWS[:3])
    os.utime(path, ns=(1, 1))  # a different size and mtime
    monkeypatch.setattr(corpus_store, "_scan", real_scan)
    again = open_mapped_corpus(path)
    assert len(again) == 3 and again.fingerprint == corpus_fingerprint(load_corpus(path)) != first


def test_read_only_folder_puts_the_sidecar_in_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "c.jsonl", ROWS)
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    # tests may run as root, who can write anywhere: say the folder is read-only
    monkeypatch.setattr(corpus_store.os, "access", lambda p, mode: Path(p) != tmp_path)
    assert len(open_mapped_corpus(path)) == 4
    assert sidecar_paths(path)[0].is_relative_to(tmp_path / "cache" / "corpora")
    assert not list(tmp_path.glob("*.bpoffsets*"))


def test_bad_rows_and_duplicates_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r'line 2: field "contents" missing \(expected \{"id", "contents"\} or'):
        open_mapped_corpus(write(tmp_path / "a.jsonl", [ROWS[0], {"id": "x"}]))
    with pytest.raises(InputError, match='line 3: duplicate id "a" \\(first on line 1\\)'):
        open_mapped_corpus(write(tmp_path / "b.jsonl", [ROWS[0], ROWS[1], ROWS[0]]))
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match="corpus is empty"):
        open_mapped_corpus(tmp_path / "e.jsonl")
    with pytest.raises(InputError, match="line 1: .*JSON"):
        (tmp_path / "j.jsonl").write_text("{not json\n")
        open_mapped_corpus(tmp_path / "j.jsonl")


def test_open_corpus_maps_jsonl_and_reads_other_formats(tmp_path: Path) -> None:
    assert isinstance(open_corpus(write(tmp_path / "c.jsonl", ROWS)), MappedCorpus)
    listed = tmp_path / "c.json"
    listed.write_text(json.dumps([{"title": "T", "text": "x"}]))
    assert isinstance(open_corpus(listed), list)
