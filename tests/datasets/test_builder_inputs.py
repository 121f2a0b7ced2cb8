"""Builder inputs: --min-similarity, several --unanswerable FILE[:CATEGORY], near-duplicate pairs
dropped, the pairing report figure; FreshQA split filter, FalseQA notes as a list, per-file
category overrides (SelfAware)."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.datasets import load_questions
from branchpoint.datasets.builder import (
    build_benchmark,
    build_benchmark_from_files,
    parse_file_category,
)
from branchpoint.datasets.formats.falseqa import falseqa_answers
from branchpoint.datasets.pairing_figure import write_pairing_figure
from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from tests.datasets.test_builder import BagOfWords
from tests.datasets.test_load import FRESHQA_ROWS, write_csv


def unans(qid, text, category="AU"):
    return Question(id=qid, question=text, answerable=False, category=category)


def ans(qid, text):
    return Question(id=qid, question=text, answerable=True, gold_answers=["x"])


def test_near_duplicates_are_dropped_and_min_similarity_applies():
    u = [
        unans("u1", "Who will win the 2090 football world cup final?"),
        unans("u2", "What colour is the dragon living in Paris?"),
    ]
    a = [
        ans("a1", "who will win the 2090 football world cup final"),  # the same question
        ans("a2", "Who won the 2018 football world cup final?"),
        ans("a3", "What colour is the Eiffel tower in Paris?"),
    ]
    result = build_benchmark(u, a, BagOfWords(), k=3)
    assert {p.unanswerable.id: p.answerable.id for p in result.pairs} == {"u1": "a2", "u2": "a3"}
    assert result.counts["near_duplicate_pairs"] == 1 and any("near-duplicates" in n for n in result.notes)
    with pytest.raises(InputError, match="at least 0.99 similar"):
        build_benchmark(u, a, BagOfWords(), k=3, min_similarity=0.99)
    floor = min(p.similarity for p in result.pairs) + 1e-6
    partial = build_benchmark([u[0]], a, BagOfWords(), k=3, min_similarity=0.0)
    assert partial.counts["below_min_similarity_pairs"] == 0
    assert build_benchmark(u, a, BagOfWords(), k=3, min_similarity=floor).counts["below_min_similarity_pairs"] >= 1


def test_several_unanswerable_files_with_category_overrides(tmp_path):
    selfaware = tmp_path / "SelfAware.json"
    selfaware.write_text(
        json.dumps(
            {
                "example": [
                    {
                        "question_id": 1,
                        "question": "What is the meaning of a dream about red bridges?",
                        "answer": None,
                        "answerable": False,
                        "source": "quora",
                    },
                    {
                        "question_id": 2,
                        "question": "What is the capital city of Peru?",
                        "answer": ["Lima"],
                        "answerable": True,
                        "source": "squad",
                    },
                ]
            }
        )
    )
    falseqa = write_csv(
        tmp_path / "falseqa_test.csv",
        [
            ["question", "answer", "label"],
            ["Why do red bridges sing at night?", "['Bridges do not sing.', 'They are not alive.']", 1],
        ],
    )
    answerable = tmp_path / "answers.jsonl"
    answerable.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"question": "What is the meaning of the red bridge in the film?", "answer": ["a symbol"]},
                {"question": "Why do red bridges rust quickly?", "answer": ["salt"]},
            ]
        )
    )
    assert parse_file_category(f"{selfaware}:uc") == (selfaware, "UC")
    with pytest.raises(InputError, match="unknown category 'XX'"):
        parse_file_category(f"{selfaware}:XX")
    result = build_benchmark_from_files(
        [f"{selfaware}:UC", str(falseqa)], answerable, encoder=BagOfWords(), k=2, length_tolerance=1.0
    )
    cats = {p.unanswerable.id: p.category for p in result.pairs}
    assert cats == {"selfaware-1": "UC", "falseqa-falseqa_test-2": "FP"}  # SelfAware's AU replaced by UC
    pair = next(p for p in result.pairs if p.category == "FP")
    assert pair.unanswerable.notes == ["Bridges do not sing.", "They are not alive."]
    assert pair.unanswerable.note == "Bridges do not sing."
    figure = write_pairing_figure(result, tmp_path / "pairs.png")
    assert figure.is_file() and figure.with_suffix(".svg").is_file()
    rows = list(csv.DictReader(figure.with_suffix(".csv").open()))
    assert (
        len(rows) == 2
        and {r["category"] for r in rows} == {"UC", "FP"}
        and all(float(r["length_ratio"]) > 0 for r in rows)
    )


def test_falseqa_answer_lists_and_freshqa_split(tmp_path):
    assert falseqa_answers("['A rock has no eyes.', \"It is not alive.\"]") == [
        "A rock has no eyes.",
        "It is not alive.",
    ]
    assert falseqa_answers("Plain text [with brackets].") == ["Plain text [with brackets]."]
    path = write_csv(tmp_path / "FreshQA_v1 - freshqa.csv", FRESHQA_ROWS)
    assert [q.id for q in load_questions(path, split="DEV")] == ["freshqa-2"]
    assert [q.id for q in load_questions(path, split="test")] == ["freshqa-0", "freshqa-1", "freshqa-3"]
    with pytest.raises(InputError, match="expected one of TEST, DEV"):
        load_questions(path, split="TRAIN")
    with pytest.raises(InputError, match="applies to FreshQA files only"):
        load_questions("demo", split="TEST")


def test_builder_command_writes_the_pairing_report(tmp_path):
    unanswerable = tmp_path / "u.jsonl"
    unanswerable.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"question": "Who will be the president of France in 2090?", "answerable": False, "category": "AU"},
                {"question": "Why is the moon made of cheese?", "answerable": False, "category": "FP"},
            ]
        )
    )
    answerable = tmp_path / "a.jsonl"
    answerable.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"question": "Who was the president of France in 1990?", "answer": ["Mitterrand"]},
                {"question": "Why is the moon grey in colour?", "answer": ["dust"]},
                {"question": "Who will be the president of France in 2090?", "answer": ["unknown"]},
            ]
        )
    )
    out = tmp_path / "bench.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "builder",
            "--unanswerable",
            f"{unanswerable}",
            "--answerable",
            str(answerable),
            "--out",
            str(out),
            "--k",
            "3",
            "--format-unanswerable",
            "generic",
            "--min-similarity",
            "0.1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "1 near-duplicate" in result.output
    for suffix in (".pairing.png", ".pairing.svg", ".pairing.csv"):
        assert out.with_suffix(suffix).is_file(), suffix
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert "Who will be the president of France in 2090?" not in [q["question"] for q in pairs if q["answerable"]]


def test_pairing_figure_has_a_tsne_view_of_both_halves(tmp_path):
    """The over-searching study's Figures 3b / 9: both sides' question embeddings on one t-SNE map,
    pairs joined; its coordinates go to the CSV. Seeded: two draws give the same map."""
    from branchpoint.datasets.builder import build_benchmark
    from tests.datasets.test_builder import ANSWERABLE, UNANSWERABLE

    result = build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords(), k=len(ANSWERABLE), length_tolerance=5.0)
    assert len(result.pairs) >= 5 and all(p.vectors is not None for p in result.pairs)
    figure = write_pairing_figure(result, tmp_path / "pairs.png")
    rows = list(csv.DictReader(figure.with_suffix(".csv").open()))
    assert len(rows) == len(result.pairs) and {"tsne_unanswerable_x", "tsne_answerable_y"} <= set(rows[0])
    again = list(csv.DictReader(write_pairing_figure(result, tmp_path / "again.png").with_suffix(".csv").open()))
    assert [r["tsne_answerable_x"] for r in again] == [r["tsne_answerable_x"] for r in rows]
    assert "vectors" not in result.pairs[0].to_json()
