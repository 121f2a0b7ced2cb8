"""Negative-evidence augmentation: prompts, robust parsing, retries and skips, files, rank report."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.models.scripted import ScriptedModel
from branchpoint.retrieval import DenseIndex, DenseSource, Passage, load_corpus
from branchpoint.retrieval.negative_evidence.corpus import augment, read_generated
from branchpoint.retrieval.negative_evidence.documents import ANGLES, negative_doc_id
from branchpoint.retrieval.negative_evidence.generate import generate_negative_docs, select_questions
from branchpoint.retrieval.negative_evidence.prompts import parse_generated
from branchpoint.retrieval.negative_evidence.rank_report import rank_report
from branchpoint.traces import RetrievedDoc
from tests.retrieval.conftest import FakeEncoder


@dataclass
class Q:
    id: str
    question: str
    answerable: bool = False


QUESTIONS = [
    Q("u1", "What will the price of gold be on 1 March 2031?"),
    Q("u2", "How many people lived in Atlantis?"),
    Q("a1", "What is the capital of Australia?", answerable=True),
]
BODY = (
    "Reliable figures on this matter are not available from any authoritative source. Records "
    "that might settle it were either never kept or are not public, and the estimates that "
    "circulate rest on assumptions that cannot be checked, so the question cannot be answered "
    "with confidence from the available evidence."
)


def _asked(prompt: str) -> tuple[str, str]:
    """(question, angle) a chat or completion prompt asks for."""
    question = re.findall(r"Question: (.+)", prompt)[-1].strip()
    angle = re.search(r"Focus on this angle: ([^(]+) \(", prompt) or re.findall(r"Angle: (.+)", prompt)[-1:]
    return question, angle.group(1).strip() if isinstance(angle, re.Match) else angle[0].strip()


def good_reply(prompt: str) -> str:
    question, angle = _asked(prompt)
    return f"Title: {angle.capitalize()} and {question[:-1]}\n{BODY}"


def test_parse_generated_tolerates_common_shapes():
    assert parse_generated(f"Title: Gold prices\n{BODY}") == ("Gold prices", BODY)
    assert parse_generated(f'**Title:** "Gold prices"\n\n**Text:** {BODY}\n') == ("Gold prices", BODY)
    assert parse_generated(f"```\n# Title:\nGold prices\n{BODY}\n```") == ("Gold prices", BODY)
    title, text = parse_generated(f"Sure!\nTitle: Gold prices\n{BODY}\n\nQuestion: next one\nTitle: x")
    assert title == "Gold prices" and text == BODY
    long = parse_generated(f"Title: Long\n{BODY} {BODY} {BODY} {BODY}")
    assert long is not None and len(long[1].split()) <= 160 and long[1].endswith(".")
    for garbage in (
        "I cannot help with that.",
        f"{BODY}",
        "Title: Short\nToo few words here.",
        f"Title: {'word ' * 30}\n{BODY}",
        "Title:\n\n",
    ):
        assert parse_generated(garbage) is None, garbage


def test_select_questions_defaults_to_unanswerable():
    assert [q.id for q in select_questions(QUESTIONS)] == ["u1", "u2"]
    assert [q.id for q in select_questions(QUESTIONS, all_questions=True, limit=2)] == ["u1", "u2"]
    assert [q.id for q in select_questions(QUESTIONS, all_questions=True)] == ["u1", "u2", "a1"]


def test_generation_retries_a_garbage_reply_once_then_skips_and_counts():
    calls: dict[tuple[str, str], int] = {}

    def responder(prompt: str) -> str:
        key = _asked(prompt)
        calls[key] = calls.get(key, 0) + 1
        if key == (QUESTIONS[0].question, ANGLES[1].name):  # garbage once, fine when reminded
            return good_reply(prompt) if "could not be used" in prompt else "lol no"
        if key == (QUESTIONS[1].question, ANGLES[2].name):  # garbage every time
            return "I am unable to comply."
        return good_reply(prompt)

    model = ScriptedModel(responder=responder)
    docs, stats = generate_negative_docs(model, QUESTIONS[:2], n=3, style="chat")
    assert [d.doc_id for d in docs] == ["neg-u1-0", "neg-u1-1", "neg-u1-2", "neg-u2-0", "neg-u2-1"]
    assert (stats.requested, stats.generated, stats.retried, stats.skipped) == (6, 5, 2, 1)
    assert stats.skipped_ids == ["neg-u2-2"] and stats.model_calls == 8 == model.calls
    assert stats.input_tokens > 0 and stats.output_tokens > 0
    first = docs[0]
    assert first.angle == ANGLES[0].name and first.angle_index == 0 and first.question_id == "u1"
    assert first.title.startswith("Ambiguous or inconsistent information") and first.text == BODY
    assert "about 100 words" in model.prompts[0] and QUESTIONS[0].question in model.prompts[0]


def test_completion_style_prompt_ends_with_title_and_is_parsed():
    model = ScriptedModel(responder=lambda prompt: " " + good_reply(prompt).removeprefix("Title: "))
    docs, stats = generate_negative_docs(model, QUESTIONS[:1], n=2, style="completion")
    assert stats.generated == 2 and all(p.endswith("Title:") for p in model.prompts)
    assert model.requests[0]["stop"] == ["\nQuestion:", "\nAngle:"]
    assert docs[1].title.startswith("Data coverage gaps")
    with pytest.raises(InputError, match="between 1 and 10"):
        generate_negative_docs(model, QUESTIONS[:1], n=11)


def test_augment_writes_a_corpus_that_round_trips_and_resumes(tmp_path, facts):
    garbage_left = {"neg-u2-1"}

    def responder(prompt: str) -> str:
        question, angle = _asked(prompt)
        key = f"neg-{'u1' if question == QUESTIONS[0].question else 'u2'}-{[a.name for a in ANGLES].index(angle)}"
        return "nope" if key in garbage_left else good_reply(prompt)

    out = tmp_path / "aug"
    result = augment(ScriptedModel(responder=responder), QUESTIONS[:2], facts, out, n=2)
    assert result.stats.skipped == 1 and len(result.docs) == 3
    passages = load_corpus(out / "corpus.jsonl")
    assert [p.doc_id for p in passages] == [p.doc_id for p in facts] + ["neg-u1-0", "neg-u1-1", "neg-u2-0"]
    assert passages[: len(facts)] == facts
    generated = {p.doc_id: p for p in passages[len(facts) :]}
    for doc in result.docs:
        assert generated[doc.doc_id] == Passage(doc_id=doc.doc_id, title=doc.title, text=doc.text)
    rows = [json.loads(line) for line in (out / "generated.jsonl").read_text().splitlines()]
    assert rows[0] == {
        "id": "neg-u1-0",
        "question_id": "u1",
        "question": QUESTIONS[0].question,
        "angle_index": 0,
        "angle": ANGLES[0].name,
        "title": result.docs[0].title,
        "text": BODY,
    }

    garbage_left.clear()  # a rerun generates only the skipped document
    again = ScriptedModel(responder=responder)
    result = augment(again, QUESTIONS[:2], facts, out, n=2)
    assert again.calls == 1 and (result.stats.reused, result.stats.generated) == (3, 1)
    assert sorted(read_generated(out / "generated.jsonl")) == ["neg-u1-0", "neg-u1-1", "neg-u2-0", "neg-u2-1"]
    assert len(load_corpus(out / "corpus.jsonl")) == len(facts) + 4


def test_augment_refuses_ids_already_in_the_corpus(tmp_path, facts):
    clash = [*facts, Passage(doc_id=negative_doc_id("u1", 0), title="t", text="x")]
    with pytest.raises(InputError, match="augmented before"):
        augment(ScriptedModel(responder=good_reply), QUESTIONS[:1], clash, tmp_path, n=1)


class FixedSource:
    """Returns a fixed ranking per query."""

    name = "fixed"

    def __init__(self, rankings: dict[str, list[str]]) -> None:
        self.rankings = rankings

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        return [RetrievedDoc(doc_id=d, score=1.0 / r, text="") for r, d in enumerate(self.rankings[query][:k], 1)]


def test_rank_report_counts_ranks_hits_and_other_questions_docs():
    source = FixedSource(
        {
            QUESTIONS[0].question: ["f0", "neg-u1-1", "neg-u2-0", "neg-u1-0"],
            QUESTIONS[1].question: ["f1", "f2", "f3", "neg-u2-1"],
        }
    )
    ids = {"u1": ["neg-u1-0", "neg-u1-1"], "u2": ["neg-u2-0", "neg-u2-1"]}
    report = rank_report(source, QUESTIONS, ids, k=3)
    assert (report.questions, report.generated, report.hit_questions) == (2, 4, 1)
    assert (report.own_in_topk, report.other_in_topk, report.slots) == (1, 1, 6)
    assert report.rank_counts == {1: 0, 2: 1, 3: 0}
    assert report.best_rank_counts == {"1": 0, "2": 1, "3": 0, "miss": 1}
    assert report.hit_rate == 0.5 and report.share_of_topk == pytest.approx(1 / 6)
    flat = rank_report(source, QUESTIONS, [i for v in ids.values() for i in v], k=4)
    assert flat.own_in_topk == 3 and flat.per_question[0]["ranks"] == [2, 4]
    assert json.loads(json.dumps(flat.to_dict()))["hit_rate"] == 1.0


def test_rank_report_on_a_tiny_dense_index(facts):
    negatives = [
        Passage(
            doc_id="neg-u2-0",
            title="Population of Atlantis",
            text="How many people lived in Atlantis is unknown: Atlantis is a legend, no census exists.",
        ),
        Passage(doc_id="neg-u2-1", title="Volcanoes", text="Volcanic eruptions leave ash layers in sediments."),
    ]
    encoder = FakeEncoder()
    source = DenseSource("aug", DenseIndex.build([*facts, *negatives], encoder), encoder)
    report = rank_report(source, QUESTIONS, {"u2": ["neg-u2-0", "neg-u2-1"]}, k=2)
    assert report.questions == 1 and report.per_question[0]["ranks"] == [1]
    assert report.best_rank_counts["1"] == 1 and report.generated - report.own_in_topk == 1


def test_augment_command_with_a_scripted_model(tmp_path, monkeypatch, facts):
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n" for p in facts[:3]))
    spec = tmp_path / "model.yaml"
    spec.write_text(yaml.safe_dump({"model": {"provider": "scripted", "script": [f"Title: Unknowable\n{BODY}"]}}))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "augment",
            "--questions",
            "demo",
            "--corpus",
            str(corpus),
            "--out",
            str(out),
            "--n",
            "2",
            "--limit",
            "2",
            "--model-spec",
            str(spec),
            "--style",
            "chat",
            "--report-k",
            "3",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "2 unanswerable questions × 2 angles" in result.output and "4 generated" in result.output
    assert "4 checked against their question's known facts (4 unclear verdicts, kept); dropped: none" in result.output
    assert "Rank distribution" in result.output
    passages = load_corpus(out / "corpus.jsonl")
    assert len(passages) == 3 + 4 and all(p.doc_id.startswith("neg-demo-u") for p in passages[3:])
    report = json.loads((out / "rank_report.json").read_text())
    assert report["questions"] == 2 and report["k"] == 3
    bad = CliRunner().invoke(
        app, ["augment", "--questions", "demo", "--corpus", str(corpus), "--out", str(out), "--provider", "nonsense"]
    )
    assert bad.exit_code == 2 and "provider" in bad.output


# --- checks: no copy of the prompt's example, no contradiction of the known facts ------------


@dataclass
class NotedQ:
    id: str
    question: str
    note: str | None = None
    gold_answers: tuple[str, ...] = ()
    answerable: bool = False


def test_a_copy_of_the_prompts_example_is_retried_then_dropped():
    from branchpoint.retrieval.negative_evidence.checks import COPIES_EXAMPLE, copied_share
    from branchpoint.retrieval.negative_evidence.prompts import EXAMPLE_TEXTS

    copy = "Title: Attendance at the event\n" + EXAMPLE_TEXTS[0]
    assert copied_share(EXAMPLE_TEXTS[0]) == 1.0 and copied_share(BODY) < 0.05
    calls = []

    def responder(prompt: str) -> str:
        calls.append(prompt)
        return copy

    docs, stats = generate_negative_docs(
        ScriptedModel(responder=responder), QUESTIONS[:1], n=1, style="completion", fact_check=False
    )
    assert docs == [] and len(calls) == 2  # the copy, the retry's copy
    assert stats.dropped == {COPIES_EXAMPLE: [negative_doc_id("u1", 0)]} and stats.skipped == 0


def test_a_document_contradicting_its_questions_known_facts_is_dropped():
    from branchpoint.retrieval.negative_evidence.checks import CONTRADICTS_FACTS

    questions = [
        NotedQ("fp", "Why is Sydney the capital of Australia?", note="Sydney is not the capital; Canberra is."),
        NotedQ("au", "How many people lived in Atlantis?", note="Atlantis is a legend."),
        NotedQ("none", "What will the price of gold be on 1 March 2031?"),  # nothing known: no check
    ]
    checks = []

    def responder(prompt: str) -> str:
        if "Known facts" in prompt:
            checks.append(prompt)
            return "CONTRADICTS" if "Sydney" in prompt else "CONSISTENT"
        return good_reply(prompt)

    docs, stats = generate_negative_docs(ScriptedModel(responder=responder), questions, n=1)
    assert [d.question_id for d in docs] == ["au", "none"]
    assert stats.dropped == {CONTRADICTS_FACTS: [negative_doc_id("fp", 0)]}
    assert stats.fact_checked == 2 and len(checks) == 2 and "Canberra is." in checks[0]
    kept, unchecked = generate_negative_docs(ScriptedModel(responder=responder), questions, n=1, fact_check=False)
    assert len(kept) == 3 and unchecked.fact_checked == 0 and unchecked.dropped == {}
