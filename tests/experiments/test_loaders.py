"""Question-set loaders: every format on the shared sample files, auto detection, clear errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from branchpoint.errors import InputError
from branchpoint.experiments.loaders import (
    QUESTION_FORMATS,
    balanced_sample,
    detect_format,
    load_questions,
    load_questions_with_report,
)
from branchpoint.experiments.questions import Question

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
if not DATA.is_dir():  # the checkout may sit elsewhere; /work/shared is the development layout
    DATA = Path("/work/shared/data")
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared sample data not found at {DATA}")

ANS = DATA / "answerable"
UNANS = DATA / "unanswerable"


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def bp(i: str, answerable: bool = True, category: str | None = None, **kw) -> dict:
    return {"id": i, "question": f"question {i}?", "answerable": answerable, "category": category,
            "gold_answers": ["x"] if answerable else [], **kw}


# ----------------------------------------------------------------------- real sample files


@needs_data
def test_musique():
    qs = load_questions(ANS / "musique_hipporag_100.json", "musique")
    assert len(qs) == 100 and all(q.answerable and q.category is None for q in qs)
    raw = json.loads((ANS / "musique_hipporag_100.json").read_text())[0]
    q = qs[0]
    assert q.id == raw["id"] and q.question == raw["question"]
    assert q.gold_answers[0] == raw["answer"] and set(raw["answer_aliases"]) <= set(q.gold_answers)
    titles = [p["title"] for p in raw["paragraphs"] if p["is_supporting"]]
    assert q.support == list(dict.fromkeys(titles)) and q.support_group == titles[0]
    assert all(q.support and q.support_group == q.support[0] for q in qs)


@needs_data
def test_hotpotqa():
    qs = load_questions(ANS / "hotpotqa_hipporag_100.json", "hotpotqa", limit=10)
    raw = json.loads((ANS / "hotpotqa_hipporag_100.json").read_text())[0]
    q = qs[0]
    assert len(qs) == 10 and q.id == raw["_id"] and q.gold_answers == [raw["answer"]]
    assert q.stratum == f"{raw['type']}/{raw['level']}"
    assert q.support == list(dict.fromkeys(t for t, _ in raw["supporting_facts"]))
    assert q.support_group == q.support[0]


@needs_data
def test_nq_open_flashrag_r1searcher():
    nq = load_questions(ANS / "nq_open_dev.jsonl", "nq_open", limit=5)
    assert [q.id for q in nq] == [f"nq-{i}" for i in range(1, 6)]
    assert nq[0].gold_answers == ["14 December 1972 UTC", "December 1972"]

    fr = load_questions(ANS / "flashrag_nq_quickstart.jsonl", "flashrag")
    assert len(fr) == 17 and fr[0].id == "test_0" and fr[0].gold_answers

    r1 = load_questions(ANS / "r1searcher" / "bamboogle.jsonl", "r1searcher", limit=3)
    assert [q.id for q in r1] == ["bamboogle-1", "bamboogle-2", "bamboogle-3"]
    assert r1[0].gold_answers == ["james madison"]


@needs_data
def test_coconot_mapping_counts():
    report = load_questions_with_report(UNANS / "coconot_eval.jsonl", "coconot")
    qs = report.questions
    counts = Counter(q.category for q in qs)
    assert counts == {"FP": 83, "UC": 94, "AU": 67 + 37}
    assert not any(q.answerable for q in qs)
    assert Counter(q.stratum for q in qs if q.category == "AU") == {
        "universal unknowns": 67, "temporal limitations": 37}
    assert report.records == 1001 and sum(report.skipped.values()) == 1001 - len(qs)
    assert "privacy violations" in report.skipped
    assert len(load_questions(UNANS / "coconot_eval.jsonl", categories=["FP"])) == 83


@needs_data
def test_coconot_contrast_is_answerable_without_gold():
    qs = load_questions(UNANS / "coconot_contrast_eval.jsonl", "coconot_contrast")
    assert len(qs) == 379
    assert all(q.answerable and q.gold_answers == [] and q.category is None for q in qs)
    assert qs[0].stratum == "dangerous or sensitive topics"


@needs_data
@pytest.mark.parametrize(("rel", "fmt"), [
    ("answerable/musique_hipporag_100.json", "musique"),
    ("answerable/hotpotqa_hipporag_100.json", "hotpotqa"),
    ("answerable/nq_open_dev.jsonl", "nq_open"),
    ("answerable/flashrag_nq_quickstart.jsonl", "flashrag"),
    ("answerable/r1searcher/musique_500.jsonl", "r1searcher"),
    ("answerable/r1searcher/hotpotqa_500.jsonl", "r1searcher"),
    ("answerable/r1searcher/bamboogle.jsonl", "r1searcher"),
    ("unanswerable/coconot_eval.jsonl", "coconot"),
    ("unanswerable/coconot_contrast_eval.jsonl", "coconot_contrast"),
])
def test_auto_detection_on_sample_files(rel, fmt):
    assert detect_format(DATA / rel) == fmt
    assert load_questions_with_report(DATA / rel, limit=2).fmt == fmt


@needs_data
def test_auto_detection_by_keys_when_renamed(tmp_path):
    for rel, fmt in [("answerable/musique_hipporag_100.json", "musique"),
                     ("answerable/hotpotqa_hipporag_100.json", "hotpotqa"),
                     ("answerable/nq_open_dev.jsonl", "nq_open"),
                     ("unanswerable/coconot_eval.jsonl", "coconot")]:
        src = DATA / rel
        dst = tmp_path / f"renamed{src.suffix}"
        dst.write_bytes(src.read_bytes())
        assert detect_format(dst) == fmt, rel


# ----------------------------------------------------------------------- demo and own format


def test_demo_set():
    qs = load_questions("demo")
    assert len({q.id for q in qs}) == len(qs)
    assert sum(q.answerable for q in qs) >= 30
    unans = Counter(q.category for q in qs if not q.answerable)
    assert sum(unans.values()) >= 30 and all(unans[c] >= 5 for c in ("AU", "FP", "UC"))
    assert load_questions_with_report("demo").fmt == "branchpoint"
    only = load_questions("demo", categories=["FP", "UC"], limit=5)
    assert len(only) == 5 and {q.category for q in only} <= {"FP", "UC"}
    assert [q.id for q in only] == [q.id for q in qs if q.category in ("FP", "UC")][:5]


def test_branchpoint_roundtrip_and_auto(tmp_path):
    rows = [bp("a"), bp("b", False, "FP"), "", bp("c", False, "AU")]
    p = write_jsonl(tmp_path / "mine.jsonl", rows)
    qs = load_questions(p)
    assert [q.id for q in qs] == ["a", "b", "c"] and isinstance(qs[0], Question)
    assert [q.id for q in load_questions(p, categories=["answerable"])] == ["a"]


# ----------------------------------------------------------------------- bad inputs


def test_malformed_line_names_file_and_line(tmp_path):
    p = write_jsonl(tmp_path / "questions.jsonl", [bp("a"), '{"id": "b", "question": '])
    with pytest.raises(InputError, match=r"questions\.jsonl line 2: invalid JSON"):
        load_questions(p, "branchpoint")


def test_missing_field_named(tmp_path):
    row = bp("b")
    del row["question"]
    p = write_jsonl(tmp_path / "questions.jsonl", [bp("a"), bp("x"), row])
    expected = r'questions\.jsonl line 3: field "question" missing \(expected \{"id", "question"'
    with pytest.raises(InputError, match=expected):
        load_questions(p)
    p = write_jsonl(tmp_path / "fr.jsonl", [{"id": "1", "question": "q?", "golden_answers": ["a"]},
                                            {"id": "2", "golden_answers": ["a"]}])
    with pytest.raises(InputError, match=r'fr\.jsonl line 2: field "question" missing'):
        load_questions(p, "flashrag")


def test_unknown_and_mistyped_fields(tmp_path):
    p = write_jsonl(tmp_path / "q.jsonl", [bp("a", colour="red")])
    with pytest.raises(InputError, match=r'line 1: field "colour" is not a Question field'):
        load_questions(p, "branchpoint")
    p = write_jsonl(tmp_path / "q.jsonl", [bp("a", False, "XX")])
    with pytest.raises(InputError, match=r'line 1: field "category"'):
        load_questions(p, "branchpoint")
    p = write_jsonl(tmp_path / "nq.jsonl", [{"question": "q?", "answer": [1, 2]}])
    expected = r'nq\.jsonl line 1: field "answer" expected a string or a list'
    with pytest.raises(InputError, match=expected):
        load_questions(p, "nq_open")


def test_duplicate_id(tmp_path):
    p = write_jsonl(tmp_path / "q.jsonl", [bp("a"), bp("b"), bp("a")])
    expected = r'q\.jsonl line 3: field "id": duplicate id "a" \(first seen at line 1\)'
    with pytest.raises(InputError, match=expected):
        load_questions(p, limit=1)  # checked even past the limit


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match=r"empty\.jsonl: no questions"):
        load_questions(tmp_path / "empty.jsonl", "branchpoint")
    with pytest.raises(InputError, match=r"empty\.jsonl: no questions"):
        load_questions(tmp_path / "empty.jsonl")
    (tmp_path / "musique.json").write_text("[]")
    with pytest.raises(InputError, match=r"musique\.json: no questions"):
        load_questions(tmp_path / "musique.json")
    with pytest.raises(InputError, match=r"nope\.jsonl: file not found"):
        load_questions(tmp_path / "nope.jsonl")


def test_wrong_top_level_and_items(tmp_path):
    (tmp_path / "musique.json").write_text('{"id": "x"}')
    with pytest.raises(InputError, match=r"musique\.json: expected a JSON list"):
        load_questions(tmp_path / "musique.json")
    (tmp_path / "musique.json").write_text('[{"id": "x", "question": "q?", "answer": "a"}]')
    with pytest.raises(InputError, match=r'musique\.json item \[0\]: field "paragraphs" missing'):
        load_questions(tmp_path / "musique.json")
    (tmp_path / "hotpot.json").write_text('[\n{"_id": "x",\n "question": ')
    with pytest.raises(InputError, match=r"hotpot\.json line 3: invalid JSON"):
        load_questions(tmp_path / "hotpot.json")
    p = write_jsonl(tmp_path / "fr.jsonl", ["[1, 2]"])
    with pytest.raises(InputError, match=r"fr\.jsonl line 1: expected a JSON object"):
        load_questions(p, "flashrag")


def test_unknown_format_and_undecidable(tmp_path):
    p = write_jsonl(tmp_path / "q.jsonl", [bp("a")])
    with pytest.raises(InputError, match=r'unknown question format "squad".*musique'):
        load_questions(p, "squad")
    p = write_jsonl(tmp_path / "odd.jsonl", [{"text": "hello"}])
    with pytest.raises(InputError, match=r"odd\.jsonl: cannot tell the question format.*pass fmt="):
        load_questions(p)
    with pytest.raises(InputError, match="categories"):
        load_questions("demo", categories=["unanswerable"])
    with pytest.raises(InputError, match="limit"):
        load_questions("demo", limit=0)


def test_coconot_all_out_of_scope_and_empty_filter(tmp_path):
    row = {"id": "1", "category": "c", "subcategory": "wildchats", "prompt": "hi", "response": ""}
    p = write_jsonl(tmp_path / "coconot_x.jsonl", [row])
    with pytest.raises(InputError, match=r"no questions in scope.*wildchats 1"):
        load_questions(p)
    p = write_jsonl(tmp_path / "q.jsonl", [bp("a")])
    with pytest.raises(InputError, match=r"no questions match categories \['FP'\].*answerable 1"):
        load_questions(p, categories=["FP"])


def test_formats_constant():
    assert set(QUESTION_FORMATS) == {"branchpoint", "musique", "hotpotqa", "nq_open", "flashrag",
                                     "r1searcher", "coconot", "coconot_contrast"}


# ----------------------------------------------------------------------- balanced_sample


def _pool() -> list[Question]:
    qs = [Question(id=f"a{i}", question="q?", answerable=True) for i in range(20)]
    for cat, n in (("AU", 10), ("FP", 10), ("UC", 3)):
        qs += [Question(id=f"{cat}{i}", question="q?", answerable=False, category=cat)
               for i in range(n)]
    return qs[::2] + qs[1::2]  # interleave the kinds a little


def test_balanced_sample_deterministic_and_ordered():
    qs = _pool()
    s1 = balanced_sample(qs, 5, 9, seed=3)
    assert [q.id for q in s1] == [q.id for q in balanced_sample(qs, 5, 9, seed=3)]
    assert [q.id for q in s1] != [q.id for q in balanced_sample(qs, 5, 9, seed=4)]
    index = {q.id: i for i, q in enumerate(qs)}
    assert [index[q.id] for q in s1] == sorted(index[q.id] for q in s1)
    assert sum(q.answerable for q in s1) == 5
    assert Counter(q.category for q in s1 if not q.answerable) == {"AU": 3, "FP": 3, "UC": 3}


def test_balanced_sample_spread_when_a_category_runs_out():
    s = balanced_sample(_pool(), 0, 13, seed=0)
    assert Counter(q.category for q in s) == {"AU": 5, "FP": 5, "UC": 3}
    s = balanced_sample(_pool(), 0, 7, seed=0)
    assert Counter(q.category for q in s) == {"AU": 3, "FP": 2, "UC": 2}
    with pytest.raises(InputError, match="unanswerable"):
        balanced_sample(_pool(), 0, 24, seed=0)
    with pytest.raises(InputError, match="answerable"):
        balanced_sample(_pool(), 21, 0, seed=0)


def test_balanced_sample_on_demo():
    qs = load_questions("demo")
    s = balanced_sample(qs, 12, 12, seed=7)
    assert sum(q.answerable for q in s) == 12
    assert Counter(q.category for q in s if not q.answerable) == {"AU": 4, "FP": 4, "UC": 4}
