"""Judges: normalisation, containment, abstention patterns, rule and given judges."""

from __future__ import annotations

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation import (
    ABSTENTION_PATTERNS,
    build_judge,
    contained_gold,
    detect_abstention,
    judge_records,
    normalize_answer,
)
from branchpoint.evaluation.judges import given_judge, rule_judge
from branchpoint.registry import REGISTRY
from branchpoint.traces import Judgment
from tests.evaluation.builders import make_record as record


def labels(judgments: list[Judgment]) -> dict[str, str]:
    return {j.kind: j.label for j in judgments}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  an   Apple, a pear!  ", "apple pear"),
        ("U.S.A.", "usa"),
        ("Théâtre — “Odéon”", "théâtre odéon"),
        ("Anthem", "anthem"),  # "an" inside a word is not an article
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("answer", "gold", "hit"),
    [
        ("It is Rome.", ["Rome"], "Rome"),
        ("Romeo", ["Rome"], None),  # word boundary
        ("The answer is the Eiffel Tower!", ["Eiffel Tower"], "Eiffel Tower"),
        ("eiffel", ["Eiffel Tower"], None),  # whole gold string must be contained
        ("Paris, France", ["London", "paris"], "paris"),
        ("something", ["The"], None),  # gold that normalises to nothing is ignored
        (None, ["Rome"], None),
    ],
)
def test_contained_gold(answer, gold, hit):
    assert contained_gold(answer, gold) == hit


@pytest.mark.parametrize(
    ("answer", "pattern"),
    [
        ("I don't know.", "dont_know"),
        ("I do not know who that is", "dont_know"),
        ("I don’t know", "dont_know"),  # curly apostrophe
        ("The winner is unknown.", "unknown"),
        ("This cannot be determined from the sources.", "cannot_be_determined"),
        ("There is no reliable information about it.", "no_reliable_information"),
        ("Not enough information to answer.", "not_enough_information"),
        ("It is impossible to know.", "impossible_to_know"),
        ("No one knows for sure.", "no_one_knows"),
        ("This question is unanswerable.", "unanswerable"),
        ("Could you clarify the year?", "could_you_clarify"),
        ("Which Springfield do you mean?", "which_do_you_mean"),
        ("Please specify the team.", "please_specify"),
        ("I need more context to answer.", "more_context"),
        ("The question rests on a false premise.", "false_premise"),
        ("The premise is wrong.", "the_premise"),
        ("Actually, Einstein won it for the photoelectric effect.", "actually"),
        ("There is no such prize.", "there_is_no"),
        ("He never visited Mars.", "never"),
        ("She didn't write that novel.", "did_not"),
        ("She did not write that novel.", "did_not"),
        ("It was not built in 1900.", "was_not"),
        ("That is not true.", "is_not_true"),
        ("That is an incorrect assumption.", "incorrect_assumption"),
    ],
)
def test_detect_abstention(answer, pattern):
    assert detect_abstention(answer) == pattern


def test_every_pattern_family_is_covered():
    assert {p.family for p in ABSTENTION_PATTERNS} == {"unknown", "clarification", "premise"}


@pytest.mark.parametrize("answer", ["Paris", "Leonardo da Vinci painted it.", "", None])
def test_detect_abstention_negative(answer):
    assert detect_abstention(answer) is None


def test_registry_knows_both_judges():
    assert {"rule", "given", "llm", "llm-answer"} <= set(REGISTRY.names("judge"))


def test_unknown_judge_lists_known_names():
    with pytest.raises(InputError, match=r'unknown judge "nope".*given.*rule'):
        build_judge("nope")


@pytest.mark.parametrize(
    ("answer", "status", "answer_label", "abstention_label", "raw"),
    [
        ("It is Rome.", "ok", "CORRECT", "ANSWERED", "gold=Rome"),
        ("Romeo", "ok", "INCORRECT", "ANSWERED", None),
        ("I don't know.", "ok", "NOT_ATTEMPTED", "ABSTAINED", "dont_know"),
        ("", "ok", "NOT_ATTEMPTED", "ABSTAINED", "empty"),
        (None, "ok", "NOT_ATTEMPTED", "ABSTAINED", "empty"),
        ("Rome, I don't know", "ok", "CORRECT", "ABSTAINED", "gold=Rome"),
        ("Rome", "malformed", "INCORRECT", "ANSWERED", "status=malformed"),
        ("I don't know", "length", "INCORRECT", "ANSWERED", "status=length"),
        (None, "length", "INCORRECT", "ANSWERED", "status=length"),
    ],
)
def test_rule_judge(answer, status, answer_label, abstention_label, raw):
    rec = record("q", gold=["Rome"], answer=answer, status=status)
    out = rule_judge(rec)
    assert labels(out) == {"answer": answer_label, "abstention": abstention_label}
    assert all(j.judge == "rule" for j in out)
    assert out[0].raw == raw


def test_rule_abstention_raw_names_pattern():
    rec = record("q", answerable=False, category="UC", answer="Which Paris do you mean?")
    (_, abst) = rule_judge(rec)
    assert (abst.label, abst.raw) == ("ABSTAINED", "which_do_you_mean")


def test_judge_records_replaces_own_judgments_and_copies():
    rec = record("q", gold=["Rome"], answer="Rome", labels={"answer": "INCORRECT"})
    rec.judgments.append(Judgment(judge="rule", kind="answer", label="INCORRECT"))
    (out,) = judge_records([rec], "rule")
    assert [(j.judge, j.label) for j in out.judgments] == [
        ("human", "INCORRECT"),
        ("rule", "CORRECT"),
        ("rule", "ANSWERED"),
    ]
    assert len(rec.judgments) == 2  # the input is untouched


def test_given_judge_happy_path():
    recs = [
        record("a", labels={"answer": "correct", "abstention": "ANSWERED"}),
        record("u", answerable=False, category="FP", labels={"abstention": "ABSTAINED"}),
    ]
    a, u = judge_records(recs, "given")
    given = lambda r: {j.kind: j.label for j in r.judgments if j.judge == "given"}
    assert given(a) == {"answer": "CORRECT", "abstention": "ANSWERED"}
    assert given(u) == {"abstention": "ABSTAINED"}


def test_given_judge_uses_last_label_of_a_kind():
    rec = record("a", labels={"answer": "INCORRECT"})
    rec.judgments.append(Judgment(judge="llm", kind="answer", label="CORRECT"))
    (out,) = given_judge(rec)
    assert (out.label, out.raw) == ("CORRECT", "from=llm")


def test_given_judge_missing_label_names_execution_and_kind():
    rec = record("u", answerable=False, category="AU", labels={"answer": "CORRECT"})
    with pytest.raises(InputError, match=r"execution e-u: no abstention judgment"):
        judge_records([rec], "given")


def test_given_judge_skips_incomplete_without_label():
    rec = record("a", status="incomplete", answer=None)
    assert given_judge(rec) == []


def test_given_judge_rejects_unknown_label():
    rec = record("a", labels={"answer": "MAYBE"})
    with pytest.raises(InputError, match=r'execution e-a.*"MAYBE".*CORRECT, INCORRECT, NOT_ATTEMPTED'):
        judge_records([rec], "given")


# --- evidence labels -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        ("The exact date of his birth is unknown.", "unknown"),
        ("No records survive of the meeting.", "no_record"),
        ("There are no surviving records of the meeting.", "no_record"),
        ("Historians have disputed the claim for decades.", "disputed"),
        ("The story is a popular myth.", "misconception"),
        ("Springfield may refer to several places.", "ambiguous"),
        ("Canberra is the capital city of Australia.", None),
    ],
)
def test_detect_negative_evidence(text, cue):
    from branchpoint.evaluation.judges import detect_negative_evidence

    assert detect_negative_evidence(text) == cue


def test_rule_judge_labels_each_distinct_document_answerable_or_not():
    from branchpoint.traces import RetrievedDoc, Step

    docs = [
        RetrievedDoc(doc_id="d1", score=1, text="Its author is unknown."),
        RetrievedDoc(doc_id="d2", score=1, text="It was printed in 1605."),
    ]
    steps = [Step(kind="search", retrieved=docs), Step(kind="search", retrieved=docs[:1])]
    unanswerable = record("u", answerable=False, category="AU", answer="1605", steps=steps)
    evidence = [(j.label, j.doc_id, j.raw) for j in rule_judge(unanswerable) if j.kind == "evidence"]
    assert evidence == [("NEGATIVE", "d1", "unknown"), ("POSITIVE", "d2", None)]
    # answerable questions get evidence judgments too (the study's Table 10 reports both)
    answerable = record("a", gold=["1605"], answer="1605", steps=steps)
    evidence = [(j.label, j.doc_id) for j in rule_judge(answerable) if j.kind == "evidence"]
    assert evidence == [("NEGATIVE", "d1"), ("POSITIVE", "d2")]


def test_given_judge_copies_evidence_and_accepts_unparseable():
    rec = record("u", answerable=False, category="AU", labels={"abstention": "unparseable"})
    rec.judgments.append(Judgment(judge="human", kind="evidence", label="negative", doc_id="d1"))
    out = given_judge(rec)
    assert [(j.kind, j.label, getattr(j, "doc_id", None)) for j in out] == [
        ("abstention", "UNPARSEABLE", None),
        ("evidence", "NEGATIVE", "d1"),
    ]


# --- the question decides what a negation means (premise-aware abstention) ---------------------


def _judged(question, answer, *, category=None, gold=None):
    rec = record("q", answerable=category is None, category=category, gold=gold, answer=answer)
    rec.question = question
    return {j.kind: (j.label, j.raw) for j in rule_judge(rec)}


@pytest.mark.parametrize(
    ("question", "category", "answer", "label"),
    [
        # confident answers that the context-free detector took for abstentions
        ("Will we ever find a cure for cancer?", "AU", "No, we will never find a cure for cancer.", "ANSWERED"),
        (
            "Describe the moment humanity will discover life on other planets.",
            "AU",
            "Humanity will never discover life on other planets.",
            "ANSWERED",
        ),
        # plain abstentions it missed
        ("Who will win the 2040 FIFA World Cup?", "AU", "Nobody can know that yet.", "ABSTAINED"),
        ("How many eggs do tigers lay?", "FP", "Tigers don't lay eggs; they are mammals.", "ABSTAINED"),
        (
            'When did Aesop write "The Scarlet Letter"?',
            "FP",
            "Aesop lived in ancient Greece; The Scarlet Letter was written by Nathaniel Hawthorne.",
            "ABSTAINED",
        ),
        ("Which US president painted the Last Supper?", "FP", "None. Leonardo da Vinci painted it.", "ABSTAINED"),
        ("who was the first mayor", "UC", "The first mayor of which city?", "ABSTAINED"),
        ("how many members form a jury", "UC", "It varies by country: 12 in most US criminal trials.", "ABSTAINED"),
        # answers to the flawed question, hedged answers
        ("Why is Sydney the capital of Australia?", "FP", "Because it is the largest city.", "ANSWERED"),
        ("Who will win the 2040 FIFA World Cup?", "AU", "Hard to predict, but my guess is Spain.", "ANSWERED"),
        ("what is the capital of georgia", "UC", "I think you mean the US state, so Atlanta.", "ANSWERED"),
    ],
)
def test_rule_abstention_reads_the_question(question, category, answer, label):
    assert _judged(question, answer, category=category)["abstention"][0] == label


@pytest.mark.parametrize(
    ("question", "gold", "answer", "answer_label", "abstention_label"),
    [
        (
            "Did Cole Porter write White Christmas?",
            ["no"],
            "He did not: Irving Berlin wrote it.",
            "CORRECT",
            "ANSWERED",
        ),
        ("Are Britten and Bartók from the same country?", ["no"], "They are not.", "CORRECT", "ANSWERED"),
        ("Can people with celiac eat camel meat?", ["yes"], "No, they should avoid it.", "INCORRECT", "ANSWERED"),
        (
            "who painted the mona lisa",
            ["Leonardo da Vinci"],
            "It was not Michelangelo; it was Leonardo da Vinci.",
            "CORRECT",
            "ANSWERED",
        ),
        (
            "what is the capital of australia",
            ["Canberra"],
            "It wasn't Canberra; it was Sydney.",
            "INCORRECT",
            "ANSWERED",
        ),
        ("what is the capital of australia", ["Canberra"], "Either Sydney or Canberra.", "INCORRECT", "ANSWERED"),
        ("who played anna in once upon a time", ["Elizabeth Dean Lail"], "Elizabeth Lail.", "CORRECT", "ANSWERED"),
        ("who is the longest serving president", ["Franklin D. Roosevelt"], "FDR.", "CORRECT", "ANSWERED"),
        (
            "who is the longest serving president",
            ["Franklin D. Roosevelt"],
            "Theodore Roosevelt.",
            "INCORRECT",
            "ANSWERED",
        ),
        ("when did william iv die", ["20 June 1837"], "He died on June 20, 1837.", "CORRECT", "ANSWERED"),
        ("when did william iv die", ["20 June 1837"], "He died in 1837.", "INCORRECT", "ANSWERED"),
        ("who won the first battle of bull run", ["Confederate"], "The Confederates won.", "CORRECT", "ANSWERED"),
        ("what rocket launched voyager 2", ["Titan IIIE"], "A Titan IIIE-Centaur.", "CORRECT", "ANSWERED"),
        (
            "when was the last time kentucky won ncaa",
            ["2012"],
            "I'm not sure; the documents don't say.",
            "NOT_ATTEMPTED",
            "ABSTAINED",
        ),
        ("when did poe enlist", ["1827"], "I believe it was 1830, though I'm not certain.", "INCORRECT", "ANSWERED"),
    ],
)
def test_rule_answer_reads_gold_in_context(question, gold, answer, answer_label, abstention_label):
    judged = _judged(question, answer, gold=gold)
    assert (judged["answer"][0], judged["abstention"][0]) == (answer_label, abstention_label)


def test_rule_answer_raw_says_how_gold_matched():
    assert (
        _judged("q?", "Elizabeth Lail.", gold=["Elizabeth Dean Lail"])["answer"][1]
        == "gold=Elizabeth Dean Lail;match=name"
    )
    assert _judged("Did he?", "No.", gold=["no"])["answer"][1] == "gold=no;match=polarity"
