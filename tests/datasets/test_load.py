"""Question-set loaders: every format on the shared sample files, auto detection, clear errors."""

from __future__ import annotations

import csv
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from branchpoint.datasets import (
    balanced_sample,
    detect_format,
    format_names,
    load_questions,
    load_questions_with_report,
)
from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError

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
    return {
        "id": i,
        "question": f"question {i}?",
        "answerable": answerable,
        "category": category,
        "gold_answers": ["x"] if answerable else [],
        **kw,
    }


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
        "universal unknowns": 67,
        "temporal limitations": 37,
    }
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
@pytest.mark.parametrize(
    ("rel", "fmt"),
    [
        ("answerable/musique_hipporag_100.json", "musique"),
        ("answerable/hotpotqa_hipporag_100.json", "hotpotqa"),
        ("answerable/nq_open_dev.jsonl", "nq_open"),
        ("answerable/flashrag_nq_quickstart.jsonl", "flashrag"),
        ("answerable/r1searcher/musique_500.jsonl", "r1searcher"),
        ("answerable/r1searcher/hotpotqa_500.jsonl", "r1searcher"),
        ("answerable/r1searcher/bamboogle.jsonl", "r1searcher"),
        ("unanswerable/coconot_eval.jsonl", "coconot"),
        ("unanswerable/coconot_contrast_eval.jsonl", "coconot_contrast"),
    ],
)
def test_auto_detection_on_sample_files(rel, fmt):
    assert detect_format(DATA / rel) == fmt
    assert load_questions_with_report(DATA / rel, limit=2).fmt == fmt


@needs_data
def test_auto_detection_by_keys_when_renamed(tmp_path):
    for rel, fmt in [
        ("answerable/musique_hipporag_100.json", "musique"),
        ("answerable/hotpotqa_hipporag_100.json", "hotpotqa"),
        ("answerable/nq_open_dev.jsonl", "nq_open"),
        ("unanswerable/coconot_eval.jsonl", "coconot"),
    ]:
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
    p = write_jsonl(
        tmp_path / "fr.jsonl",
        [{"id": "1", "question": "q?", "golden_answers": ["a"]}, {"id": "2", "golden_answers": ["a"]}],
    )
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


def test_builtin_formats_are_registered():
    assert set(format_names()) == {
        "branchpoint",
        "musique",
        "hotpotqa",
        "nq_open",
        "flashrag",
        "r1searcher",
        "coconot",
        "coconot_contrast",
        "falseqa",
        "selfaware",
        "freshqa",
        "generic",
    }


# ----------------------------------------------------------------------- balanced_sample


def _pool() -> list[Question]:
    qs = [Question(id=f"a{i}", question="q?", answerable=True) for i in range(20)]
    for cat, n in (("AU", 10), ("FP", 10), ("UC", 3)):
        qs += [Question(id=f"{cat}{i}", question="q?", answerable=False, category=cat) for i in range(n)]
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


# ----------------------------------------------------------------------- FalseQA, SelfAware,
# FreshQA and the generic format (small files in the upstream layouts, written here)


def write_csv(path: Path, rows: list[list]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return path


FALSEQA_ROWS = [
    ["question", "answer", "label"],
    ["How many eyes does a rock have?", "Rocks are not living things, so they have no eyes.", 1],
    [
        "What do plants need for photosynthesis?",
        "Plants need sunlight, water and carbon dioxide to photosynthesise.",
        0,
    ],
    [
        "Why do penguins fly south for the winter?",
        "Penguins cannot fly.\nThey swim, and most live in the Southern Hemisphere already.",
        1,
    ],
    ["Which planet is closest to the sun?", "Mercury is the planet closest to the sun.", 0],
]


def test_falseqa(tmp_path):
    p = write_csv(tmp_path / "test.csv", FALSEQA_ROWS)
    qs = load_questions(p, "falseqa")
    # ids follow each row's first line: the multi-line answer of line 4 pushes the next row to 6
    assert [q.id for q in qs] == ["falseqa-test-2", "falseqa-test-3", "falseqa-test-4", "falseqa-test-6"]
    fp, true_premise = qs[0], qs[1]
    assert not fp.answerable and fp.category == "FP" and fp.gold_answers == []
    assert fp.note == "Rocks are not living things, so they have no eyes."
    assert true_premise.answerable and true_premise.category is None
    assert true_premise.gold_answers == [] and true_premise.note.startswith("Plants need sunlight")
    assert qs[2].note.endswith("Southern Hemisphere already.")
    assert [q.id for q in load_questions(p, "falseqa", categories=["FP"])] == ["falseqa-test-2", "falseqa-test-4"]


def test_falseqa_errors(tmp_path):
    p = write_csv(tmp_path / "falseqa_dev.csv", [["question", "answer"], ["q?", "a"]])
    with pytest.raises(
        InputError,
        match=r'falseqa_dev\.csv line 1: column "label" missing from '
        r'the header \(expected columns \{"question", "answer", '
        r'"label"\}; found \{"question", "answer"\}\)',
    ):
        load_questions(p)  # auto: by name
    rows = [*FALSEQA_ROWS[:3], ["Why is the sky green?", "It is not.", "yes"]]
    p = write_csv(tmp_path / "test.csv", rows)
    with pytest.raises(
        InputError,
        match=r'test\.csv line 4: field "label" expected 0 \(true '
        r"premise\) or 1 \(false premise\), got 'yes'",
    ):
        load_questions(p, "falseqa")
    p = write_csv(tmp_path / "test.csv", [*FALSEQA_ROWS[:2], ["", "an answer", 1]])
    with pytest.raises(InputError, match=r'test\.csv line 3: field "question" expected a non-empty'):
        load_questions(p, "falseqa")
    p.write_text('question,answer,label\nWhy?,"Because, 1\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"test\.csv line \d: invalid CSV"):
        load_questions(p, "falseqa")
    p.write_text("question,answer,label\nWhy?,Because,1,extra,cells\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"test\.csv line 2: 5 cells but the header on line 1 has 3"):
        load_questions(p, "falseqa")
    p.write_text("prompt,answer,label\nWhy?,Because,1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r'test\.csv: no header row with a "question" column'):
        load_questions(p, "falseqa")


SELFAWARE = {
    "example": [
        {
            "question_id": 1,
            "question": "What is the capital city of Australia?",
            "answer": ["Canberra"],
            "answerable": True,
            "source": "SQuAD",
        },
        {
            "question_id": 2,
            "question": "What will the stock market do next year?",
            "answer": None,
            "answerable": False,
            "source": "quora",
        },
        {
            "question_id": 3,
            "question": "Who wrote the novel 'Pride and Prejudice'?",
            "answer": ["Jane Austen", "Austen"],
            "answerable": True,
            "source": "TriviaQA",
        },
        {
            "question_id": 4,
            "question": "Is there life after death?",
            "answer": None,
            "answerable": False,
            "source": "howstuffworks",
        },
    ]
}


def test_selfaware(tmp_path):
    p = tmp_path / "SelfAware.json"
    p.write_text(json.dumps(SELFAWARE, indent=2))
    assert detect_format(p) == "selfaware"
    qs = load_questions(p)
    assert [q.id for q in qs] == ["selfaware-1", "selfaware-2", "selfaware-3", "selfaware-4"]
    assert qs[0].answerable and qs[0].gold_answers == ["Canberra"] and qs[0].stratum == "SQuAD"
    assert qs[2].gold_answers == ["Jane Austen", "Austen"]
    assert not qs[1].answerable and qs[1].category == "AU" and qs[1].stratum == "quora"
    assert qs[1].gold_answers == [] and qs[1].note is None
    renamed = tmp_path / "unknowns.json"
    renamed.write_text(json.dumps(SELFAWARE))
    assert detect_format(renamed) == "selfaware"
    assert len(load_questions(renamed, categories=["AU"])) == 2


def test_selfaware_errors(tmp_path):
    p = tmp_path / "selfaware.json"
    p.write_text(json.dumps({"examples": []}))
    with pytest.raises(
        InputError,
        match=r'selfaware\.json: expected \{"example": \[question '
        r"objects\]\} at the top level, got an object with keys",
    ):
        load_questions(p)
    bad = json.loads(json.dumps(SELFAWARE))
    bad["example"][1]["answerable"] = "no"
    p.write_text(json.dumps(bad))
    with pytest.raises(
        InputError,
        match=r'selfaware\.json example\[1\]: field "answerable" '
        r"expected true or false, got 'no'",
    ):
        load_questions(p)
    del bad["example"][1]["answerable"]
    p.write_text(json.dumps(bad))
    with pytest.raises(
        InputError,
        match=r'example\[1\]: field "answerable" missing \(expected '
        r'\{"question_id", "question", "answer", "answerable"',
    ):
        load_questions(p)


FRESHQA_HEADER = [
    "id",
    "split",
    "question",
    "effective_year",
    "next_review",
    "false_premise",
    "num_hops",
    "fact_type",
    "source",
    *[f"answer_{i}" for i in range(10)],
    "note",
]


def freshqa_row(qid, split, question, false_premise, fact_type, *answers):
    answers = [*answers, *[""] * (10 - len(answers))]
    return [
        qid,
        split,
        question,
        "before 2022",
        "occasionally",
        false_premise,
        "one-hop",
        fact_type,
        "https://en.wikipedia.org/",
        *answers,
        "",
    ]


FRESHQA_ROWS = [
    ["FreshQA (last updated: 2024-12-18)", *[""] * (len(FRESHQA_HEADER) - 1)],
    ["Answers to fast-changing questions are reviewed weekly.", *[""] * (len(FRESHQA_HEADER) - 1)],
    FRESHQA_HEADER,
    freshqa_row(
        0,
        "TEST",
        "What is the name of the first animal to land on the moon?",
        "TRUE",
        "none-changing",
        "No animal has ever landed on the moon.",
    ),
    freshqa_row(1, "TEST", "What is the capital of Australia?", "FALSE", "never-changing", "Canberra"),
    freshqa_row(
        2,
        "DEV",
        "How many Grand Slam singles titles has Novak Djokovic won?",
        "FALSE",
        "slow-changing",
        "24",
        "twenty-four",
        "24",
    ),
    ["", *[""] * (len(FRESHQA_HEADER) - 1)],
    freshqa_row(
        3,
        "TEST",
        "Which company did Elon Musk found after leaving Apple?",
        "true",
        "never-changing",
        "Elon Musk never worked at Apple.",
    ),
]


def test_freshqa_skips_preamble(tmp_path):
    p = write_csv(tmp_path / "FreshQA_v12182024 - freshqa.csv", FRESHQA_ROWS)
    assert detect_format(p) == "freshqa"
    qs = load_questions(p)
    assert [q.id for q in qs] == ["freshqa-0", "freshqa-1", "freshqa-2", "freshqa-3"]
    fp = qs[0]
    assert not fp.answerable and fp.category == "FP" and fp.stratum == "none-changing"
    assert fp.note == "No animal has ever landed on the moon." and fp.gold_answers == []
    assert qs[1].answerable and qs[1].gold_answers == ["Canberra"]
    assert qs[1].stratum == "never-changing"
    assert qs[2].gold_answers == ["24", "twenty-four"] and qs[2].stratum == "slow-changing"
    assert qs[3].category == "FP"  # "true" in any case
    renamed = write_csv(tmp_path / "fresh_questions.csv", FRESHQA_ROWS)
    assert detect_format(renamed) == "freshqa"


def test_freshqa_errors(tmp_path):
    rows = [
        *FRESHQA_ROWS[:4],
        freshqa_row(1, "TEST", "Who is the UK prime minister?", "maybe", "fast-changing", "Keir Starmer"),
    ]
    p = write_csv(tmp_path / "freshqa.csv", rows)
    with pytest.raises(
        InputError,
        match=r'freshqa\.csv line 5: field "false_premise" expected '
        r"TRUE or FALSE, got 'maybe'",
    ):
        load_questions(p)
    rows = [*FRESHQA_ROWS[:4], freshqa_row(1, "TEST", "Who is the UK prime minister?", "FALSE", "fast-changing")]
    p = write_csv(tmp_path / "freshqa.csv", rows)
    with pytest.raises(
        InputError,
        match=r'line 5: field "answer_0" empty \(expected at least one '
        r"answer in answer_0\.\.answer_9",
    ):
        load_questions(p)
    header = [c for c in FRESHQA_HEADER if c != "fact_type"]
    p = write_csv(tmp_path / "freshqa.csv", [FRESHQA_ROWS[0], header, ["0"] * len(header)])
    with pytest.raises(
        InputError,
        match=r'freshqa\.csv line 2: column "fact_type" missing from '
        r"the header",
    ):
        load_questions(p)


def test_csv_undecidable(tmp_path):
    p = write_csv(tmp_path / "questions.csv", [["question", "reply"], ["q?", "a"]])
    with pytest.raises(
        InputError,
        match=r"questions\.csv: cannot tell the question format \(csv "
        r'header has columns \{"question", "reply"\}\)',
    ):
        load_questions(p)
    p = write_csv(tmp_path / "q.csv", FALSEQA_ROWS)
    assert detect_format(p) == "falseqa"


def test_generic(tmp_path, caplog):
    rows = [
        {
            "question": "Who painted the Mona Lisa?",
            "answerable": True,
            "gold_answers": "Leonardo da Vinci",
            "source_url": "https://example.org",
        },
        {
            "question": "What did Napoleon tweet before Waterloo?",
            "answerable": False,
            "category": "FP",
            "stratum": "history",
            "id": "fp-7",
        },
        "",
        {
            "question": "When will the next big earthquake hit?",
            "answerable": False,
            "support_group": "earthquakes",
            "note": "nobody knows",
        },
    ]
    p = write_jsonl(tmp_path / "mine.jsonl", rows)
    assert detect_format(p) == "generic"
    with caplog.at_level(logging.WARNING, logger="branchpoint.datasets.formats.generic"):
        qs = load_questions(p)
    assert [q.id for q in qs] == ["mine-1", "fp-7", "mine-4"]
    assert qs[0].gold_answers == ["Leonardo da Vinci"] and qs[0].category is None
    assert qs[1].category == "FP" and qs[1].stratum == "history"
    assert not qs[2].answerable and qs[2].category is None and qs[2].support_group == "earthquakes"
    assert '"source_url" (1 lines)' in caplog.text
    # a file of complete Question records is still ours
    assert detect_format(write_jsonl(tmp_path / "ours.jsonl", [bp("a")])) == "branchpoint"


def test_generic_errors(tmp_path):
    ok = {"question": "Who painted the Mona Lisa?", "answerable": True}
    cases = [
        ({"question": "q?", "answerable": "yes"}, r'field "answerable" expected true or false'),
        (
            {"question": "q?", "answerable": False, "category": "unknown"},
            r'field "category" expected "AU", "FP", "UC" or null',
        ),
        (
            {"question": "q?", "answerable": True, "category": "AU"},
            r'field "category" is \'AU\' but the question is answerable',
        ),
        ({"answerable": True}, r'field "question" missing \(expected \{"question", "answerable"\}\)'),
        ({"question": "q?"}, r'field "answerable" missing'),
        (
            {"question": "q?", "answerable": True, "gold_answers": [1]},
            r'field "gold_answers" expected a string or a list of strings',
        ),
        ({"question": "q?", "answerable": True, "stratum": 3}, r'field "stratum" expected a string'),
    ]
    for row, message in cases:
        p = write_jsonl(tmp_path / "mine.jsonl", [ok, row])
        with pytest.raises(InputError, match=r"mine\.jsonl line 2: " + message):
            load_questions(p, "generic")
    p = write_jsonl(tmp_path / "mine.jsonl", [ok, {**ok, "id": "mine-1"}])
    with pytest.raises(InputError, match=r'line 2: field "id": duplicate id "mine-1"'):
        load_questions(p, "generic")
