"""The negative-evidence documents: the angles they are written from and the document record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from branchpoint.retrieval.corpus import Passage

ID_PREFIX = "neg-"


@dataclass(frozen=True)
class Angle:
    """One reason an answer can be unavailable, and what the document should say about it."""

    name: str
    guidance: str


ANGLES: tuple[Angle, ...] = (
    Angle(
        "ambiguous or inconsistent information",
        "the question's key terms are ambiguous, or the available records describe the matter "
        "inconsistently, so no single answer can be stated",
    ),
    Angle(
        "data coverage gaps",
        "the relevant data were never systematically collected or published, or existing "
        "datasets do not cover this case",
    ),
    Angle(
        "methodological limits",
        "the quantity cannot be measured or estimated reliably with existing methods, or any "
        "estimate depends heavily on definitions and assumptions",
    ),
    Angle(
        "privacy or legal restrictions",
        "the information is confidential, protected by privacy law, sealed, classified or proprietary",
    ),
    Angle(
        "temporal availability",
        "the information is not yet available, has not been released, or was only recorded "
        "after the period in question",
    ),
    Angle(
        "geographic specificity",
        "figures exist only for a broader or different area than the one the question needs, "
        "and cannot be broken down to it",
    ),
    Angle(
        "conflicting information", "reputable sources give contradictory figures or accounts, and none is authoritative"
    ),
    Angle(
        "no scientific consensus", "experts disagree or the research remains inconclusive, so no accepted answer exists"
    ),
    Angle(
        "rapidly changing future events",
        "the answer depends on future or fast-changing events that cannot be known in advance",
    ),
    Angle(
        "absence of historical records",
        "no records survive, or none were ever kept, for the period or event in question",
    ),
)


#: Words a parsed document must have (fewer: treated as malformed) and the most kept.
MIN_WORDS = 25


MAX_WORDS = 160


class QuestionLike(Protocol):
    """What augmentation reads from a question (branchpoint's `Question` has these fields)."""

    id: str
    question: str
    answerable: bool


@dataclass(frozen=True)
class NegativeDoc:
    """One generated document: which question and angle it is for, its title and text."""

    doc_id: str
    question_id: str
    question: str
    angle_index: int
    angle: str
    title: str
    text: str

    def passage(self) -> Passage:
        """The document as a corpus passage."""
        return Passage(doc_id=self.doc_id, title=self.title, text=self.text)

    def row(self) -> dict[str, Any]:
        """The generated.jsonl row."""
        return {
            "id": self.doc_id,
            "question_id": self.question_id,
            "question": self.question,
            "angle_index": self.angle_index,
            "angle": self.angle,
            "title": self.title,
            "text": self.text,
        }


def negative_doc_id(question_id: str, angle_index: int) -> str:
    """`neg-<question id>-<angle index>`."""
    return f"{ID_PREFIX}{question_id}-{angle_index}"
