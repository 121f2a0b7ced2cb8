"""``r1searcher``: jsonl ``{"idx", "question", "answer"}`` (answer a string or a list); ids are
``<file stem>-<idx>``."""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, Record, iter_jsonl


def _parse_r1searcher(path: Path) -> Parsed:
    for where, obj in iter_jsonl(path):
        rec = Record(where, obj, ("idx", "question", "answer"))
        yield (
            where,
            Question(
                id=f"{path.stem}-{rec.ident('idx')}",
                question=rec.text("question"),
                answerable=True,
                gold_answers=rec.answers("answer"),
            ),
            None,
        )


def _sniff(head: FileHead) -> bool:
    return not head.is_csv and {"idx", "question"} <= head.keys


R1SEARCHER = register_format(
    QuestionFormat(
        name="r1searcher",
        parse=_parse_r1searcher,
        sniff=_sniff,
        sniff_rank=90,
        label="R1-Searcher",
    )
)
