"""Multi-turn conversations: the earlier turns placed before each evaluated question.

The seed study asks the last question of a conversation whose 1..9 earlier turns are answerable,
unanswerable, or mixed questions. The earlier turns here are drawn (seeded per question) from the
whole question file (not the `--limit` or sample selection), and answered by an oracle: the first gold answer for an answerable question,
an abstention of the right kind for an unanswerable one. The agent carries them in its state
(`history`) and every prompt shows them as earlier turns.
"""

from __future__ import annotations

import random

from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.experiments.spec import MultiTurnSpec

#: The oracle's abstention for an earlier unanswerable turn, by category.
ABSTENTIONS = {
    "AU": "I don't know: there is no reliable record of that.",
    "FP": "That question rests on a false premise.",
    "UC": "Could you clarify? The question lacks the context needed to answer it.",
    None: "I don't know.",
}


def oracle_answer(question: Question) -> str:
    """What the earlier turn's assistant said: the gold answer, or the right kind of abstention."""
    if question.answerable and question.gold_answers:
        return question.gold_answers[0]
    if question.category == "FP" and question.note:
        return f"That question rests on a false premise: {question.note}"
    return ABSTENTIONS.get(question.category, ABSTENTIONS[None])


def history_for(question: Question, pool: list[Question], spec: MultiTurnSpec, seed: int) -> list[dict[str, str]]:
    """The earlier turns before `question`: `spec.preceding` others of the kind `spec.context`."""
    if spec.preceding == 0:
        return []
    if spec.context == "answerable":
        candidates = [q for q in pool if q.answerable and q.gold_answers]
    elif spec.context == "unanswerable":
        candidates = [q for q in pool if not q.answerable]
    else:
        candidates = list(pool)
    candidates = [q for q in candidates if q.id != question.id]
    if len(candidates) < spec.preceding:
        raise InputError(
            f"multi_turn: {spec.preceding} preceding {spec.context} turns asked, but the whole question file "
            f"has only {len(candidates)} such questions besides {question.id} (earlier turns are drawn from "
            "the whole file; lower multi_turn.preceding or use a larger question set)"
        )
    rng = random.Random(f"{seed}/{question.id}/{spec.context}/{spec.preceding}")
    turns = rng.sample(candidates, spec.preceding)
    return [{"question": q.question, "answer": oracle_answer(q)} for q in turns]
