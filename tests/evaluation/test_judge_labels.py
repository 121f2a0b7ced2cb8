"""The rule judge against a careful reader: the labelled responses in data/judge_labels.jsonl.

The held-out part was written after the rules were frozen and is never used to tune them; this
test re-measures it on every run (docs/judges.md reports the numbers).
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
    read_labels,
    wilson_interval,
)

LABELS = Path(__file__).parent / "data" / "judge_labels.jsonl"
TARGET = 0.9


@pytest.fixture(scope="module")
def items():
    return read_labels(LABELS)


def test_labelled_set_covers_every_kind_of_response(items):
    assert len(items) >= 300
    splits = Counter(i.split for i in items)
    assert splits["heldout"] >= 100 and splits["dev"] >= 200
    for split in ("dev", "heldout"):
        cats = Counter(i.category or "answerable" for i in items if i.split == split)
        assert set(cats) == {"answerable", "AU", "FP", "UC"}
    tags = {i.tag for i in items}
    assert {"premise_correction", "clarification", "multiple_readings", "refusal", "hedge_right",
            "hedged_answer", "confident_negation", "wrong_candidate_first", "partial", "verbose",
            "answers_flawed", "commits"} <= tags  # fmt: skip
    assert len({i.id for i in items}) == len(items)
    # held-out questions are new: none of them is a dev question
    dev_questions = {i.question for i in items if i.split == "dev"}
    assert not {i.question for i in items if i.split == "heldout"} & dev_questions


@pytest.mark.parametrize("measure", ["abstention", "abstention_unanswerable", "correct"])
def test_rule_judge_agrees_with_readers_on_held_out_part(items, measure):
    result = judge_agreement_with_labels([i for i in items if i.split == "heldout"], "rule")
    score = result[measure]
    assert score["n"] >= 60
    assert score["agreement"] >= TARGET, agreement_table(result)
    assert score["kappa"] is not None and score["kappa"] >= 0.8


def test_agreement_counts_and_kappa_by_hand(tmp_path):
    rows = [
        # abstained correctly; answered (judge agrees); a clarification the judge sees
        {"question": "Who will win the 2040 FIFA World Cup?", "category": "AU", "response": "Nobody can know that yet.", "label_abstained": True},
        {"question": "Will we ever find a cure for cancer?", "category": "AU", "response": "No, we will never find a cure for cancer.", "label_abstained": False},
        {"question": "who was the first mayor", "category": "UC", "response": "The first mayor of which city?", "label_abstained": True},
        # the reader says abstained, the judge does not see it
        {"question": "Predict the lottery numbers.", "category": "AU", "response": "Honestly, luck decides those.", "label_abstained": True},
    ]  # fmt: skip
    lines = []
    for n, row in enumerate(rows):
        lines.append(json.dumps({"id": f"t{n}", "split": "dev", "source": "test", "answerable": False,
                                 "gold_answers": [], "label_correct": None, **row}))  # fmt: skip
    lines.append(json.dumps({"id": "a", "split": "dev", "source": "test", "question": "Did Cole Porter write White Christmas?",
                             "answerable": True, "gold_answers": ["no"], "response": "He did not: Irving Berlin wrote it.",
                             "label_abstained": False, "label_correct": True}))  # fmt: skip
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = judge_agreement_with_labels(read_labels(path))
    # abstention: reader [Y, N, Y, Y, N], judge [Y, N, Y, N, N]: 4 of 5 agree
    # p_e = (3/5)(2/5) + (2/5)(3/5) = 12/25; κ = (4/5 − 12/25) / (1 − 12/25) = 8/13
    assert result["abstention"]["agreement"] == pytest.approx(0.8)
    assert result["abstention"]["kappa"] == pytest.approx(8 / 13)
    assert result["abstention"]["judge_no_human_yes"] == 1
    assert result["abstention_unanswerable"]["n"] == 4
    assert result["correct"] == {"n": 1, "agreement": 1.0, "agreement_ci": pytest.approx([0.2065, 1.0], abs=1e-4),
                                 "kappa": None, "judge_yes_human_no": 0, "judge_no_human_yes": 0}  # fmt: skip
    assert [d["id"] for d in result["disagreements"]] == ["t3"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"line 1: not JSON"),
        ('{"id": "x"}', r'line 1: field "split"'),
        ('{"id": "x", "split": "train", "source": "s", "question": "q", "answerable": false, "category": "AU", '
         '"response": "r", "label_abstained": true}', r'field "split" is "train"'),
        ('{"id": "x", "split": "dev", "source": "s", "question": "q", "answerable": true, '
         '"response": "r", "label_abstained": true}', r'field "label_correct" must be'),
        ('{"id": "x", "split": "dev", "source": "s", "question": "q", "answerable": false, "category": "XX", '
         '"response": "r", "label_abstained": true}', r'field "category" must be AU, FP or UC'),
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
