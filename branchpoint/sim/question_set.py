"""Whether the simulated model knows a run's questions, checked before a run starts.

The simulator looks a question up by its text (`behaviour.QuestionBank`); a question outside its
question set has no behaviour and no truth. The server refuses such a request (HTTP 400), but a
run is told before it starts, by question id, so that nothing is recorded for a run that could
only fail.
"""

from __future__ import annotations

from collections.abc import Iterable

from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.models.spec import ModelSpec, SimServerSpec
from branchpoint.sim.behaviour import QuestionBank

SHOWN = 10


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
