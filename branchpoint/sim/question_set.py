"""The question set the simulated model knows, and whether it knows a run's questions.

The simulator looks a question up by its text (`QuestionBank`: whitespace collapsed, case
folded); a question outside its question set has no behaviour and no truth. The server refuses
such a request (HTTP 400), but a run is told before it starts, by question id, so that nothing
is recorded for a run that could only fail.
"""

from __future__ import annotations

from collections.abc import Iterable

from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.models.spec import ModelSpec, SimServerSpec

#: How many unknown question ids an error names.
SHOWN = 10


def question_key(text: str) -> str:
    """How questions are matched: whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


class QuestionBank:
    """The question set the server was given, looked up by question text."""

    def __init__(self, questions: Iterable[Question]) -> None:
        self.by_text: dict[str, Question] = {}
        for q in questions:
            self.by_text.setdefault(question_key(q.question), q)

    def lookup(self, text: str) -> Question | None:
        """The question whose text is `text` (matched by `question_key`), or None."""
        return self.by_text.get(question_key(text))

    def __len__(self) -> int:
        return len(self.by_text)


def unknown_question_ids(sim: SimServerSpec, questions: Iterable[Question]) -> list[str]:
    """Ids of `questions` whose text is not in the question set the simulator is started with."""
    from branchpoint.datasets import load_questions

    bank = QuestionBank(load_questions(sim.questions))
    return [q.id for q in questions if bank.lookup(q.question) is None]


def refuse_unknown_questions(planned: Iterable[tuple[ModelSpec, Question]]) -> None:
    """Raise InputError naming, by id, the planned questions that a simulated model (provider
    `sim`) does not know; other providers are not checked."""
    by_set: dict[str, tuple[SimServerSpec, dict[str, Question]]] = {}
    for model, question in planned:
        if model.provider == "sim":
            by_set.setdefault(model.sim.questions, (model.sim, {}))[1][question.id] = question
    for sim, questions in by_set.values():
        missing = unknown_question_ids(sim, questions.values())
        if missing:
            shown = ", ".join(missing[:SHOWN]) + (f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else "")
            raise InputError(
                f"model.sim.questions ({sim.questions!r}): {len(missing)} of the run's questions are not in the "
                f"simulated model's question set, so it has no behaviour or truth for them: {shown} (set "
                "model.sim.questions to the run's question file)"
            )
