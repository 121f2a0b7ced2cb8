"""``flashrag``: jsonl ``{"id", "question", "golden_answers"}``."""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, Record, iter_jsonl


def _parse_flashrag(path: Path) -> Parsed:
    for where, obj in iter_jsonl(path):
        rec = Record(where, obj, ("id", "question", "golden_answers"))
        yield (
            where,
            Question(
                id=rec.ident("id"),
                question=rec.text("question"),
                answerable=True,
                gold_answers=rec.answers("golden_answers"),
            ),
            None,
        )


def _sniff(head: FileHead) -> bool:
    return not head.is_csv and "golden_answers" in head.keys


FLASHRAG = register_format(
    QuestionFormat(
        name="flashrag",
        parse=_parse_flashrag,
        sniff=_sniff,
        sniff_rank=80,
        label="FlashRAG",
    )
)
