"""Outcome rewards: 1 for a correct answer to an answerable question or an abstention on an
unanswerable one, else 0, judged by the project's judges as fork studies are scored.

The reward is `evaluation.value.rewards.correctness_reward` (the `correct` reward of a fork
study: `metrics.is_correct` under a judge) applied to the completion's final answer, so a
trainer optimises exactly what `branchpoint evaluate` and `value` measure (seed 000 §3.1: the
correctness indicator A(q, S), CORRECT on answerable and ABSTAINED on unanswerable questions).
A completion that gives no answer (a search it was cut off after, an unclosed tag, empty text)
scores 0, as malformed outputs do in the seed studies (seed 002, Appendix D: "Empty answers,
explicit UNKNOWN responses, malformed outputs ... receive zero"). Identical answers to the same
question share one judgment (the judge runs once per distinct answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.evaluation.value.rewards import correctness_reward
from branchpoint.traces import ExecutionRecord


@dataclass(frozen=True)
class Question:
    """What judging an answer needs: the gold answers and whether the question is answerable
    (`category`: AU / FP / UC for unanswerable ones, when known)."""

    gold_answers: list[str] = field(default_factory=list)
    answerable: bool = True
    question: str = ""
    question_id: str = "q"
    category: str | None = None


def _record(answer: str | None, q: Question, i: int) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id=f"reward-{i}",
        run_id="rewards",
        question_id=q.question_id,
        question=q.question,
        answerable=q.answerable,
        category=q.category if q.category in ("AU", "FP", "UC") else None,
        gold_answers=list(q.gold_answers),
        status="ok" if answer is not None else "malformed",
        final_answer=answer,
    )


def outcome_scores(
    answers: Sequence[str | None], questions: Sequence[Question], judge: str = DEFAULT_JUDGE
) -> list[float]:
    """The outcome reward of each answer (None: no answer) to its question under `judge` (a
    judge name that takes no settings: `rule`, the offline default, or a registered one)."""
    if len(answers) != len(questions):
        raise ValueError(f"outcome_scores: {len(answers)} answers for {len(questions)} questions")
    if not answers:
        return []
    records = [_record(a, q, i) for i, (a, q) in enumerate(zip(answers, questions))]
    return [float(y) for y in correctness_reward(records, judge)]


def outcome_score(answer: str | None, question: Question, judge: str = DEFAULT_JUDGE) -> float:
    """`outcome_scores` of one answer."""
    return outcome_scores([answer], [question], judge)[0]
