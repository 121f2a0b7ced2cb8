"""``branchpoint``: our jsonl, one `Question` per line; unknown fields are errors."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, fmt_keys, iter_jsonl
from branchpoint.errors import InputError

QUESTION_KEYS = tuple(Question.model_fields)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "(record)"
        if err["type"] == "missing":
            parts.append(f'field "{name}" missing (expected {fmt_keys(QUESTION_KEYS)})')
            if name == "id":
                parts[-1] += '; for questions without ids use fmt "generic"'
        elif err["type"] == "extra_forbidden":
            parts.append(f'field "{name}" is not a Question field (expected only {fmt_keys(QUESTION_KEYS)})')
        else:
            parts.append(f'field "{name}": {err["msg"]} (got {err["input"]!r:.60})')
    return "; ".join(parts)


def _parse_branchpoint(path: Path) -> Parsed:
    for where, obj in iter_jsonl(path):
        try:
            q = Question.model_validate(obj)
        except ValidationError as exc:
            raise InputError(f"{where}: {_validation_message(exc)}") from None
        if q.answerable and q.category is not None:
            raise InputError(
                f'{where}: field "category" is {q.category!r} but the question is answerable '
                "(expected null for answerable questions)"
            )
        yield where, q, None


def _sniff(head: FileHead) -> bool:
    """JSON (lines) whose first record has `answerable` and an `id`, and only `Question` fields."""
    if head.is_csv:
        return False
    keys = head.keys
    return "answerable" in keys and "paragraphs" not in keys and "id" in keys and keys <= set(QUESTION_KEYS)


BRANCHPOINT = register_format(
    QuestionFormat(
        name="branchpoint",
        parse=_parse_branchpoint,
        sniff=_sniff,
        sniff_rank=30,
        label="branchpoint",
    )
)
