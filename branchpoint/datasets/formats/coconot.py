"""``coconot``: CoCoNot jsonl ``{"id", "category", "subcategory", "prompt", "response"}``, all unanswerable.

Subcategory "false presuppositions" -> FP, "underspecified" -> UC, "universal unknowns" and
"temporal limitations" -> AU; every other subcategory (safety, humanizing, modality requests...)
is out of scope for search QA and skipped. stratum = subcategory. The skipped counts are in
`LoadReport.skipped` (and logged at INFO).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, Record, iter_jsonl, type_name

COCONOT_SUBCATEGORIES: dict[str, Literal["AU", "FP", "UC"]] = {
    "false presuppositions": "FP",
    "underspecified": "UC",
    "universal unknowns": "AU",
    "temporal limitations": "AU",
}
"""CoCoNot subcategories in scope for search QA, mapped to our unanswerable categories."""


_COCONOT_KEYS = ("id", "category", "subcategory", "prompt", "response")


def coconot_record(where: str, obj: dict[str, Any]) -> tuple[Record, str, str, str | None]:
    rec = Record(where, obj, _COCONOT_KEYS)
    sub = rec.raw("subcategory")
    if not isinstance(sub, str):
        raise rec.error("subcategory", f"expected a string, got {type_name(sub)}")
    response = obj.get("response")
    note = response if isinstance(response, str) and response.strip() else None
    return rec, rec.ident("id"), sub, note


def _parse_coconot(path: Path) -> Parsed:
    for where, obj in iter_jsonl(path):
        rec, qid, sub, note = coconot_record(where, obj)
        category = COCONOT_SUBCATEGORIES.get(sub.strip().lower())
        if category is None:
            yield where, None, sub
            continue
        yield (
            where,
            Question(
                id=qid,
                question=rec.text("prompt"),
                answerable=False,
                category=category,
                stratum=sub,
                note=note,
            ),
            None,
        )


def _by_name(head: FileHead) -> bool:
    return "coconot" in head.name and "coconot_contrast" not in head.name


def _sniff(head: FileHead) -> bool:
    return not head.is_csv and {"prompt", "subcategory"} <= head.keys


COCONOT = register_format(
    QuestionFormat(
        name="coconot",
        parse=_parse_coconot,
        by_name=_by_name,
        name_rank=20,
        sniff=_sniff,
        sniff_rank=100,
        label="CoCoNot",
    )
)
