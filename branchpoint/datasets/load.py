"""`load_questions`: read a question file (any registered format, or the embedded demo set).

`load_questions(path, fmt="auto")` reads one file (or the string "demo", the embedded demo set)
and returns a list of `Question`, in file order; `load_questions_with_report` also says what was
skipped (out-of-scope records, such as CoCoNot's non-QA subcategories) or filtered out. The
formats are in `branchpoint.datasets.formats`, one module each; `fmt="auto"` is `detect_format`.

Every error is an `InputError` naming the file, the line (jsonl and csv, 1-based; a csv row's
first line) or item (JSON list, ``item [i]`` 0-based; SelfAware ``example[i]``), the field or
column and what was expected.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from branchpoint.datasets.detect import detect_format
from branchpoint.datasets.format import QuestionFormat, all_formats, get_format
from branchpoint.datasets.questions import MAX_QUESTION_CHARS, Question, demo_questions_path
from branchpoint.datasets.reading import check_file
from branchpoint.errors import InputError

log = logging.getLogger(__name__)

CATEGORY_FILTERS: tuple[str, ...] = ("answerable", "AU", "FP", "UC")
"""Values for `load_questions(categories=...)`: "answerable" or an unanswerable category."""

DEMO = "demo"


@dataclass
class LoadReport:
    """What `load_questions_with_report` read: the questions and what was left out, and why."""

    path: Path
    fmt: str
    questions: list[Question]
    records: int = 0
    """Records read from the file (before skipping and filtering)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Out-of-scope records by reason (for CoCoNot: by subcategory)."""
    filtered_out: int = 0
    """In-scope questions dropped by the `categories` filter or by `limit`."""


def _resolve(path: str | Path, fmt: str) -> tuple[Path, QuestionFormat]:
    """The file to read (the demo set for "demo") and its format (`detect_format` for "auto")."""
    chosen = None if fmt == "auto" else get_format(fmt)
    if str(path) == DEMO:
        if fmt not in ("auto", "branchpoint"):
            raise InputError(f'the demo set is in format "branchpoint", not "{fmt}"')
        return demo_questions_path(), get_format("branchpoint")
    path = Path(path)
    check_file(path)
    return path, (chosen or get_format(detect_format(path)))


def _check_categories(categories: list[str] | None) -> set[str] | None:
    """The `categories` filter as a set (None: keep every question); bad values are an InputError."""
    if categories is None:
        return None
    if isinstance(categories, str):
        categories = [categories]
    bad = [c for c in categories if c not in CATEGORY_FILTERS]
    if bad:
        raise InputError(
            f"categories: unknown value(s) {', '.join(map(repr, bad))} (expected any of {', '.join(CATEGORY_FILTERS)})"
        )
    if not categories:
        raise InputError(f"categories: empty list (expected any of {', '.join(CATEGORY_FILTERS)})")
    return set(categories)


def _category_key(q: Question) -> str | None:
    """What the `categories` filter matches a question on: "answerable", or its category."""
    return "answerable" if q.answerable else q.category


def load_questions_with_report(
    path: str | Path,
    fmt: str = "auto",
    *,
    limit: int | None = None,
    categories: list[str] | None = None,
    split: str | None = None,
) -> LoadReport:
    """Like `load_questions`, also saying how many records were skipped or filtered out.

    `split` keeps one FreshQA split (TEST or DEV); the other rows count as skipped.
    """
    wanted = _check_categories(categories)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit: expected a positive integer or None, got {limit!r}")
    path, qfmt = _resolve(path, fmt)
    fmt, parse = qfmt.name, qfmt.parse
    if split is not None:
        if not qfmt.splits:
            with_splits = " or ".join(f.label or f.name for f in all_formats() if f.splits) or "no"
            raise InputError(f"{path}: split {split!r} applies to {with_splits} files only (this file is format {fmt})")
        if split.upper() not in qfmt.splits:
            raise InputError(f"split: expected one of {', '.join(qfmt.splits)}, got {split!r}")
        parse = functools.partial(qfmt.parse, split=split.upper())

    questions: list[Question] = []
    first_seen: dict[str, str] = {}
    skipped: Counter[str] = Counter()
    present: Counter[str] = Counter()
    records = filtered = 0
    for where, q, skip in parse(path):
        records += 1
        if q is None:
            skipped[skip or "out of scope"] += 1
            continue
        if len(q.question) > MAX_QUESTION_CHARS:
            raise InputError(
                f'{where}: field "question" has {len(q.question)} characters, more than the {MAX_QUESTION_CHARS} '
                "a question may have (every model call quotes it: its record would outgrow the trace line limit)"
            )
        if q.id in first_seen:
            raise InputError(f'{where}: field "id": duplicate id "{q.id}" (first seen at {first_seen[q.id]})')
        first_seen[q.id] = where.removeprefix(f"{path} ")
        key = _category_key(q)
        present[str(key)] += 1
        if wanted is not None and key not in wanted:
            filtered += 1
            continue
        if limit is not None and len(questions) >= limit:
            filtered += 1
            continue  # keep reading: later lines are still checked (bad lines, duplicate ids)
        questions.append(q)

    if records == 0:
        raise InputError(f"{path}: no questions (the file is empty)")
    if not first_seen:
        raise InputError(
            f"{path}: no questions in scope for format {fmt} ({records} records skipped: "
            f"{', '.join(f'{k} {v}' for k, v in skipped.most_common())})"
        )
    if not questions:
        raise InputError(
            f"{path}: no questions match categories {sorted(wanted or [])} "
            f"(the file has: {', '.join(f'{k} {v}' for k, v in sorted(present.items()))})"
        )
    if skipped:
        log.info(
            "%s: skipped %d out-of-scope records (%s)",
            path,
            sum(skipped.values()),
            ", ".join(f"{k}: {v}" for k, v in skipped.most_common()),
        )
    return LoadReport(
        path=path,
        fmt=fmt,
        questions=questions,
        records=records,
        skipped=dict(skipped),
        filtered_out=filtered,
    )


def load_questions(
    path: str | Path,
    fmt: str = "auto",
    *,
    limit: int | None = None,
    categories: list[str] | None = None,
    split: str | None = None,
) -> list[Question]:
    """Load a question set into `Question` records, in file order.

    path: a question file, or "demo" for the embedded demo set (format "branchpoint").
    fmt: a registered format (`format_names()`), or "auto" (by file name, then by the first record's keys).
    categories: keep only these kinds: "answerable" and/or "AU", "FP", "UC".
    limit: keep the first N questions after the categories filter (the whole file is still
    checked).

    Raises InputError (file, line or item, field, what was expected) for a missing or empty
    file, bad JSON, missing or mistyped fields, duplicate ids, an unknown format, or when no
    question is left. Out-of-scope records (CoCoNot's non-QA subcategories) are skipped; use
    `load_questions_with_report` to see how many.
    """
    return load_questions_with_report(path, fmt, limit=limit, categories=categories, split=split).questions
