"""Benchmark builder: similarity + length matching, no reuse, category balance, summaries, CLI."""

from __future__ import annotations

import json
import re
import statistics
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from branchpoint.datasets import load_questions
from branchpoint.datasets.builder import (
    build_benchmark,
    build_benchmark_from_files,
    word_count,
    write_benchmark,
)
from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")

STOPWORDS = {
    "what",
    "is",
    "the",
    "a",
    "of",
    "in",
    "who",
    "when",
    "why",
    "how",
    "did",
    "was",
    "will",
    "be",
    "to",
    "on",
    "does",
    "are",
    "there",
    "for",
}


class BagOfWords:
    """A tiny deterministic encoder: hashed counts of the non-stopword words (not normalised)."""

    dim = 4096

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                if word not in STOPWORDS:
                    out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out


def unans(qid: str, category: str | None, text: str) -> Question:
    return Question(id=qid, question=text, answerable=False, category=category)


def ans(qid: str, text: str, gold: list[str] | None = None) -> Question:
    return Question(id=qid, question=text, answerable=True, gold_answers=gold or ["x"])


UNANSWERABLE = [
    unans("au1", "AU", "What will the weather be in Oslo on 3 March 2091?"),
    unans("au2", "AU", "Who will win the chess olympiad in 2090?"),
    unans("au3", "AU", "How many volcanoes will erupt in Iceland next century?"),
    unans("fp1", "FP", "Why did Einstein win the Nobel Prize for relativity?"),
    unans("fp2", "FP", "When did the Eiffel Tower move to London?"),
    unans("uc1", "UC", "How tall is the lighthouse?"),
    unans("uc2", "UC", "When does the ferry leave?"),
]
ANSWERABLE = [
    ans("a-oslo", "What is the weather usually like in Oslo in March?"),
    ans("a-chess", "Who won the chess olympiad in 2018?"),
    ans("a-iceland", "How many volcanoes are there in Iceland?"),
    ans("a-einstein", "Why did Einstein win the Nobel Prize in physics?"),
    ans("a-eiffel", "When was the Eiffel Tower built?"),
    # the most similar to uc1 by words, but more than 1.5 times as long
    ans("a-lighthouse-long", "How tall is the lighthouse that stands at the northern tip of the island of Gotland?"),
    ans("a-lighthouse", "How old is the Alexandria lighthouse?"),
    ans("a-ferry", "When does the Dover ferry leave?"),
    ans("a-water", "What is the boiling point of water at sea level?"),
]
EXPECTED = {
    "au1": "a-oslo",
    "au2": "a-chess",
    "au3": "a-iceland",
    "fp1": "a-einstein",
    "fp2": "a-eiffel",
    "uc1": "a-lighthouse",
    "uc2": "a-ferry",
}


def pairing(result) -> dict[str, str]:
    return {p.unanswerable.id: p.answerable.id for p in result.pairs}


def test_obvious_pairs_length_filter_and_balance():
    encoder = BagOfWords()
    result = build_benchmark(UNANSWERABLE, ANSWERABLE, encoder, k=30)
    assert len(encoder.encoded) == len(UNANSWERABLE) + len(ANSWERABLE)
    # AU has 3 matches, FP and UC 2: two pairs per category, the rest as expected
    assert result.per_category == {"AU": 2, "FP": 2, "UC": 2}
    assert Counter(p.unanswerable.category for p in result.pairs) == {"AU": 2, "FP": 2, "UC": 2}
    assert all(EXPECTED[u] == a for u, a in pairing(result).items())
    assert result.counts == {
        "unanswerable": 7,
        "answerable": 9,
        "no_candidate": 0,
        "taken": 0,
        "matched": 7,
        "selected": 6,
        "near_duplicate_pairs": 0,
        "below_min_similarity_pairs": 0,
    }
    # questions: each unanswerable followed by its match, in the unanswerable input order
    ids = [q.id for q in result.questions]
    assert ids[1::2] == [EXPECTED[u] for u in ids[::2]]
    order = [q.id for q in UNANSWERABLE]
    assert [order.index(u) for u in ids[::2]] == sorted(order.index(u) for u in ids[::2])

    # a generous tolerance lets the long near-duplicate win uc1
    loose = build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords(), length_tolerance=5.0)
    assert pairing(loose)["uc1"] == "a-lighthouse-long"


def test_k_limits_candidates():
    # k=1: uc1's single most similar candidate is too long, so uc1 goes unmatched and UC
    # has one pair only
    result = build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords(), k=1)
    assert result.counts["no_candidate"] == 1 and "uc1" not in pairing(result)
    assert result.per_category == {"AU": 1, "FP": 1, "UC": 1}
    assert any("1 unanswerable questions had no answerable question" in n for n in result.notes)


def test_greedy_without_reuse():
    unanswerable = [
        unans("u-mars-2100", "AU", "Who will be president of Mars in 2100?"),
        unans("u-mars-first", "AU", "Who will be the first president of Mars?"),
    ]
    answerable = [
        ans("a-first-mars", "Who was the first president of Mars Society?"),
        ans("a-kenya", "Who was president of Kenya in 2010?"),
    ]
    enc = BagOfWords()
    result = build_benchmark(unanswerable, answerable, enc)
    # both are closest to a-first-mars; the closer pair takes it, the other gets the next best
    assert pairing(result) == {"u-mars-first": "a-first-mars", "u-mars-2100": "a-kenya"}
    sims = {p.unanswerable.id: p.similarity for p in result.pairs}
    assert sims["u-mars-first"] > sims["u-mars-2100"]
    # with one candidate each, the loser is left unmatched ("taken")
    result = build_benchmark(unanswerable, answerable, BagOfWords(), k=1)
    assert pairing(result) == {"u-mars-first": "a-first-mars"}
    assert result.counts["taken"] == 1 and result.counts["matched"] == 1


def test_per_category_and_seed():
    a = build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords(), per_category=1, seed=3)
    b = build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords(), per_category=1, seed=3)
    assert [q.id for q in a.questions] == [q.id for q in b.questions]
    assert a.per_category == {"AU": 1, "FP": 1, "UC": 1} and len(a.questions) == 6
    picks = {
        tuple(sorted(pairing(build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords(), per_category=1, seed=s))))
        for s in range(8)
    }
    assert len(picks) > 1  # the seed decides which pairs a category keeps
    capped = build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords(), per_category=50)
    assert capped.per_category == {"AU": 2, "FP": 2, "UC": 2}
    assert any("per_category 50 is more than the smallest category" in n for n in capped.notes)


def test_summaries():
    result = build_benchmark(UNANSWERABLE, ANSWERABLE, BagOfWords())
    u_words = [word_count(p.unanswerable.question) for p in result.pairs]
    a_words = [word_count(p.answerable.question) for p in result.pairs]
    assert result.lengths["unanswerable"] == pytest.approx(
        {"mean": statistics.fmean(u_words), "median": statistics.median(u_words)}
    )
    assert result.lengths["answerable"] == pytest.approx(
        {"mean": statistics.fmean(a_words), "median": statistics.median(a_words)}
    )
    sims = [p.similarity for p in result.pairs]
    assert result.similarity == pytest.approx(
        {
            "mean": np.mean(sims),
            "median": np.median(sims),
            "p10": np.percentile(sims, 10),
            "p90": np.percentile(sims, 90),
        }
    )
    assert 0 < result.similarity["p10"] <= result.similarity["median"] <= result.similarity["p90"] <= 1
    summary = result.summary()
    assert json.loads(json.dumps(summary)) == summary
    assert summary["settings"] == {
        "k": 30,
        "length_tolerance": 0.5,
        "per_category": None,
        "seed": 0,
        "min_similarity": None,
        "near_duplicate": 0.98,
    }


def test_notes_missing_gold_and_uncategorised_group():
    unanswerable = [
        unans("u1", None, "What will the weather be in Oslo on 3 March 2091?"),
        unans("u2", "FP", "Why did Einstein win the Nobel Prize for relativity?"),
    ]
    answerable = [
        Question(id="a1", question="What is the weather usually like in Oslo in March?", answerable=True),
        ans("a2", "Why did Einstein win the Nobel Prize in physics?"),
    ]
    result = build_benchmark(unanswerable, answerable, BagOfWords())
    assert result.per_category == {"FP": 1, "none": 1}
    assert any("1 selected answerable questions have no gold answers" in n for n in result.notes)


def test_errors():
    enc = BagOfWords()
    with pytest.raises(InputError, match=r"no UC question found a match \(matched: AU 3, FP 2\)"):
        build_benchmark(UNANSWERABLE, [q for q in ANSWERABLE if "lighthouse" not in q.id and q.id != "a-ferry"], enc)
    with pytest.raises(InputError, match=r'unanswerable: question "a-oslo" is answerable'):
        build_benchmark([*UNANSWERABLE, ANSWERABLE[0]], ANSWERABLE, enc)
    with pytest.raises(InputError, match=r'answerable: question "au1" is unanswerable'):
        build_benchmark(UNANSWERABLE, [*ANSWERABLE, UNANSWERABLE[0]], enc)
    with pytest.raises(
        InputError,
        match=r'answerable: duplicate id "au1" \(also among the '
        r"unanswerable questions\)",
    ):
        build_benchmark(UNANSWERABLE, [*ANSWERABLE, ans("au1", "Who?")], enc)
    with pytest.raises(InputError, match=r"k: expected a positive integer, got 0"):
        build_benchmark(UNANSWERABLE, ANSWERABLE, enc, k=0)
    with pytest.raises(InputError, match=r"length_tolerance: expected a non-negative number"):
        build_benchmark(UNANSWERABLE, ANSWERABLE, enc, length_tolerance=-1)
    with pytest.raises(InputError, match=r"per_category: expected a positive integer"):
        build_benchmark(UNANSWERABLE, ANSWERABLE, enc, per_category=0)
    with pytest.raises(InputError, match=r"unanswerable: no questions"):
        build_benchmark([], ANSWERABLE, enc)
    with pytest.raises(InputError, match=r"no unanswerable question has an answerable question"):
        build_benchmark(
            UNANSWERABLE, [ans("a-water", "What is the boiling point of water?")], enc, length_tolerance=0.0, k=1
        )

    class Broken:
        def encode(self, texts):
            return np.zeros((len(texts) + 1, 3))

    with pytest.raises(
        InputError,
        match=r"encoder returned an array of shape \(8, 3\) for 7 "
        r"unanswerable questions",
    ):
        build_benchmark(UNANSWERABLE, ANSWERABLE, Broken())


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def question_files(tmp_path: Path) -> tuple[Path, Path]:
    """The test set as a generic-format unanswerable file and an nq_open-style answerable file,
    each with a question of the other kind that the builder must ignore."""
    unanswerable = write_jsonl(
        tmp_path / "unknowns.jsonl",
        [
            *({"id": q.id, "question": q.question, "answerable": False, "category": q.category} for q in UNANSWERABLE),
            {"question": "Who painted the Mona Lisa?", "answerable": True},
        ],
    )
    answerable = write_jsonl(
        tmp_path / "nq_open_mine.jsonl", [{"question": q.question, "answer": ["x"]} for q in ANSWERABLE]
    )
    return unanswerable, answerable


def test_files_roundtrip(tmp_path):
    u_path, a_path = question_files(tmp_path)
    result = build_benchmark_from_files(u_path, a_path, unanswerable_format="generic", encoder=BagOfWords())
    assert result.per_category == {"AU": 2, "FP": 2, "UC": 2}
    assert {a for a in pairing(result).values()} <= {f"nq-{i}" for i in range(1, 10)}
    out, pairs = tmp_path / "bench" / "questions.jsonl", tmp_path / "pairs.jsonl"
    write_benchmark(out, result, pairs)
    back = load_questions(out)  # auto: our format
    assert back == result.questions
    lines = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert [(r["unanswerable_id"], r["answerable_id"]) for r in lines] == list(pairing(result).items())
    assert not list(out.parent.glob(".*tmp*"))
    with pytest.raises(InputError, match=r"nq_open_mine\.jsonl: no unanswerable questions"):
        build_benchmark_from_files(a_path, a_path, encoder=BagOfWords())


runner = CliRunner()


@pytest.fixture()
def fake_encoder(monkeypatch):
    from branchpoint.registry import REGISTRY

    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))  # registered for this test only
    REGISTRY.add("encoder", "bow", lambda settings=None: BagOfWords())


def test_cli(tmp_path, fake_encoder):
    from branchpoint.cli import app

    u_path, a_path = question_files(tmp_path)
    out = tmp_path / "questions.jsonl"
    args = [
        "builder",
        "--unanswerable",
        str(u_path),
        "--answerable",
        str(a_path),
        "--encoder",
        "bow",
        "--out",
        str(out),
        "--format-unanswerable",
        "generic",
        "--per-category",
        "5",
        "--seed",
        "1",
        "--pairs",
        str(tmp_path / "p.jsonl"),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    for text in (
        "7 unanswerable, 9 answerable candidates: 7 matched",
        "6 pairs selected",
        "Per category",
        "Question length",
        "Similarity of matched pairs",
        "per_category 5 is more than",
        "wrote 12 questions",
    ):
        assert text in result.output, text
    assert len(load_questions(out)) == 12 and (tmp_path / "p.jsonl").is_file()

    result = runner.invoke(
        app,
        [
            "builder",
            "--unanswerable",
            str(tmp_path / "nope.jsonl"),
            "--answerable",
            str(a_path),
            "--out",
            str(tmp_path / "x.jsonl"),
        ],
    )
    assert result.exit_code == 2 and "nope.jsonl: file not found" in result.output
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.skipif(not DATA.is_dir(), reason=f"shared sample data not found at {DATA}")
def test_real_encoder_on_coconot_and_nq():
    pytest.importorskip("onnxruntime")
    from branchpoint.retrieval import MissingPackageError, get_encoder

    try:
        encoder = get_encoder("minilm-onnx")
    except MissingPackageError as exc:
        pytest.skip(str(exc))
    coconot = DATA / "unanswerable" / "coconot_eval.jsonl"
    unanswerable = [q for cat in ("AU", "FP", "UC") for q in load_questions(coconot, categories=[cat], limit=5)]
    answerable = load_questions(DATA / "answerable" / "nq_open_dev.jsonl", limit=60)
    seen: list[np.ndarray] = []

    class Recording:  # keeps the vectors, so the chance baseline below costs no second encoding
        def encode(self, texts):
            seen.append(encoder.encode(texts))
            return seen[-1]

    result = build_benchmark(unanswerable, answerable, Recording(), per_category=3, seed=0)
    assert result.per_category == {"AU": 3, "FP": 3, "UC": 3} and len(result.questions) == 18
    for p in result.pairs:
        u, a = word_count(p.unanswerable.question), word_count(p.answerable.question)
        assert 0.5 * u <= a <= 1.5 * u
        assert -1.0 <= p.similarity <= 1.0
    # matching by similarity beats chance: the selected pairs are closer than random pairs
    u, a = seen
    assert result.similarity["mean"] > float((u @ a.T).mean())
    assert len({p.answerable.id for p in result.pairs}) == 9
