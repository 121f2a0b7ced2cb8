"""``coconot_contrast``: the CoCoNot contrast set, in CoCoNot's format.

These questions look like refusal bait but SHOULD be answered: they are loaded as answerable
with **no gold answers** (``gold_answers == []``), a control for over-abstention (score them by
whether the model answered, not by correctness). All subcategories are kept; stratum =
subcategory. Its records cannot be told from CoCoNot's by their keys: only the file name
("coconot_contrast") says which it is, so a renamed file needs ``fmt="coconot_contrast"``.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.formats.coconot import coconot_record
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, iter_jsonl


def _parse_coconot_contrast(path: Path) -> Parsed:
    for where, obj in iter_jsonl(path):
        rec, qid, sub, note = coconot_record(where, obj)
        yield (
            where,
            Question(
                id=qid,
                question=rec.text("prompt"),
                answerable=True,
                gold_answers=[],
                stratum=sub,
                note=note,
            ),
            None,
        )


def _by_name(head: FileHead) -> bool:
    return "coconot_contrast" in head.name


COCONOT_CONTRAST = register_format(
    QuestionFormat(
        name="coconot_contrast",
        parse=_parse_coconot_contrast,
        by_name=_by_name,
        name_rank=10,
        label="CoCoNot contrast",
    )
)
