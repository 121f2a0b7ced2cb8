"""``generic``: jsonl for your own data, one question a line.

``{"question", "answerable", "category"?, "gold_answers"?, "stratum"?, "support_group"?, "id"?,
"support"?, "note"?}``. Unlike ``branchpoint``, ``id`` is optional (default ``<file stem>-<line>``)
and other fields are ignored (named in a warning). category: "AU", "FP", "UC" or null
(unanswerable only); gold_answers: a string or a list (may be empty: such answerable questions
are scored by whether the model answered).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import UNANSWERABLE_CATEGORIES, Question
from branchpoint.datasets.reading import (
    Parsed,
    Record,
    fmt_keys,
    iter_jsonl_numbered,
    type_name,
)

log = logging.getLogger(__name__)

_GENERIC_REQUIRED = ("question", "answerable")


_GENERIC_KEYS = (*_GENERIC_REQUIRED, "category", "gold_answers", "stratum", "support_group", "id", "support", "note")


def _optional_text(rec: Record, name: str) -> str | None:
    value = rec.obj.get(name)
    if value is not None and not isinstance(value, str):
        raise rec.error(name, f"expected a string or null, got {type_name(value)} {value!r:.40}")
    return value or None


def _parse_generic(path: Path) -> Parsed:
    ignored: Counter[str] = Counter()
    for lineno, (where, obj) in iter_jsonl_numbered(path):
        rec = Record(where, obj, _GENERIC_REQUIRED)
        qid = rec.ident("id") if rec.has("id") else f"{path.stem}-{lineno}"
        question = rec.text("question")
        answerable = rec.raw("answerable")
        if not isinstance(answerable, bool):
            raise rec.error("answerable", f"expected true or false, got {answerable!r:.40}")
        category = obj.get("category")
        if category is not None and category not in UNANSWERABLE_CATEGORIES:
            raise rec.error("category", f'expected "AU", "FP", "UC" or null, got {category!r:.40}')
        if answerable and category is not None:
            raise rec.error(
                "category", f"is {category!r} but the question is answerable (expected null for answerable questions)"
            )
        support = obj.get("support") or []
        if not isinstance(support, list) or not all(isinstance(v, str) for v in support):
            raise rec.error("support", f"expected a list of passage ids, got {support!r:.60}")
        ignored.update(k for k in obj if k not in _GENERIC_KEYS)
        yield (
            where,
            Question(
                id=qid,
                question=question,
                answerable=answerable,
                category=category,
                gold_answers=rec.answers("gold_answers", optional=True),
                support=support,
                stratum=_optional_text(rec, "stratum"),
                support_group=_optional_text(rec, "support_group"),
                note=_optional_text(rec, "note"),
            ),
            None,
        )
    if ignored:
        log.warning(
            "%s: ignored fields that the generic format does not read: %s (it reads %s)",
            path,
            ", ".join(f'"{k}" ({n} lines)' for k, n in ignored.most_common()),
            fmt_keys(_GENERIC_KEYS),
        )


def _sniff(head: FileHead) -> bool:
    """JSON (lines) whose first record has `answerable` (and is not one of the formats before it)."""
    if head.is_csv:
        return False
    keys = head.keys
    return "answerable" in keys and "paragraphs" not in keys


GENERIC = register_format(
    QuestionFormat(
        name="generic",
        parse=_parse_generic,
        sniff=_sniff,
        sniff_rank=50,
        label="generic",
    )
)
