"""LLM judges: reply parsing on recorded judge outputs (garbage included), retries, UNPARSEABLE,
the judgment cache, and one pass through the real OpenAI-compatible client over loopback HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from branchpoint.evaluation import (
    ABSTENTION_PROMPT_V1,
    ANSWER_PROMPT_V1,
    EVIDENCE_PROMPT_V1,
    JudgeCache,
    JudgeRun,
    LLMJudge,
    build_judge,
    compute_metrics,
    judge_records,
    parse_label,
)
from branchpoint.evaluation.judges import ABSTENTION_LABELS, ANSWER_LABELS, EVIDENCE_LABELS
from branchpoint.evaluation.llm_judge_prompts import RETRY_MESSAGE, JudgePrompt
from branchpoint.models import ScriptedModel
from branchpoint.traces import RetrievedDoc, Step
from tests.evaluation.builders import make_record
from tests.evaluation.fake_openai import CHAT, chat_body, fake_openai

# Replies recorded from judge models (Qwen3-8B, Llama-3.1-8B, gpt-oss-20b under vLLM), plus garbage.
RECORDED_ANSWER_REPLIES = [
    ("The response names Canberra, which matches the gold answer.\nLABEL: CORRECT", "CORRECT"),
    ("The response says Sydney, contradicting the gold answer Canberra.\n\nLABEL: INCORRECT", "INCORRECT"),
    ("It says it does not know.\n**LABEL:** NOT ATTEMPTED", "NOT_ATTEMPTED"),
    ("Hedged but contains the gold answer.\nlabel = correct.", "CORRECT"),
    ("<think>The gold is 1927; the response says 1927... maybe CORRECT</think>\nLABEL: CORRECT", "CORRECT"),
    ("<think>Let me compare. The response says 1906 but", None),  # cut off inside the reasoning
    ("CORRECT", "CORRECT"),
    ("`NOT_ATTEMPTED`", "NOT_ATTEMPTED"),
    ("LABEL: CORRECT\nWait, the year differs.\nLABEL: INCORRECT", "INCORRECT"),  # the last one wins
    ("LABEL: CORRECT / INCORRECT / NOT_ATTEMPTED", None),  # the format echoed back
    ("LABEL: CORRECT or INCORRECT", None),
    ("I think the answer is correct.", None),
    ("LABEL: MAYBE", None),
    ("", None),
    ("\ufffd\ufffd\x00<|im_end|>", None),
    ('{"label": "CORRECT"}', None),
]


@pytest.mark.parametrize(("reply", "label"), RECORDED_ANSWER_REPLIES)
def test_parse_answer_replies(reply, label):
    assert parse_label(reply, ANSWER_LABELS) == label


@pytest.mark.parametrize(
    ("reply", "labels", "label"),
    [
        ("The response asks which Springfield is meant.\nLABEL: ABSTAINED", ABSTENTION_LABELS, "ABSTAINED"),
        ("> Label: Answered", ABSTENTION_LABELS, "ANSWERED"),
        ("ANSWERED.", ABSTENTION_LABELS, "ANSWERED"),
        ("LABEL: CORRECT", ABSTENTION_LABELS, None),  # a label of another kind
        ("The document says the date is unrecorded.\nLABEL: NEGATIVE", EVIDENCE_LABELS, "NEGATIVE"),
        ("### LABEL: POSITIVE", EVIDENCE_LABELS, "POSITIVE"),
        ("LABEL: POSITIVE and NEGATIVE", EVIDENCE_LABELS, None),
    ],
)
def test_parse_other_kinds(reply, labels, label):
    assert parse_label(reply, labels) == label


def test_prompts_are_versioned_and_state_the_format():
    for prompt in (ANSWER_PROMPT_V1, ABSTENTION_PROMPT_V1, EVIDENCE_PROMPT_V1):
        assert prompt.version.endswith("-v1")
        for label in prompt.labels:
            assert f"LABEL: {label}" in prompt.template
    text = ABSTENTION_PROMPT_V1.render({"question": "Q?", "scenario": "s", "response": "r"})
    for scenario in ("clarification", "several readings", "premise", "searching"):
        assert scenario in text
    assert "NOT abstaining" in text


# --------------------------------------------------------------------------------------------


def searched_record(qid: str, docs: list[tuple[str, str]], **kw) -> object:
    retrieved = [RetrievedDoc(doc_id=d, score=1.0, text=t) for d, t in docs]
    steps = [Step(kind="decide"), Step(kind="search", query="q", retrieved=retrieved), Step(kind="decide")]
    return make_record(qid, answerable=False, category="AU", steps=steps, search_calls=1, **kw)


def responder(prompt: str) -> str:
    """A judge that answers by what the prompt asks about."""
    if "Gold answers" in prompt:
        return "It matches.\nLABEL: CORRECT" if "Response: Rome" in prompt else "LABEL: INCORRECT"
    if "Why it cannot be answered" in prompt:
        return "LABEL: ABSTAINED" if "know" in prompt else "LABEL: ANSWERED"
    return "LABEL: NEGATIVE" if "Document: Its date is unrecorded" in prompt else "LABEL: POSITIVE"


def test_llm_judge_labels_each_kind_with_provenance():
    model = ScriptedModel(responder=responder, name="judge-m")
    records = [
        make_record("a1", gold=["Rome"], answer="Rome"),
        make_record("a2", gold=["Rome"], answer="Milan"),
        searched_record(
            "u1", [("d1", "Its date is unrecorded."), ("d2", "It was built in 1900.")], answer="I don't know"
        ),
    ]
    judge = LLMJudge(model, concurrency=2)
    a1, a2, u1 = judge_records(records, judge)
    mine = lambda r: [(j.kind, j.label, getattr(j, "doc_id", None)) for j in r.judgments if j.judge == "llm:judge-m"]
    assert mine(a1) == [("answer", "CORRECT", None)]
    assert mine(a2) == [("answer", "INCORRECT", None)]
    assert mine(u1) == [
        ("abstention", "ABSTAINED", None),
        ("evidence", "NEGATIVE", "d1"),
        ("evidence", "POSITIVE", "d2"),
    ]
    j = a1.judgments[-1]
    assert (j.model, j.prompt_version, j.raw) == ("judge-m", "answer-v1", "It matches.\nLABEL: CORRECT")
    assert model.calls == 5 and judge.stats.calls == 5


def test_fixed_outcomes_make_no_call():
    model = ScriptedModel(["LABEL: CORRECT"], name="m")
    records = [
        make_record("b", gold=["Rome"], answer="Rome", status="malformed"),
        make_record("e", gold=["Rome"], answer="  "),
        make_record("u", answerable=False, category="FP", answer=None),
        make_record("i", gold=["Rome"], answer=None, status="incomplete"),
        make_record("n", gold=[], answer="Rome"),
    ]
    out = LLMJudge(model).judge_many(records)
    assert [[(j.kind, j.label, j.raw) for j in js] for js in out] == [
        [("answer", "INCORRECT", "status=malformed")],
        [("answer", "NOT_ATTEMPTED", "empty")],
        [("abstention", "ABSTAINED", "empty")],
        [],
        [("answer", "UNPARSEABLE", "no gold answers to judge against")],
    ]
    assert model.calls == 0


def test_garbage_is_retried_with_the_bad_reply_then_parsed():
    model = ScriptedModel(["Sure! The answer looks fine to me.", "LABEL: CORRECT"], name="m")
    (judgments,) = LLMJudge(model, concurrency=1).judge_many([make_record("a", gold=["Rome"], answer="Rome!")])
    assert judgments[0].label == "CORRECT"
    assert model.calls == 2
    retry = model.prompts[1]
    assert "assistant: Sure! The answer looks fine to me." in retry
    assert RETRY_MESSAGE.format(labels="CORRECT, INCORRECT, NOT_ATTEMPTED") in retry


def test_garbage_after_retries_is_unparseable_excluded_and_counted(tmp_path):
    model = ScriptedModel(["blah", "still blah", "LABEL: CORRECT"], name="m")
    cache = JudgeCache(tmp_path / "cache.sqlite")
    records = [
        make_record("a", gold=["Rome"], answer="Rome", output_tokens=999),
        make_record("b", gold=["Rome"], answer="Rome", output_tokens=10),
    ]
    judge = LLMJudge(model, cache=cache, retries=1, concurrency=1)
    judged = judge_records(records, judge)
    assert [r.judgments[-1].label for r in judged] == ["UNPARSEABLE", "CORRECT"]
    assert judged[0].judgments[-1].raw == "still blah"
    assert model.calls == 3 and judge.stats.unparseable == 1
    m = compute_metrics(judged, judge.name)
    assert (m["n"], m["n_unparseable"], m["answer_accuracy"], m["tpc"]) == (1, 1, 1.0, 10)
    assert len(cache) == 1  # only the parsed label is cached; the garbage is asked again next time
    again = ScriptedModel(["LABEL: INCORRECT"], name="m")
    judged = judge_records(records, LLMJudge(again, cache=cache))
    assert [r.judgments[-1].label for r in judged] == ["INCORRECT", "CORRECT"]
    assert again.calls == 1


def test_cache_makes_reevaluation_free_and_is_keyed_by_version_model_and_inputs(tmp_path):
    path = tmp_path / "judge_cache.sqlite"
    records = [
        make_record("a", gold=["Rome"], answer="Rome"),
        searched_record("u", [("d1", "text")], answer="I don't know"),
        searched_record("v", [("d1", "text")], answer="I don't know"),
    ]
    records[2].question = records[1].question  # same question, same document: judged once
    first = ScriptedModel(responder=responder, name="m")
    with JudgeCache(path) as cache:
        judge_records(records, LLMJudge(first, cache=cache))
    assert first.calls == 3  # answer, abstention (identical for u and v), one evidence item
    second = ScriptedModel(responder=responder, name="m")
    with JudgeCache(path) as cache:
        judge = LLMJudge(second, cache=cache)
        again = judge_records(records, judge)
    assert second.calls == 0 and judge.stats.cached == judge.stats.items == 3
    assert again[0].judgments[-1].label == "CORRECT"
    other_model = ScriptedModel(responder=responder, name="m2")
    with JudgeCache(path) as cache:
        judge_records(records[:1], LLMJudge(other_model, cache=cache))
    assert other_model.calls == 1
    v2 = JudgePrompt("answer", "answer-v2", ANSWER_LABELS, ANSWER_PROMPT_V1.template + "\n")
    new_version = ScriptedModel(responder=responder, name="m")
    with JudgeCache(path) as cache:
        judge_records(records[:1], LLMJudge(new_version, cache=cache, prompts={"answer": v2}))
    assert new_version.calls == 1


def test_no_evidence_option():
    model = ScriptedModel(responder=responder, name="m")
    (out,) = LLMJudge(model, evidence=False).judge_many([searched_record("u", [("d1", "x")], answer="Paris")])
    assert [j.kind for j in out] == ["abstention"] and model.calls == 1


def test_through_the_openai_compatible_client(tmp_path):
    with fake_openai() as server:
        server.reply(
            CHAT,
            (200, chat_body("The response contradicts it.")),
            (200, chat_body("LABEL: INCORRECT")),
            (200, chat_body("Matches.\nLABEL: CORRECT")),
        )
        settings = {"model": {"name": "judge-m", "base_url": server.base_url}, "concurrency": 1, "max_tokens": 64}
        judge = build_judge("llm", settings, JudgeRun(tmp_path / "c.sqlite"))
        records = [
            make_record("a", gold=["Canberra"], answer="Sydney"),
            make_record("b", gold=["Canberra"], answer="Canberra"),
        ]
        a, b = judge_records(records, judge)
        bodies = server.bodies(CHAT)
    assert (a.judgments[-1].label, b.judgments[-1].label) == ("INCORRECT", "CORRECT")
    assert a.judgments[-1].judge == "llm:judge-m"
    assert len(bodies) == 3
    first, retry, _ = bodies
    assert first["model"] == "judge-m" and first["max_tokens"] == 64 and first["temperature"] == 0
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert "Gold answers (any one is right): Canberra" in first["messages"][0]["content"]
    assert [m["role"] for m in retry["messages"]] == ["user", "assistant", "user"]
    assert judge.stats.input_tokens == 3 * 180


def test_answerable_documents_get_the_answerable_evidence_prompt():
    prompts = []

    def answer_and_record(prompt: str) -> str:
        prompts.append(prompt)
        return responder(prompt)

    model = ScriptedModel(responder=answer_and_record, name="judge-m")
    retrieved = [RetrievedDoc(doc_id="d1", score=1.0, text="Its date is unrecorded.")]
    steps = [Step(kind="search", query="q", retrieved=retrieved)]
    rec = make_record("a1", gold=["Rome"], answer="Rome", steps=steps, search_calls=1)
    (out,) = LLMJudge(model).judge_many([rec])
    assert [(j.kind, j.label, j.prompt_version) for j in out] == [
        ("answer", "CORRECT", "answer-v1"),
        ("evidence", "NEGATIVE", "evidence-answerable-v1"),
    ]
    evidence_prompt = next(p for p in prompts if "Document:" in p)
    assert "cannot be answered" not in evidence_prompt and "LABEL: NEGATIVE" in evidence_prompt


def test_the_cache_keeps_the_judges_reasoning_and_opens_an_older_cache(tmp_path: Path) -> None:
    """A reasoning model's reasoning text is cached beside the raw reply (the viewer shows both);
    a cache written before that column existed gains it when opened, its rows kept."""
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE judgments (key TEXT PRIMARY KEY, prompt_version TEXT NOT NULL, model TEXT NOT NULL, "
        "label TEXT NOT NULL, raw TEXT, created_at REAL NOT NULL)"
    )
    db.execute("INSERT INTO judgments VALUES ('old', 'v1', 'm', 'CORRECT', 'LABEL: CORRECT', 0)")
    db.commit()
    db.close()
    with JudgeCache(path) as cache:
        assert cache.get_entry("old") == ("CORRECT", "LABEL: CORRECT", None)
        cache.put("new", "v1", "m", "INCORRECT", "LABEL: INCORRECT", "It names another city.")
    with JudgeCache(path) as cache:
        assert cache.get_entry("new") == ("INCORRECT", "LABEL: INCORRECT", "It names another city.")
        assert cache.get("new") == ("INCORRECT", "LABEL: INCORRECT")
