"""Corpus loading (every format), bad-input messages, chunking and fingerprints."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import pytest

from branchpoint.errors import InputError
from branchpoint.retrieval import Passage, chunk_passages, corpus_fingerprint, load_corpus


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- formats, on slices of the real sample corpora ---------------------------------------


def test_flashrag_jsonl_slice(shared_corpora: Path, tmp_path: Path) -> None:
    with (shared_corpora / "flashrag_sample_1k.jsonl").open(encoding="utf-8") as fh:
        lines = list(islice(fh, 5))
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    passages = load_corpus(path)
    assert [p.doc_id for p in passages] == ["0", "1", "2", "3", "4"]
    first = json.loads(lines[0])
    assert passages[0].title == "Evan Morris"  # surrounding quotes stripped
    assert passages[0].text.startswith("Evan Morris Evan L. Morris")
    assert passages[0].contents == first["contents"]  # FlashRAG form round-trips


def test_title_text_list_slice(shared_corpora: Path, tmp_path: Path) -> None:
    items = json.loads((shared_corpora / "musique_hipporag_corpus.json").read_text())[:3]
    path = tmp_path / "musique.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    passages = load_corpus(path)
    assert [p.doc_id for p in passages] == ["musique-0", "musique-1", "musique-2"]
    assert [(p.title, p.text) for p in passages] == [(i["title"], i["text"]) for i in items]


def test_title_sentences_dict_slice(shared_corpora: Path, tmp_path: Path) -> None:
    data = json.loads((shared_corpora / "hotpotqa_hipporag_corpus.json").read_text())
    sliced = dict(islice(data.items(), 3))
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(sliced), encoding="utf-8")
    passages = load_corpus(path)
    assert [p.title for p in passages] == list(sliced)
    assert passages[0].doc_id == "hotpot-0"
    sentences = sliced["Demon Dice"]
    assert passages[0].text == " ".join(s.strip() for s in sentences)
    assert "  " not in passages[0].text  # sentences that start with a space don't double it


def test_title_extract_dict_slice(shared_corpora: Path, tmp_path: Path) -> None:
    data = json.loads((shared_corpora / "wikipedia_vital_summaries_en.json").read_text())
    sliced = dict(islice(data.items(), 3))
    path = tmp_path / "vital.json"
    path.write_text(json.dumps(sliced), encoding="utf-8")
    passages = load_corpus(path)
    assert [(p.title, p.text) for p in passages] == [(v["title"], v["extract"]) for v in sliced.values()]
    assert [p.doc_id for p in passages] == ["vital-0", "vital-1", "vital-2"]


# --- formats, on tiny synthetic files -------------------------------------------------------


def test_explicit_format_and_unknown_format(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.txt", [{"id": "a", "contents": '"T"\nbody'}])
    assert load_corpus(path, fmt="flashrag-jsonl") == [Passage(doc_id="a", title="T", text="body")]
    with pytest.raises(InputError, match="unknown corpus format 'csv'.*flashrag-jsonl"):
        load_corpus(path, fmt="csv")


def test_flashrag_untitled_and_integer_ids(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [{"id": 7, "contents": "no title line"}, {"id": "8", "contents": '"A "quoted" title"\nx\ny'}],
    )
    a, b = load_corpus(path)
    assert (a.doc_id, a.title, a.text) == ("7", "", "no title line")
    assert (b.title, b.text) == ('A "quoted" title', "x\ny")


def test_extract_dict_without_title_uses_key(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"Key Title": {"extract": "Some text."}}), encoding="utf-8")
    assert load_corpus(path)[0].title == "Key Title"


# --- bad input ------------------------------------------------------------------------------


def test_malformed_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"id": "a", "contents": "x"}\n{"id": "b", "contents": \n', encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_corpus(path)
    assert "corpus.jsonl" in str(info.value) and "line 2" in str(info.value)


def test_missing_contents_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "corpus.jsonl", [{"id": "a", "contents": "x"}, {"id": "b"}])
    with pytest.raises(InputError) as info:
        load_corpus(path)
    msg = str(info.value)
    assert "corpus.jsonl line 2" in msg
    assert 'field "contents" missing (expected {"id", "contents"} or {"id", "title", "text"})' in msg


def test_wrong_typed_fields(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "corpus.jsonl", [{"id": "a", "contents": ["x"]}])
    with pytest.raises(InputError, match='line 1: field "contents" must be a string, got list'):
        load_corpus(path)
    path = tmp_path / "list.json"
    path.write_text(json.dumps([{"title": "t", "text": "x"}, {"title": "t", "text": 3}]))
    with pytest.raises(InputError, match='list.json item 1: field "text" must be a string, got int'):
        load_corpus(path)
    path.write_text(json.dumps([{"title": "t"}]))
    with pytest.raises(InputError, match='item 0: field "text" missing'):
        load_corpus(path)
    path = tmp_path / "sent.json"
    path.write_text(json.dumps({"T": "not a list"}))
    with pytest.raises(InputError, match='entry "T": expected a list of sentence strings'):
        load_corpus(path, fmt="title-sentences-dict")


def test_duplicate_ids(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "corpus.jsonl",
        [{"id": "a", "contents": "x"}, {"id": "b", "contents": "y"}, {"id": "a", "contents": "z"}],
    )
    with pytest.raises(InputError, match='line 3: duplicate id "a" \\(first on line 1\\)'):
        load_corpus(path)


@pytest.mark.parametrize(
    "name, body", [("corpus.jsonl", ""), ("corpus.jsonl", "\n\n"), ("corpus.json", "[]"), ("corpus.json", "{}")]
)
def test_empty_corpus(tmp_path: Path, name: str, body: str) -> None:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    with pytest.raises(InputError, match=f"{name}: corpus is empty"):
        load_corpus(path)


def test_missing_file_and_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.jsonl: corpus file not found"):
        load_corpus(tmp_path / "nope.jsonl")
    path = tmp_path / "bad.json"
    path.write_text('[\n{"title": "t",\n "text": }\n]')
    with pytest.raises(InputError, match="bad.json line 3: invalid JSON"):
        load_corpus(path)


# --- chunking and fingerprint ---------------------------------------------------------------


def test_chunking_keeps_titles_and_counts_words() -> None:
    long = Passage(doc_id="d", title="Long", text=" ".join(f"w{i}" for i in range(250)))
    short = Passage(doc_id="s", title="Short", text="only a few words here")
    chunks = chunk_passages([long, short], words=100)
    assert [c.doc_id for c in chunks] == ["d#0", "d#1", "d#2", "s"]
    assert [len(c.text.split()) for c in chunks] == [100, 100, 50, 5]
    assert all(c.title == "Long" for c in chunks[:3])
    assert chunks[0].text.split()[0] == "w0" and chunks[1].text.split()[0] == "w100"
    assert chunks[3] is short  # fits in one chunk: unchanged
    exact = Passage(doc_id="e", title="E", text=" ".join(["x"] * 100))
    assert chunk_passages([exact]) == [exact]
    with pytest.raises(InputError, match="at least 1 word"):
        chunk_passages([short], words=0)


def test_chunking_refuses_colliding_ids() -> None:
    passages = [Passage(doc_id="d", title="", text="a b c"), Passage(doc_id="d#0", title="", text="x")]
    with pytest.raises(InputError, match='duplicate id "d#0"'):
        chunk_passages(passages, words=2)


def test_fingerprint_is_stable_and_sensitive() -> None:
    a = [Passage(doc_id="1", title="A", text="alpha"), Passage(doc_id="2", title="B", text="beta")]
    same = [Passage(doc_id="1", title="A", text="alpha"), Passage(doc_id="2", title="B", text="beta")]
    assert corpus_fingerprint(a) == corpus_fingerprint(same)
    assert len(corpus_fingerprint(a)) == 64
    assert corpus_fingerprint(a) != corpus_fingerprint(a[::-1])
    edited = [a[0], Passage(doc_id="2", title="B", text="beta!")]
    assert corpus_fingerprint(a) != corpus_fingerprint(edited)
    # Field boundaries matter: moving text between title and text changes the fingerprint.
    assert corpus_fingerprint([Passage(doc_id="1", title="ab", text="c")]) != corpus_fingerprint(
        [Passage(doc_id="1", title="a", text="bc")]
    )


def test_chunking_edge_cases(fake_encoder: object, tmp_path: Path) -> None:
    """Empty text, exactly 100 / 101 words, a very long title, unicode: chunked, indexed, saved."""
    from branchpoint.retrieval import DenseIndex

    empty = Passage(doc_id="empty", title="Empty", text="")
    exact = Passage(doc_id="exact", title="Exact", text=" ".join(f"w{i}" for i in range(100)))
    one_over = Passage(doc_id="over", title="Over", text=" ".join(f"w{i}" for i in range(101)))
    long_title = Passage(doc_id="lt", title="T" * 5000 + " " + "word " * 300, text="short text under a huge title")
    unicode = Passage(
        doc_id="uni",
        title="Zürich — 東京 🚄",
        text=" ".join(["café"] * 60 + ["日本語のテキスト"] * 30 + ["naïve\u3000ωμέγα"] * 10),
    )
    chunks = chunk_passages([empty, exact, one_over, long_title, unicode], words=100)
    by_id = {c.doc_id: c for c in chunks}
    assert by_id["empty"] is empty and by_id["exact"] is exact  # fit in one chunk: unchanged
    assert [len(by_id[f"over#{k}"].text.split()) for k in (0, 1)] == [100, 1]
    assert by_id["over#1"].text == "w100" and by_id["over#0"].title == "Over"
    assert by_id["lt"] is long_title  # title words do not count towards the chunk size
    # U+3000 (ideographic space) separates words; a run of CJK characters is one word
    assert [len(by_id[f"uni#{k}"].text.split()) for k in (0, 1)] == [100, 10]
    assert by_id["uni#1"].text == " ".join(["naïve ωμέγα"] * 5) and by_id["uni#1"].title == "Zürich — 東京 🚄"
    assert set(by_id) == {"empty", "exact", "over#0", "over#1", "lt", "uni#0", "uni#1"}

    index = DenseIndex.build(chunks, fake_encoder)  # every kind of chunk encodes and indexes
    saved = DenseIndex.load(index.save(tmp_path / "idx"), fake_encoder)
    assert list(saved.passages) == chunks  # the FlashRAG "Title"\ntext form round-trips all of them
    assert saved.search(["café"], 1)[0][0][0].doc_id == "uni#0"
