"""``selfaware``: SelfAware json ``{"example": [{"question_id", "question", "answer": [...] or null,
"answerable", "source"}]}`` (or the bare list of examples).

answerable -> gold = answer; unanswerable -> AU (its answer, if any, in ``note``); stratum =
source. ids: ``selfaware-<question_id>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import (
    Parsed,
    Record,
    fmt_keys,
    objects,
    read_json,
    type_name,
)
from branchpoint.errors import InputError

_SELFAWARE_KEYS = ("question_id", "question", "answer", "answerable", "source")


def _read_selfaware(path: Path) -> list[tuple[str, Any]]:
    data = read_json(path)
    if isinstance(data, list):  # the bare list of examples
        return [(f"{path} example[{i}]", obj) for i, obj in enumerate(data)]
    if not isinstance(data, dict) or not isinstance(data.get("example"), list):
        got = f"an object with keys {fmt_keys(data)}" if isinstance(data, dict) else type_name(data)
        raise InputError(f'{path}: expected {{"example": [question objects]}} at the top level, got {got}')
    return [(f"{path} example[{i}]", obj) for i, obj in enumerate(data["example"])]


def _parse_selfaware(path: Path) -> Parsed:
    for where, obj in objects(_read_selfaware(path)):
        rec = Record(where, obj, _SELFAWARE_KEYS)
        qid, question = f"selfaware-{rec.ident('question_id')}", rec.text("question")
        answerable = rec.raw("answerable")
        if not isinstance(answerable, bool):
            raise rec.error("answerable", f"expected true or false, got {answerable!r:.40}")
        answers = rec.answers("answer", optional=True)
        source = obj.get("source")
        if source is not None and not isinstance(source, str):
            raise rec.error("source", f"expected a string or null, got {type_name(source)}")
        if answerable:
            q = Question(id=qid, question=question, answerable=True, gold_answers=answers, stratum=source or None)
        else:
            q = Question(
                id=qid,
                question=question,
                answerable=False,
                category="AU",
                stratum=source or None,
                note="; ".join(answers) or None,
            )
        yield where, q, None


def _by_name(head: FileHead) -> bool:
    return head.is_json and "selfaware" in head.name


def _sniff(head: FileHead) -> bool:
    """A .json object with an "example" list, or a bare list whose first example has SelfAware's keys."""
    if not head.is_json:
        return False
    data = head.json_object
    if data is not None and isinstance(data.get("example"), list):
        return True
    keys = head.keys
    return "answerable" in keys and "paragraphs" not in keys and {"question_id", "source"} <= keys


SELFAWARE = register_format(
    QuestionFormat(
        name="selfaware",
        parse=_parse_selfaware,
        by_name=_by_name,
        name_rank=60,
        sniff=_sniff,
        sniff_rank=25,
        label="SelfAware",
    )
)
