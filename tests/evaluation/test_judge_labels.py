"""The rule judge against a careful reader: the labelled responses in data/judge_labels.jsonl.

The held-out part (batch 1, and batch 2 written and committed before the later rule changes) is
never used to tune the rules; this test re-measures it on every run and prints agreement with
its Wilson 95% interval and κ (docs/judges.md reports the numbers).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.judge_labels import (
    agreement_table,
    judge_agreement_with_labels,
    kappa_bootstrap_interval,
    read_labels,
)
from branchpoint.evaluation.wilson import wilson_interval

LABELS = Path(__file__).parent / "data" / "judge_labels.jsonl"
TARGET = 0.9


@pytest.fixture(scope="module")
def items():
    return read_labels(LABELS)


def test_labelled_set_covers_every_kind_of_response(items):
    assert len(items) >= 300
    splits = Counter(i.split for i in items)
    assert splits["heldout"] >= 300 and splits["dev"] >= 200
    for part in ("dev", "heldout", "heldout batch 2"):
        split, _, batch = part.partition(" batch ")
        cats = Counter(
            i.category or "answerable" for i in items if i.split == split and (not batch or i.batch == int(batch))
        )
        assert set(cats) == {"answerable", "AU", "FP", "UC"}
    batch2 = [i for i in items if i.batch == 2]
    assert len(batch2) >= 200 and {i.split for i in batch2} == {"heldout"}
    assert {
        "premise_correction",
        "clarification",
        "multiple_readings",
        "refusal",
        "hedge_right",
        "hedged_answer",
        "confident_negation",
        "wrong_candidate_first",
        "answers_flawed",
        "commits",
        "direct",
        "wrong",
    } <= {i.tag for i in batch2}
    tags = {i.tag for i in items}
    assert {
        "premise_correction",
        "clarification",
        "multiple_readings",
        "refusal",
        "hedge_right",
        "hedged_answer",
        "confident_negation",
        "wrong_candidate_first",
        "partial",
        "verbose",
        "answers_flawed",
        "commits",
    } <= tags
    assert len({i.id for i in items}) == len(items)
    # held-out questions are new: none of them is a dev question, and batch 2 asks new ones
    dev_questions = {i.question for i in items if i.split == "dev"}
    assert not {i.question for i in items if i.split == "heldout"} & dev_questions
    assert not {i.question for i in batch2} & {i.question for i in items if i.batch == 1}


@pytest.fixture(scope="module")
def held_out(items):
    return judge_agreement_with_labels([i for i in items if i.split == "heldout"], "rule")


def test_print_held_out_agreement_and_lower_bounds(items, held_out, capsys):
    """Not an assertion: writes the held-out tables (all, and per batch) to the terminal."""
    with capsys.disabled():
        print("\n\nrule judge vs readers, held-out part (batches 1 + 2)\n")
        print(agreement_table(held_out))
        for batch in (1, 2):
            part = [i for i in items if i.split == "heldout" and i.batch == batch]
            print(f"\nheld-out batch {batch} ({len(part)} responses)\n")
            print(agreement_table(judge_agreement_with_labels(part, "rule")))
        lows = {k: held_out[k]["agreement_ci"][0] for k in ("abstention", "abstention_unanswerable", "correct")}
        print("\nlower 95% bounds: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in lows.items()) + "\n")


@pytest.mark.parametrize("measure", ["abstention", "abstention_unanswerable", "correct"])
def test_rule_judge_agrees_with_readers_on_held_out_part(held_out, measure):
    score = held_out[measure]
    assert score["n"] >= 180
    assert score["agreement"] >= TARGET, agreement_table(held_out)
    assert score["kappa"] is not None and score["kappa"] >= 0.8


def test_agreement_counts_and_kappa_by_hand(tmp_path):
    rows = [
        # abstained correctly; answered (judge agrees); a clarification the judge sees
        {
            "question": "Who will win the 2040 FIFA World Cup?",
            "category": "AU",
            "response": "Nobody can know that yet.",
            "label_abstained": True,
        },
        {
            "question": "Will we ever find a cure for cancer?",
            "category": "AU",
            "response": "No, we will never find a cure for cancer.",
            "label_abstained": False,
        },
        {
            "question": "who was the first mayor",
            "category": "UC",
            "response": "The first mayor of which city?",
            "label_abstained": True,
        },
        # the reader says abstained, the judge does not see it
        {
            "question": "Predict the lottery numbers.",
            "category": "AU",
            "response": "Honestly, luck decides those.",
            "label_abstained": True,
        },
    ]
    lines = []
    for n, row in enumerate(rows):
        lines.append(
            json.dumps(
                {
                    "id": f"t{n}",
                    "split": "dev",
                    "source": "test",
                    "answerable": False,
                    "gold_answers": [],
                    "label_correct": None,
                    **row,
                }
            )
        )
    lines.append(
        json.dumps(
            {
                "id": "a",
                "split": "dev",
                "source": "test",
                "question": "Did Cole Porter write White Christmas?",
                "answerable": True,
                "gold_answers": ["no"],
                "response": "He did not: Irving Berlin wrote it.",
                "label_abstained": False,
                "label_correct": True,
            }
        )
    )
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = judge_agreement_with_labels(read_labels(path))
    # abstention: reader [Y, N, Y, Y, N], judge [Y, N, Y, N, N]: 4 of 5 agree
    # p_e = (3/5)(2/5) + (2/5)(3/5) = 12/25; κ = (4/5 − 12/25) / (1 − 12/25) = 8/13
    assert result["abstention"]["agreement"] == pytest.approx(0.8)
    assert result["abstention"]["kappa"] == pytest.approx(8 / 13)
    assert result["abstention"]["judge_no_human_yes"] == 1
    assert result["abstention_unanswerable"]["n"] == 4
    assert result["correct"] == {
        "n": 1,
        "agreement": 1.0,
        "agreement_ci": pytest.approx([0.2065, 1.0], abs=1e-4),
        "kappa": None,
        "kappa_ci": None,
        "judge_yes_human_no": 0,
        "judge_no_human_yes": 0,
    }
    lo, hi = result["abstention"]["kappa_ci"]
    assert -1.0 <= lo <= 8 / 13 <= hi <= 1.0
    assert [d["id"] for d in result["disagreements"]] == ["t3"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"line 1: not JSON"),
        ('{"id": "x"}', r'line 1: field "split"'),
        (
            '{"id": "x", "split": "train", "source": "s", "question": "q", "answerable": false, "category": "AU", '
            '"response": "r", "label_abstained": true}',
            r'field "split" is "train"',
        ),
        (
            '{"id": "x", "split": "dev", "source": "s", "question": "q", "answerable": true, '
            '"response": "r", "label_abstained": true}',
            r'field "label_correct" must be',
        ),
        (
            '{"id": "x", "split": "dev", "source": "s", "question": "q", "answerable": false, "category": "XX", '
            '"response": "r", "label_abstained": true}',
            r'field "category" must be AU, FP or UC',
        ),
    ],
)
def test_read_labels_names_line_and_field(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_labels(path)


def test_wilson_interval_by_hand():
    # k = 8, n = 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416 = 0.71674,
    # half 1.96 · sqrt(0.016 + 0.009604) / 1.38416 = 0.22658
    lo, hi = wilson_interval(8, 10)
    assert (lo, hi) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert wilson_interval(0, 0) is None


def test_kappa_bootstrap_interval():
    # perfect agreement with both labels present: every resample with both labels has κ = 1,
    # resamples with one label only have p_e = 1 and are dropped
    pairs = [(True, True)] * 5 + [(False, False)] * 5
    assert kappa_bootstrap_interval(pairs) == [1.0, 1.0]
    # one label only: κ never defined
    assert kappa_bootstrap_interval([(True, True)] * 4) is None
    assert kappa_bootstrap_interval([]) is None
    # reproducible, and brackets the point estimate (κ = 8/13 for the hand-computed case)
    mixed = [(True, True), (False, False), (True, True), (True, False), (False, False)]
    first = kappa_bootstrap_interval(mixed, seed=3)
    assert first == kappa_bootstrap_interval(mixed, seed=3)
    assert first[0] <= 8 / 13 <= first[1]
