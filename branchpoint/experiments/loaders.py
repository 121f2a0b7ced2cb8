"""Question-set loaders: public QA formats and our own, all read into `Question` records.

`load_questions(path, fmt="auto")` reads one file (or the string "demo", the embedded demo set)
and returns a list of `Question`. Supported formats (`QUESTION_FORMATS`):

- ``branchpoint``: our jsonl, one `Question` per line; unknown fields are errors.
- ``musique``: MuSiQue native JSON list (``id, question, answer, answer_aliases, paragraphs``).
  gold = [answer, *aliases]; support = titles of supporting paragraphs (in paragraph order);
  support_group = the first supporting title. A record with ``"answerable": false`` (MuSiQue-Full)
  becomes an unanswerable AU question with no gold answers (its answer is kept in ``note``).
- ``hotpotqa``: HotpotQA native JSON list (``_id, question, answer, type, level,
  supporting_facts``). support = supporting-fact titles (deduplicated, in order), support_group
  = the first of them, stratum = ``"type/level"``.
- ``nq_open``: jsonl ``{"question", "answer": [...]}``; ids are ``nq-<line>``.
- ``flashrag``: jsonl ``{"id", "question", "golden_answers"}``.
- ``r1searcher``: jsonl ``{"idx", "question", "answer"}`` (answer a string or a list); ids are
  ``<file stem>-<idx>``.
- ``coconot``: CoCoNot jsonl ``{"id", "category", "subcategory", "prompt", "response"}``, all
  unanswerable. Subcategory "false presuppositions" -> FP, "underspecified" -> UC,
  "universal unknowns" and "temporal limitations" -> AU; every other subcategory (safety,
  humanizing, modality requests...) is out of scope for search QA and skipped. stratum =
  subcategory. The skipped counts are in `LoadReport.skipped` (and logged at INFO).
- ``coconot_contrast``: the CoCoNot contrast set, same format. These questions look like refusal
  bait but SHOULD be answered: they are loaded as answerable with **no gold answers**
  (``gold_answers == []``), a control for over-abstention (score them by whether the model
  answered, not by correctness). All subcategories are kept; stratum = subcategory.

- ``falseqa``: FalseQA csv (columns ``question, answer, label``; label 1 = false premise).
  Label 1 -> unanswerable FP, ``note`` = the answer (the rebuttal that explains the false
  premise). Label 0 -> answerable with **no gold answers**: FalseQA's answers are free-text
  explanations, not short answers a rule judge can match, so the text is kept in ``note`` and the
  question serves, like the CoCoNot contrast set, as a control for over-abstention. Keep only the
  false-premise questions with ``categories=["FP"]``. ids: ``falseqa-<file stem>-<line>``.
- ``selfaware``: SelfAware json ``{"example": [{"question_id", "question", "answer": [...] or
  null, "answerable", "source"}]}``. answerable -> gold = answer; unanswerable -> AU (its
  answer, if any, in ``note``); stratum = source. ids: ``selfaware-<question_id>``.
- ``freshqa``: FreshQA csv (columns ``id, question, false_premise, fact_type, answer_0`` ...
  ``answer_9``; others such as ``split`` are ignored). The header is the first row (within the
  first 10 lines) with a ``question`` cell, so the preamble lines of FreshQA's releases are
  skipped. false_premise TRUE -> unanswerable FP, ``note`` = answer_0 (the debunking answer);
  FALSE -> answerable, gold = the non-empty answer_0..answer_9. stratum = fact_type. ids:
  ``freshqa-<id>``.
- ``generic``: jsonl for your own data, one question a line: ``{"question", "answerable",
  "category"?, "gold_answers"?, "stratum"?, "support_group"?, "id"?, "support"?, "note"?}``.
  Unlike ``branchpoint``, ``id`` is optional (default ``<file stem>-<line>``) and other fields
  are ignored (named in a warning). category: "AU", "FP", "UC" or null (unanswerable only);
  gold_answers: a string or a list (may be empty: such answerable questions are scored by
  whether the model answered).

``fmt="auto"`` decides by the file name first ("coconot_contrast", "coconot", "nq_open";
"musique" / "hotpot" / "selfaware" only for ``.json`` files, since R1-Searcher ships
``musique_500.jsonl``; "falseqa" / "freshqa" only for ``.csv`` files), then by content: a
``.csv`` file by its header columns, a ``.json`` object by its ``"example"`` list, otherwise by
the keys of the first record (``answerable`` with an ``id`` and only `Question` fields ->
``branchpoint``, ``answerable`` otherwise -> ``generic``). The contrast set cannot be told from
CoCoNot by its keys: a renamed contrast file needs ``fmt="coconot_contrast"``.

Every error is an `InputError` naming the file, the line (jsonl and csv, 1-based; a csv row's
first line) or item (JSON list, ``item [i]`` 0-based; SelfAware ``example[i]``), the field or
column and what was expected.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.errors import InputError
from branchpoint.experiments.questions import Question, demo_questions_path
from branchpoint.traces import TraceError, iter_json_lines

log = logging.getLogger(__name__)

QUESTION_FORMATS: tuple[str, ...] = (
    "branchpoint",
    "musique",
    "hotpotqa",
    "nq_open",
    "flashrag",
    "r1searcher",
    "coconot",
    "coconot_contrast",
    "falseqa",
    "selfaware",
    "freshqa",
    "generic",
)
"""Format names `load_questions` accepts (besides "auto")."""

CATEGORY_FILTERS: tuple[str, ...] = ("answerable", "AU", "FP", "UC")
"""Values for `load_questions(categories=...)`: "answerable" or an unanswerable category."""

UNANSWERABLE_CATEGORIES: tuple[str, ...] = ("AU", "FP", "UC")

COCONOT_SUBCATEGORIES: dict[str, str] = {
    "false presuppositions": "FP",
    "underspecified": "UC",
    "universal unknowns": "AU",
    "temporal limitations": "AU",
}
"""CoCoNot subcategories in scope for search QA, mapped to our unanswerable categories."""

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


# --------------------------------------------------------------------------- helpers


def _fmt_keys(keys: Iterable[str]) -> str:
    return "{" + ", ".join(f'"{k}"' for k in keys) + "}"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


class _Rec:
    """One raw record and where it came from, with field getters that raise clear errors."""

    def __init__(self, where: str, obj: dict[str, Any], expected: tuple[str, ...]):
        self.where = where
        self.obj = obj
        self.expected = expected

    def error(self, name: str, what: str) -> InputError:
        return InputError(f'{self.where}: field "{name}" {what}')

    def has(self, name: str) -> bool:
        return name in self.obj and self.obj[name] is not None

    def raw(self, name: str) -> Any:
        if name not in self.obj:
            raise self.error(name, f"missing (expected {_fmt_keys(self.expected)})")
        return self.obj[name]

    def text(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str) or not value.strip():
            got = f"{_type_name(value)} {value!r:.60}"
            raise self.error(name, f"expected a non-empty string, got {got}")
        return value

    def ident(self, name: str) -> str:
        value = self.raw(name)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise self.error(name, f"expected a non-empty string or integer id, got {value!r:.60}")
        return str(value)

    def answers(self, name: str, *, optional: bool = False) -> list[str]:
        """A string or a list of strings (gold answers); empty strings are dropped."""
        if optional and not self.has(name):
            return []
        value = self.raw(name)
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise self.error(name, f"expected a string or a list of strings, got {value!r:.80}")
        return _dedup(v for v in items if v.strip())

    def boolean(self, name: str, default: bool) -> bool:
        if not self.has(name):
            return default
        value = self.obj[name]
        if not isinstance(value, bool):
            raise self.error(name, f"expected true or false, got {value!r:.40}")
        return value


def _dedup(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _iter_jsonl_numbered(path: Path) -> Iterator[tuple[int, tuple[str, dict[str, Any]]]]:
    try:
        for lineno, obj in iter_json_lines(path):
            yield lineno, (f"{path} line {lineno}", obj)
    except TraceError as exc:
        raise InputError(str(exc)) from None


def _iter_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for _, item in _iter_jsonl_numbered(path):
        yield item


def _read_text(path: Path) -> str:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{path}: no questions (the file is empty)")
    return text


def _read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} line {exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None


def _read_json_list(path: Path) -> list[tuple[str, Any]]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(
            f"{path}: expected a JSON list of question objects at the top level, "
            f"got {_type_name(data)}"
        )
    return [(f"{path} item [{i}]", obj) for i, obj in enumerate(data)]


def _objects(items: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for where, obj in items:
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object, got {_type_name(obj)}")
        yield where, obj


_CSV_HEADER_LINES = 10
"""How far down a csv file the header row (the first row with a "question" cell) may be."""


def _csv_header(path: Path, rows: Iterator[tuple[int, list[str]]]) -> tuple[int, list[str]]:
    """(line, lower-cased column names) of the first row with a "question" cell."""
    for line, row in rows:
        cells = [c.strip().lower() for c in row]
        if "question" in cells:
            return line, cells
        if line >= _CSV_HEADER_LINES:
            break
    raise InputError(
        f'{path}: no header row with a "question" column in the first {_CSV_HEADER_LINES} lines '
        "(expected a csv file whose header names its columns)"
    )


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line of the row, cells) for every row of a csv file, blank rows included."""
    reader = csv.reader(io.StringIO(_read_text(path), newline=""), strict=True)
    end = 0
    try:
        for row in reader:
            start, end = end + 1, reader.line_num
            yield start, row
    except csv.Error as exc:
        raise InputError(f"{path} line {reader.line_num}: invalid CSV ({exc})") from None


def _read_csv(
    path: Path, required: tuple[str, ...]
) -> Iterator[tuple[int, str, dict[str, str]]]:
    """(line, where, {column: cell}) for each non-blank row below the header.

    Rows above the header (a release's preamble) are skipped. A short row's missing cells read
    as ""; non-empty cells beyond the header's columns are an error (usually broken quoting).
    """
    rows = _csv_rows(path)
    header_line, header = _csv_header(path, rows)
    missing = [c for c in required if c not in header]
    if missing:
        names = ", ".join(f'"{c}"' for c in missing)
        raise InputError(
            f"{path} line {header_line}: column {names} "
            f"missing from the header (expected columns {_fmt_keys(required)}; "
            f"found {_fmt_keys(c for c in header if c)})"
        )
    for line, row in rows:
        if not any(c.strip() for c in row):
            continue
        if len(row) > len(header) and any(c.strip() for c in row[len(header):]):
            raise InputError(
                f"{path} line {line}: {len(row)} cells but the header on line {header_line} "
                f"has {len(header)} columns (check the quoting of this row)"
            )
        values = dict(zip(header, row))
        yield line, f"{path} line {line}", {c: values.get(c, "").strip() for c in header if c}


# --------------------------------------------------------------------------- formats
# Each parser yields (where, Question | None, skip_reason | None) for every record.

_Parsed = Iterator[tuple[str, Question | None, str | None]]

_BRANCHPOINT_KEYS = tuple(Question.model_fields)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "(record)"
        if err["type"] == "missing":
            parts.append(f'field "{name}" missing (expected {_fmt_keys(_BRANCHPOINT_KEYS)})')
            if name == "id":
                parts[-1] += '; for questions without ids use fmt "generic"'
        elif err["type"] == "extra_forbidden":
            parts.append(
                f'field "{name}" is not a Question field '
                f"(expected only {_fmt_keys(_BRANCHPOINT_KEYS)})"
            )
        else:
            parts.append(f'field "{name}": {err["msg"]} (got {err["input"]!r:.60})')
    return "; ".join(parts)


def _parse_branchpoint(path: Path) -> _Parsed:
    for where, obj in _iter_jsonl(path):
        try:
            q = Question.model_validate(obj)
        except ValidationError as exc:
            raise InputError(f"{where}: {_validation_message(exc)}") from None
        if q.answerable and q.category is not None:
            raise InputError(
                f'{where}: field "category" is {q.category!r} but the question is answerable '
                '(expected null for answerable questions)'
            )
        yield where, q, None


_MUSIQUE_KEYS = ("id", "question", "answer", "answer_aliases", "paragraphs")


def _parse_musique(path: Path) -> _Parsed:
    for where, obj in _objects(_read_json_list(path)):
        rec = _Rec(where, obj, _MUSIQUE_KEYS)
        qid, question = rec.ident("id"), rec.text("question")
        answerable = rec.boolean("answerable", True)
        gold = _dedup(rec.answers("answer") + rec.answers("answer_aliases", optional=True))
        paragraphs = rec.raw("paragraphs")
        if not isinstance(paragraphs, list):
            got = _type_name(paragraphs)
            raise rec.error("paragraphs", f"expected a list of paragraphs, got {got}")
        support = []
        for i, par in enumerate(paragraphs):
            name = f"paragraphs[{i}]"
            if not isinstance(par, dict):
                raise rec.error(name, f"expected an object, got {_type_name(par)}")
            for key in ("title", "is_supporting"):
                if key not in par:
                    raise rec.error(
                        f"{name}.{key}",
                        'missing (expected {"title", "paragraph_text", "is_supporting"})'
                    )
            if par["is_supporting"] is True:
                if not isinstance(par["title"], str):
                    got = _type_name(par["title"])
                    raise rec.error(f"{name}.title", f"expected a string, got {got}")
                support.append(par["title"])
        support = _dedup(support)
        if answerable:
            q = Question(
                id=qid, question=question, answerable=True, gold_answers=gold, support=support,
                support_group=support[0] if support else None,
            )
        else:
            q = Question(
                id=qid, question=question, answerable=False, category="AU", support=support,
                support_group=support[0] if support else None,
                note=f"MuSiQue unanswerable (supporting paragraphs removed); answer: {gold[0]}"
                if gold else "MuSiQue unanswerable (supporting paragraphs removed)",
            )
        yield where, q, None


_HOTPOT_KEYS = ("_id", "question", "answer", "type", "level", "supporting_facts")


def _parse_hotpotqa(path: Path) -> _Parsed:
    for where, obj in _objects(_read_json_list(path)):
        rec = _Rec(where, obj, _HOTPOT_KEYS)
        qid, question, gold = rec.ident("_id"), rec.text("question"), rec.answers("answer")
        facts = rec.raw("supporting_facts")
        if not isinstance(facts, list):
            got = _type_name(facts)
            raise rec.error("supporting_facts", f"expected a list of [title, sentence], got {got}")
        support = []
        for i, fact in enumerate(facts):
            if not isinstance(fact, list) or not fact or not isinstance(fact[0], str):
                raise rec.error(
                    f"supporting_facts[{i}]", f"expected [title, sentence index], got {fact!r:.60}"
                )
            support.append(fact[0])
        support = _dedup(support)
        parts = [str(obj[k]) for k in ("type", "level") if rec.has(k)]
        yield where, Question(
            id=qid, question=question, answerable=True, gold_answers=gold, support=support,
            support_group=support[0] if support else None,
            stratum="/".join(parts) if parts else None,
        ), None


def _parse_nq_open(path: Path) -> _Parsed:
    # ids follow the file's line numbers (blank lines count), so they stay stable.
    for lineno, (where, obj) in _iter_jsonl_numbered(path):
        rec = _Rec(where, obj, ("question", "answer"))
        yield where, Question(
            id=f"nq-{lineno}", question=rec.text("question"), answerable=True,
            gold_answers=rec.answers("answer"),
        ), None


def _parse_flashrag(path: Path) -> _Parsed:
    for where, obj in _iter_jsonl(path):
        rec = _Rec(where, obj, ("id", "question", "golden_answers"))
        yield where, Question(
            id=rec.ident("id"), question=rec.text("question"), answerable=True,
            gold_answers=rec.answers("golden_answers"),
        ), None


def _parse_r1searcher(path: Path) -> _Parsed:
    for where, obj in _iter_jsonl(path):
        rec = _Rec(where, obj, ("idx", "question", "answer"))
        yield where, Question(
            id=f"{path.stem}-{rec.ident('idx')}", question=rec.text("question"), answerable=True,
            gold_answers=rec.answers("answer"),
        ), None


_COCONOT_KEYS = ("id", "category", "subcategory", "prompt", "response")


def _coconot_record(where: str, obj: dict[str, Any]) -> tuple[_Rec, str, str, str | None]:
    rec = _Rec(where, obj, _COCONOT_KEYS)
    sub = rec.raw("subcategory")
    if not isinstance(sub, str):
        raise rec.error("subcategory", f"expected a string, got {_type_name(sub)}")
    response = obj.get("response")
    note = response if isinstance(response, str) and response.strip() else None
    return rec, rec.ident("id"), sub, note


def _parse_coconot(path: Path) -> _Parsed:
    for where, obj in _iter_jsonl(path):
        rec, qid, sub, note = _coconot_record(where, obj)
        category = COCONOT_SUBCATEGORIES.get(sub.strip().lower())
        if category is None:
            yield where, None, sub
            continue
        yield where, Question(
            id=qid, question=rec.text("prompt"), answerable=False, category=category,
            stratum=sub, note=note,
        ), None


def _parse_coconot_contrast(path: Path) -> _Parsed:
    for where, obj in _iter_jsonl(path):
        rec, qid, sub, note = _coconot_record(where, obj)
        yield where, Question(
            id=qid, question=rec.text("prompt"), answerable=True, gold_answers=[],
            stratum=sub, note=note,
        ), None


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


def _parse_falseqa(path: Path) -> _Parsed:
    for line, where, row in _read_csv(path, _FALSEQA_COLUMNS):
        rec = _Rec(where, row, _FALSEQA_COLUMNS)
        notes = falseqa_answers(row["answer"])
        question, answer = rec.text("question"), (notes[0] if notes else None)
        label = row["label"].removesuffix(".0")
        if label not in ("0", "1"):
            raise rec.error(
                "label", f"expected 0 (true premise) or 1 (false premise), got {label!r:.40}"
            )
        qid = f"falseqa-{path.stem}-{line}"
        if label == "1":
            q = Question(id=qid, question=question, answerable=False, category="FP", note=answer, notes=notes)
        else:  # a free-text answer, not a short gold answer: kept as a note
            q = Question(id=qid, question=question, answerable=True, gold_answers=[], note=answer, notes=notes)
        yield where, q, None


_SELFAWARE_KEYS = ("question_id", "question", "answer", "answerable", "source")


def _read_selfaware(path: Path) -> list[tuple[str, Any]]:
    data = _read_json(path)
    if isinstance(data, list):  # the bare list of examples
        return [(f"{path} example[{i}]", obj) for i, obj in enumerate(data)]
    if not isinstance(data, dict) or not isinstance(data.get("example"), list):
        got = (f"an object with keys {_fmt_keys(data)}" if isinstance(data, dict)
               else _type_name(data))
        raise InputError(
            f'{path}: expected {{"example": [question objects]}} at the top level, got {got}'
        )
    return [(f"{path} example[{i}]", obj) for i, obj in enumerate(data["example"])]


def _parse_selfaware(path: Path) -> _Parsed:
    for where, obj in _objects(_read_selfaware(path)):
        rec = _Rec(where, obj, _SELFAWARE_KEYS)
        qid, question = f"selfaware-{rec.ident('question_id')}", rec.text("question")
        answerable = rec.raw("answerable")
        if not isinstance(answerable, bool):
            raise rec.error("answerable", f"expected true or false, got {answerable!r:.40}")
        answers = rec.answers("answer", optional=True)
        source = obj.get("source")
        if source is not None and not isinstance(source, str):
            raise rec.error("source", f"expected a string or null, got {_type_name(source)}")
        if answerable:
            q = Question(id=qid, question=question, answerable=True, gold_answers=answers,
                         stratum=source or None)
        else:
            q = Question(id=qid, question=question, answerable=False, category="AU",
                         stratum=source or None, note="; ".join(answers) or None)
        yield where, q, None


_FRESHQA_COLUMNS = ("id", "question", "false_premise", "fact_type", "answer_0")
_FRESHQA_ANSWERS = tuple(f"answer_{i}" for i in range(10))


#: FreshQA's splits (its `split` column).
FRESHQA_SPLITS = ("TEST", "DEV")


def _parse_freshqa(path: Path, split: str | None = None) -> _Parsed:
    for _, where, row in _read_csv(path, _FRESHQA_COLUMNS):
        if split is not None:
            if "split" not in row:
                raise InputError(f'{where}: column "split" missing (needed for split {split})')
            if row["split"].upper() != split:
                yield where, None, f"split {row['split'] or '(empty)'}"
                continue
        rec = _Rec(where, row, _FRESHQA_COLUMNS)
        qid, question = f"freshqa-{rec.text('id')}", rec.text("question")
        premise = row["false_premise"].lower()
        if premise not in ("true", "false"):
            got = row["false_premise"]
            raise rec.error("false_premise", f"expected TRUE or FALSE, got {got!r:.40}")
        answers = _dedup(row[c] for c in _FRESHQA_ANSWERS if row.get(c))
        stratum = row["fact_type"] or None
        if premise == "true":
            q = Question(id=qid, question=question, answerable=False, category="FP",
                         stratum=stratum, note=row["answer_0"] or None)
        elif not answers:
            raise rec.error("answer_0", "empty (expected at least one answer in answer_0..answer_9 "
                                        "for a question without a false premise)")
        else:
            q = Question(id=qid, question=question, answerable=True, gold_answers=answers,
                         stratum=stratum)
        yield where, q, None


_GENERIC_REQUIRED = ("question", "answerable")
_GENERIC_KEYS = (*_GENERIC_REQUIRED, "category", "gold_answers", "stratum", "support_group", "id",
                 "support", "note")


def _optional_text(rec: _Rec, name: str) -> str | None:
    value = rec.obj.get(name)
    if value is not None and not isinstance(value, str):
        raise rec.error(name, f"expected a string or null, got {_type_name(value)} {value!r:.40}")
    return value or None


def _parse_generic(path: Path) -> _Parsed:
    ignored: Counter[str] = Counter()
    for lineno, (where, obj) in _iter_jsonl_numbered(path):
        rec = _Rec(where, obj, _GENERIC_REQUIRED)
        qid = rec.ident("id") if rec.has("id") else f"{path.stem}-{lineno}"
        question = rec.text("question")
        answerable = rec.raw("answerable")
        if not isinstance(answerable, bool):
            raise rec.error("answerable", f"expected true or false, got {answerable!r:.40}")
        category = obj.get("category")
        if category is not None and category not in UNANSWERABLE_CATEGORIES:
            raise rec.error("category", f'expected "AU", "FP", "UC" or null, got {category!r:.40}')
        if answerable and category is not None:
            raise rec.error("category", f"is {category!r} but the question is answerable "
                                        "(expected null for answerable questions)")
        support = obj.get("support") or []
        if not isinstance(support, list) or not all(isinstance(v, str) for v in support):
            raise rec.error("support", f"expected a list of passage ids, got {support!r:.60}")
        ignored.update(k for k in obj if k not in _GENERIC_KEYS)
        yield where, Question(
            id=qid, question=question, answerable=answerable, category=category,
            gold_answers=rec.answers("gold_answers", optional=True), support=support,
            stratum=_optional_text(rec, "stratum"),
            support_group=_optional_text(rec, "support_group"), note=_optional_text(rec, "note"),
        ), None
    if ignored:
        log.warning(
            "%s: ignored fields that the generic format does not read: %s (it reads %s)", path,
            ", ".join(f'"{k}" ({n} lines)' for k, n in ignored.most_common()),
            _fmt_keys(_GENERIC_KEYS),
        )


_PARSERS: dict[str, Callable[[Path], _Parsed]] = {
    "branchpoint": _parse_branchpoint,
    "musique": _parse_musique,
    "hotpotqa": _parse_hotpotqa,
    "nq_open": _parse_nq_open,
    "flashrag": _parse_flashrag,
    "r1searcher": _parse_r1searcher,
    "coconot": _parse_coconot,
    "coconot_contrast": _parse_coconot_contrast,
    "falseqa": _parse_falseqa,
    "selfaware": _parse_selfaware,
    "freshqa": _parse_freshqa,
    "generic": _parse_generic,
}
assert set(_PARSERS) == set(QUESTION_FORMATS)


# --------------------------------------------------------------------------- detection


def _first_record(path: Path) -> dict[str, Any] | None:
    """The first record of a JSON list or JSONL file (None when it has none)."""
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    if head.startswith(b"["):
        items = _read_json_list(path)
        return items[0][1] if items and isinstance(items[0][1], dict) else None
    for _, obj in _iter_jsonl(path):
        return obj
    return None


def _selfaware_object(path: Path) -> bool:
    """Whether a .json file holds one object with an "example" list (SelfAware's layout)."""
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
    if not head.startswith(b"{"):
        return False
    try:
        data = _read_json(path)
    except InputError:  # e.g. JSON lines in a .json file: told apart by their records later
        return False
    return isinstance(data, dict) and isinstance(data.get("example"), list)


def _undecidable(path: Path, why: str) -> InputError:
    return InputError(
        f"{path}: cannot tell the question format ({why}); pass fmt= one of "
        f"{', '.join(QUESTION_FORMATS)}"
    )


def detect_format(path: str | Path) -> str:
    """The format `load_questions(fmt="auto")` would use for this file."""
    path = Path(path)
    _check_file(path)
    name, suffix = path.name.lower(), path.suffix.lower()
    is_json, is_csv = suffix == ".json", suffix == ".csv"
    if "coconot_contrast" in name:
        return "coconot_contrast"
    if "coconot" in name:
        return "coconot"
    if "nq_open" in name:
        return "nq_open"
    if is_json and "musique" in name:
        return "musique"
    if is_json and "hotpot" in name:
        return "hotpotqa"
    if is_json and "selfaware" in name:
        return "selfaware"
    if is_csv and "falseqa" in name:
        return "falseqa"
    if is_csv and "freshqa" in name:
        return "freshqa"
    if is_csv:
        _, header = _csv_header(path, _csv_rows(path))
        if {"false_premise", "answer_0"} <= set(header):
            return "freshqa"
        if {"answer", "label"} <= set(header):
            return "falseqa"
        raise _undecidable(path, f"csv header has columns {_fmt_keys(c for c in header if c)}")
    if is_json and _selfaware_object(path):
        return "selfaware"
    first = _first_record(path)
    if first is None:
        raise InputError(f"{path}: no questions (the file is empty)")
    keys = set(first)
    if "answerable" in keys and "paragraphs" not in keys:  # ours (a missing field is named later)
        if is_json and "question_id" in keys and "source" in keys:  # a bare list of examples
            return "selfaware"
        if "id" in keys and keys <= set(_BRANCHPOINT_KEYS):
            return "branchpoint"
        return "generic"
    if {"question", "paragraphs"} <= keys and "answer" in keys:
        return "musique"
    if {"_id", "supporting_facts"} <= keys:
        return "hotpotqa"
    if "golden_answers" in keys:
        return "flashrag"
    if "idx" in keys and "question" in keys:
        return "r1searcher"
    if {"prompt", "subcategory"} <= keys:
        return "coconot"
    if "question" in keys and isinstance(first.get("answer"), list):
        return "nq_open"
    raise _undecidable(path, f"first record has keys {_fmt_keys(sorted(keys))}")


def _check_file(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if not path.is_file():
        raise InputError(f"{path}: not a file (expected a question file)")


# --------------------------------------------------------------------------- public API


def _resolve(path: str | Path, fmt: str) -> tuple[Path, str]:
    if fmt != "auto" and fmt not in QUESTION_FORMATS:
        raise InputError(
            f'unknown question format "{fmt}" '
            f'(expected "auto" or one of {", ".join(QUESTION_FORMATS)})'
        )
    if str(path) == DEMO:
        if fmt not in ("auto", "branchpoint"):
            raise InputError(f'the demo set is in format "branchpoint", not "{fmt}"')
        return demo_questions_path(), "branchpoint"
    path = Path(path)
    _check_file(path)
    return path, (detect_format(path) if fmt == "auto" else fmt)


def _check_categories(categories: list[str] | None) -> set[str] | None:
    if categories is None:
        return None
    if isinstance(categories, str):
        categories = [categories]
    bad = [c for c in categories if c not in CATEGORY_FILTERS]
    if bad:
        raise InputError(
            f"categories: unknown value(s) {', '.join(map(repr, bad))} "
            f"(expected any of {', '.join(CATEGORY_FILTERS)})"
        )
    if not categories:
        raise InputError(f"categories: empty list (expected any of {', '.join(CATEGORY_FILTERS)})")
    return set(categories)


def _category_key(q: Question) -> str | None:
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
    path, fmt = _resolve(path, fmt)
    parse = _PARSERS[fmt]
    if split is not None:
        if fmt != "freshqa":
            raise InputError(f"{path}: split {split!r} applies to FreshQA files only (this file is format {fmt})")
        if split.upper() not in FRESHQA_SPLITS:
            raise InputError(f"split: expected one of {', '.join(FRESHQA_SPLITS)}, got {split!r}")
        parse = functools.partial(_parse_freshqa, split=split.upper())

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
        if q.id in first_seen:
            raise InputError(
                f'{where}: field "id": duplicate id "{q.id}" (first seen at {first_seen[q.id]})'
            )
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
            "%s: skipped %d out-of-scope records (%s)", path, sum(skipped.values()),
            ", ".join(f"{k}: {v}" for k, v in skipped.most_common()),
        )
    return LoadReport(
        path=path, fmt=fmt, questions=questions, records=records, skipped=dict(skipped),
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
    fmt: one of `QUESTION_FORMATS`, or "auto" (by file name, then by the first record's keys).
    categories: keep only these kinds: "answerable" and/or "AU", "FP", "UC".
    limit: keep the first N questions after the categories filter (the whole file is still
    checked).

    Raises InputError (file, line or item, field, what was expected) for a missing or empty
    file, bad JSON, missing or mistyped fields, duplicate ids, an unknown format, or when no
    question is left. Out-of-scope records (CoCoNot's non-QA subcategories) are skipped; use
    `load_questions_with_report` to see how many.
    """
    return load_questions_with_report(path, fmt, limit=limit, categories=categories, split=split).questions


def balanced_sample(
    questions: list[Question], n_answerable: int, n_unanswerable: int, seed: int
) -> list[Question]:
    """A seeded sample of answerable and unanswerable questions, in the input order.

    Unanswerable questions are drawn round-robin over AU, FP, UC, so their counts differ by at
    most one unless a category runs out, in which case the others fill in (and unanswerable
    questions with no category only when all three have run out). The same questions, counts
    and seed always give the same sample. Raises InputError when the pool is too small.
    """
    for name, n in (("n_answerable", n_answerable), ("n_unanswerable", n_unanswerable)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"{name}: expected a non-negative integer, got {n!r}")
    rng = random.Random(seed)
    answerable = [i for i, q in enumerate(questions) if q.answerable]
    groups: dict[str | None, list[int]] = {c: [] for c in (*UNANSWERABLE_CATEGORIES, None)}
    for i, q in enumerate(questions):
        if not q.answerable:
            groups[q.category].append(i)
    n_unans_pool = sum(len(g) for g in groups.values())
    if n_answerable > len(answerable) or n_unanswerable > n_unans_pool:
        raise InputError(
            f"balanced_sample: asked for {n_answerable} answerable and {n_unanswerable} "
            f"unanswerable questions, but the set has {len(answerable)} answerable and "
            f"{n_unans_pool} unanswerable"
        )
    chosen = rng.sample(answerable, n_answerable)
    queues = []
    for key in UNANSWERABLE_CATEGORIES:
        pool = groups[key][:]
        rng.shuffle(pool)
        queues.append(pool)
    need = n_unanswerable
    while need and any(queues):
        for pool in queues:
            if pool and need:
                chosen.append(pool.pop())
                need -= 1
    if need:  # AU, FP and UC ran out: questions with no category fill the rest
        chosen.extend(rng.sample(groups[None], need))
    return [questions[i] for i in sorted(chosen)]
