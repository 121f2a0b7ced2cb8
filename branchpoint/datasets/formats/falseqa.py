"""``falseqa``: FalseQA csv (columns ``question, answer, label``; label 1 = false premise).

Label 1 -> unanswerable FP, ``note`` = the answer (the rebuttal that explains the false premise).
Label 0 -> answerable with **no gold answers**: FalseQA's answers are free-text explanations, not
short answers a rule judge can match, so the text is kept in ``note`` and the question serves,
like the CoCoNot contrast set, as a control for over-abstention. Keep only the false-premise
questions with ``categories=["FP"]``. ids: ``falseqa-<file stem>-<line>``.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, Record, read_csv

_FALSEQA_COLUMNS = ("question", "answer", "label")


def falseqa_answers(cell: str) -> list[str]:
    """FalseQA's answer cell as a list: its releases write several explanations as a Python list
    literal (`['Rocks have no eyes.', "..."]`), others one plain text."""
    import ast

    text = cell.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            items = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            items = None
        if isinstance(items, list) and all(isinstance(i, str) for i in items):
            return [i.strip() for i in items if i.strip()]
    return [text] if text else []


def _parse_falseqa(path: Path) -> Parsed:
    for line, where, row in read_csv(path, _FALSEQA_COLUMNS):
        rec = Record(where, row, _FALSEQA_COLUMNS)
        notes = falseqa_answers(row["answer"])
        question, answer = rec.text("question"), (notes[0] if notes else None)
        label = row["label"].removesuffix(".0")
        if label not in ("0", "1"):
            raise rec.error("label", f"expected 0 (true premise) or 1 (false premise), got {label!r:.40}")
        qid = f"falseqa-{path.stem}-{line}"
        if label == "1":
            q = Question(id=qid, question=question, answerable=False, category="FP", note=answer, notes=notes)
        else:  # a free-text answer, not a short gold answer: kept as a note
            q = Question(id=qid, question=question, answerable=True, gold_answers=[], note=answer, notes=notes)
        yield where, q, None


def _by_name(head: FileHead) -> bool:
    return head.is_csv and "falseqa" in head.name


def _sniff(head: FileHead) -> bool:
    return head.is_csv and {"answer", "label"} <= set(head.csv_columns)


FALSEQA = register_format(
    QuestionFormat(
        name="falseqa",
        parse=_parse_falseqa,
        by_name=_by_name,
        name_rank=70,
        sniff=_sniff,
        sniff_rank=20,
        label="FalseQA",
    )
)
