"""``nq_open``: jsonl ``{"question", "answer": [...]}``; ids are ``nq-<line>``."""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, Record, iter_jsonl_numbered


def _parse_nq_open(path: Path) -> Parsed:
    # ids follow the file's line numbers (blank lines count), so they stay stable.
    for lineno, (where, obj) in iter_jsonl_numbered(path):
        rec = Record(where, obj, ("question", "answer"))
        yield (
            where,
            Question(
                id=f"nq-{lineno}",
                question=rec.text("question"),
                answerable=True,
                gold_answers=rec.answers("answer"),
            ),
            None,
        )


def _by_name(head: FileHead) -> bool:
    return "nq_open" in head.name


def _sniff(head: FileHead) -> bool:
    return not head.is_csv and "question" in head.keys and isinstance(head.first.get("answer"), list)


NQ_OPEN = register_format(
    QuestionFormat(
        name="nq_open",
        parse=_parse_nq_open,
        by_name=_by_name,
        name_rank=30,
        sniff=_sniff,
        sniff_rank=110,
        label="NQ-Open",
    )
)
