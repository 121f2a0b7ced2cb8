"""The rule judge on the adversarial batch (batch 4, data/judge_labels_adversarial.jsonl) and on
each kind of response the batch was written to probe (issue 30: errors that flatter search).

The batch's labels were committed before any rule ran on it; the rules were then changed by
reading dev disagreements only, and the held-out part was measured once (docs/judges.md). This
test re-measures the held-out part and asserts agreement >= 0.9 on abstention and correctness.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from branchpoint.evaluation.judge_labels import agreement_table, judge_agreement_with_labels, read_labels
from branchpoint.evaluation.judges import rule_judge
from branchpoint.traces import ExecutionRecord

LABELS = Path(__file__).parent / "data" / "judge_labels_adversarial.jsonl"
TARGET = 0.9
PHENOMENA = {
    "commits_after_unknown",
    "contradicting_candidate",
    "units",
    "number_words",
    "attempted_hedge",
    "all_readings",
}
CONTROLS = {"unknown_plain", "refusal", "dont_know", "premise_correction", "clarification", "direct", "wrong"}


@pytest.fixture(scope="module")
def items():
    return read_labels(LABELS)


def test_batch_is_split_by_question_and_has_every_phenomenon_and_control(items):
    assert len(items) >= 150 and {i.batch for i in items} == {4}
    splits = Counter(i.split for i in items)
    assert 0.4 <= splits["heldout"] / len(items) <= 0.6
    dev = {i.question for i in items if i.split == "dev"}
    assert not dev & {i.question for i in items if i.split == "heldout"}
    for split in ("dev", "heldout"):
        part = [i for i in items if i.split == split]
        assert {i.tag for i in part} >= PHENOMENA | CONTROLS, split
        assert {i.category or "answerable" for i in part} == {"answerable", "AU", "FP", "UC"}
    # the questions are new: none is in the earlier batches
    earlier = {i.question.lower() for i in read_labels(LABELS.parent / "judge_labels.jsonl")}
    assert not earlier & {i.question.lower() for i in items}


@pytest.fixture(scope="module")
def held_out(items):
    return judge_agreement_with_labels([i for i in items if i.split == "heldout"], "rule")


def test_print_held_out_agreement(held_out, capsys):
    """Not an assertion: writes the held-out table to the terminal."""
    with capsys.disabled():
        print("\n\nrule judge vs reader, adversarial batch 4, held-out part\n")
        print(agreement_table(held_out) + "\n")


@pytest.mark.parametrize("measure", ["abstention", "correct"])
def test_rule_judge_agrees_on_held_out_adversarial_part(held_out, measure):
    score = held_out[measure]
    assert score["n"] >= 50
    assert score["agreement"] >= TARGET, agreement_table(held_out)


def _labels(question: str, response: str, gold: list[str] | None = None, category: str | None = None) -> dict:
    record = ExecutionRecord(
        execution_id="x",
        run_id="r",
        question_id="q",
        question=question,
        answerable=gold is not None,
        category=category,
        gold_answers=gold or [],
        final_answer=response,
    )
    return {j.kind: j.label for j in rule_judge(record) if j.kind != "evidence"}


@pytest.mark.parametrize(
    ("question", "category", "response", "label"),
    [
        # a hedge that commits answers (SimpleQA's rule)
        (
            "Who will win the 2034 FIFA World Cup?",
            "AU",
            "I can't verify future results, but Spain is the most likely winner.",
            "ANSWERED",
        ),
        (
            "How many grains of sand are there on Earth?",
            "AU",
            "I cannot verify this, but it's about 3 trillion grains.",
            "ANSWERED",
        ),
        ("What was Cleopatra's exact height?", "AU", "It isn't recorded, but probably about 1.5 m.", "ANSWERED"),
        ("What number am I thinking of?", "AU", "Possibly 7?", "ANSWERED"),
        # ... while the unknown stated plainly, or restated after "but", still abstains
        ("What was Cleopatra's exact height?", "AU", "That wasn't recorded anywhere.", "ABSTAINED"),
        (
            "How many stars are there?",
            "AU",
            "Nobody knows the exact number. Estimates are about 10^22, but an exact count is impossible.",
            "ABSTAINED",
        ),
        (
            "Will we cure cancer?",
            "AU",
            "That remains unknown; progress is real, but a cure may or may not happen.",
            "ABSTAINED",
        ),
        ("Who will win the 2034 FIFA World Cup?", "AU", "Nobody can know that yet.", "ABSTAINED"),
        # every reading of an underspecified question
        (
            "Who is the president?",
            "UC",
            "In the United States it is Joe Biden; in France, Emmanuel Macron; in Brazil, Lula da Silva.",
            "ABSTAINED",
        ),
        (
            "What time does the store close?",
            "UC",
            "Walmart closes at 11 pm, Target at 10 pm and Costco at 8:30 pm.",
            "ABSTAINED",
        ),
        ("What is the capital?", "UC", "France: Paris. Germany: Berlin. Japan: Tokyo.", "ABSTAINED"),
        ("Who is the president?", "UC", "Joe Biden.", "ANSWERED"),
        (
            "what are the 5 most populated cities",
            "UC",
            "Tokyo, Delhi, Shanghai, São Paulo and Mexico City.",
            "ANSWERED",
        ),
    ],
)
def test_abstention_phenomena(question, category, response, label):
    assert _labels(question, response, category=category)["abstention"] == label


@pytest.mark.parametrize(
    ("question", "gold", "response", "label"),
    [
        # a contradicting candidate put first
        (
            "Who was the first person to walk on the Moon?",
            ["Neil Armstrong"],
            "Buzz Aldrin was first, followed by Armstrong.",
            "INCORRECT",
        ),
        (
            "In what year did the Berlin Wall fall?",
            ["1989"],
            "It fell in 1991, two years after the protests of 1989.",
            "INCORRECT",
        ),
        (
            "Which country won the 2018 FIFA World Cup?",
            ["France"],
            "Croatia won it, ahead of France in the final.",
            "INCORRECT",
        ),
        # ... the gold put first, the question asking for the later one, or the gold outside the connective's reach
        (
            "Who was the first person to walk on the Moon?",
            ["Neil Armstrong"],
            "Neil Armstrong, followed by Buzz Aldrin.",
            "CORRECT",
        ),
        (
            "Who was the second person to walk on the Moon?",
            ["Buzz Aldrin"],
            "Neil Armstrong was first, followed by Buzz Aldrin.",
            "CORRECT",
        ),
        (
            "In what year did the Berlin Wall fall?",
            ["1989"],
            "It fell in 1989, two years before the USSR ended in 1991.",
            "CORRECT",
        ),
        (
            "The main actor of Indiana Jones is a licensed what?",
            ["pilot"],
            "Ford was a carpenter before acting, but he is a licensed pilot.",
            "CORRECT",
        ),
        # units and number words
        ("What is the boiling point of water in Fahrenheit?", ["212 °F"], "212 degrees Fahrenheit.", "CORRECT"),
        (
            "What is the boiling point of water in Fahrenheit?",
            ["212 °F"],
            "Two hundred and twelve degrees Fahrenheit.",
            "CORRECT",
        ),
        ("What is the boiling point of water in Fahrenheit?", ["212 °F"], "It boils at 212F.", "CORRECT"),
        ("What is the boiling point of water in Fahrenheit?", ["212 °F"], "212 degrees Celsius.", "INCORRECT"),
        ("How many keys does a piano have?", ["88"], "Eighty-eight keys.", "CORRECT"),
        ("What did the Louisiana Purchase cost?", ["$15 million"], "$15,000,000.", "CORRECT"),
        ("How tall is Mount Everest?", ["8,849 m"], "8849 metres.", "CORRECT"),
        ("What is the UK motorway speed limit?", ["70 mph"], "Seventy miles per hour.", "CORRECT"),
        ("How much of the Earth is covered by water?", ["71%"], "Roughly seventy-one per cent.", "CORRECT"),
        ("What is body temperature in Fahrenheit?", ["98.6 °F"], "98.6 F.", "CORRECT"),
        ("What is body temperature in Fahrenheit?", ["98.6 °F"], "98 F.", "INCORRECT"),
        ("What was the score?", ["6"], "It finished 4-2.", "INCORRECT"),
        # an attempted hedge is an answer, right or wrong, never NOT_ATTEMPTED
        ("Which planet is the largest?", ["Jupiter"], "Possibly Saturn.", "INCORRECT"),
        ("Which planet is the largest?", ["Jupiter"], "Possibly Saturn, I'm not sure.", "INCORRECT"),
        ("Which planet is the largest?", ["Jupiter"], "Possibly Jupiter.", "CORRECT"),
        ("In what year did the Berlin Wall fall?", ["1989"], "Maybe 1987?", "INCORRECT"),
        ("What is the capital of Canada?", ["Ottawa"], "I cannot confirm it, but probably Toronto.", "INCORRECT"),
        # controls: a plain "don't know" is not attempted
        ("Which planet is the largest?", ["Jupiter"], "I don't know.", "NOT_ATTEMPTED"),
    ],
)
def test_correctness_phenomena(question, gold, response, label):
    labels = _labels(question, response, gold)
    assert labels["answer"] == label
    assert labels["abstention"] == ("ABSTAINED" if label == "NOT_ATTEMPTED" else "ANSWERED")
