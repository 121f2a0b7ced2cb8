"""The simulated world's own text rules: they agree with the rule judge on the demo data, and
they stand on their own (the truth imports nothing of the pipeline's evaluation: an import-linter
contract in pyproject.toml, run by tests/test_layers.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branchpoint.datasets import load_questions
from branchpoint.evaluation.judges import contained_gold, detect_negative_evidence, normalize_answer
from branchpoint.sim.behaviour import is_success
from branchpoint.sim.matching import fold, holds_gold, negative_cue
from branchpoint.sim.passages import features, shown_passage
from branchpoint.sim.question_set import QuestionBank
from branchpoint.validation.findings import augmented_corpus
from branchpoint.validation.mutants import patched

QUESTIONS = load_questions("demo")


def corpus(tmp_path: Path) -> list[str]:
    """The demo corpus with the templated negative-evidence documents validate adds."""
    path = augmented_corpus(tmp_path / "corpus.jsonl")
    return [json.loads(line)["contents"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_worlds_rules_agree_with_the_rule_judge_on_the_demo_data(tmp_path: Path) -> None:
    texts = corpus(tmp_path)
    texts += [q.question for q in QUESTIONS] + [g for q in QUESTIONS for g in q.gold_answers]
    assert sum(detect_negative_evidence(t) is not None for t in texts) >= 20  # both kinds occur
    for text in texts:
        assert fold(text) == normalize_answer(text), text
        assert negative_cue(text) == detect_negative_evidence(text), text
    pairs = [(t, q) for t in texts for q in QUESTIONS if q.gold_answers]
    assert sum(holds_gold(t, q.gold_answers) for t, q in pairs) >= 50
    for text, q in pairs:
        assert holds_gold(text, q.gold_answers) == (contained_gold(text, q.gold_answers) is not None)


@pytest.mark.parametrize(
    "target", ["answer_normalization:normalize_answer", "judges:detect_negative_evidence", "judges:contained_gold"]
)
def test_a_broken_judge_does_not_move_the_simulated_world(target: str, tmp_path: Path) -> None:
    """Each of the judge's text rules broken, wherever it is bound (as `validate --mutants`
    plants a bug): the simulator's successes and passage features do not change."""
    bank = QuestionBank(QUESTIONS)
    docs = [{"title": "", "text": t} for t in corpus(tmp_path)]

    def world() -> list[object]:
        out: list[object] = []
        for q in bank.by_text.values():
            out.append(is_success(q, q.gold_answers[0] if q.gold_answers else "I don't know."))
            out += [features(q, [shown_passage(d, 60)]) for d in docs]
        return out

    before = world()
    with patched(f"branchpoint.evaluation.{target}", lambda original: lambda *args, **kwargs: None):
        assert world() == before
