"""Questions: the record every question set is loaded into, and the embedded demo set."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

# The demo data's paths live below `retrieval` (which opens the demo corpus); named here too.
from branchpoint.demo_data import demo_corpus_path as demo_corpus_path
from branchpoint.demo_data import demo_dir as demo_dir
from branchpoint.demo_data import demo_questions_path as demo_questions_path

#: Longest question text a set may hold: every model call of an execution quotes it, so a record
#: grows several times over; longer ones are refused at load (the record would outgrow the trace
#: line limit and stay incomplete for ever).
MAX_QUESTION_CHARS = 100_000

UNANSWERABLE_CATEGORIES: tuple[str, ...] = ("AU", "FP", "UC")
"""The categories of unanswerable questions: Answer Unknown, False Premise, Underspecified Context."""


class Question(BaseModel):
    """One question with what scoring needs: answerability, category, gold answers."""

    model_config = ConfigDict(extra="forbid")

    id: str
    question: str = Field(min_length=1)
    answerable: StrictBool = Field(description='true or false (a string such as "yes" is refused, not guessed).')
    category: Literal["AU", "FP", "UC"] | None = None
    gold_answers: list[str] = Field(default_factory=list)
    support: list[str] = Field(default_factory=list, description="Ids of supporting passages.")
    stratum: str | None = None
    support_group: str | None = None
    note: str | None = None
    notes: list[str] = Field(
        default_factory=list, description="Every explanation a set gives (FalseQA's answer lists); note is the first."
    )
