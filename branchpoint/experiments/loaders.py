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

``fmt="auto"`` decides by the file name first ("coconot_contrast", "coconot", "nq_open";
"musique" / "hotpot" only for ``.json`` files, since R1-Searcher ships ``musique_500.jsonl``),
then by the keys of the first record. The contrast set cannot be told from CoCoNot by its keys:
a renamed contrast file needs ``fmt="coconot_contrast"``.

Every error is an `InputError` naming the file, the line (jsonl, 1-based) or item (JSON list,
``item [i]`` 0-based), the field and what was expected.
"""

from __future__ import annotations

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


def _read_json_list(path: Path) -> list[tuple[str, Any]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{path}: no questions (the file is empty)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} line {exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
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


_PARSERS: dict[str, Callable[[Path], _Parsed]] = {
    "branchpoint": _parse_branchpoint,
    "musique": _parse_musique,
    "hotpotqa": _parse_hotpotqa,
    "nq_open": _parse_nq_open,
    "flashrag": _parse_flashrag,
    "r1searcher": _parse_r1searcher,
    "coconot": _parse_coconot,
    "coconot_contrast": _parse_coconot_contrast,
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


def _undecidable(path: Path, why: str) -> InputError:
    return InputError(
        f"{path}: cannot tell the question format ({why}); pass fmt= one of "
        f"{', '.join(QUESTION_FORMATS)}"
    )


def detect_format(path: str | Path) -> str:
    """The format `load_questions(fmt="auto")` would use for this file."""
    path = Path(path)
    _check_file(path)
    name, is_json = path.name.lower(), path.suffix.lower() == ".json"
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
    first = _first_record(path)
    if first is None:
        raise InputError(f"{path}: no questions (the file is empty)")
    keys = set(first)
    if "answerable" in keys and "paragraphs" not in keys:  # ours (a missing field is named later)
        return "branchpoint"
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
) -> LoadReport:
    """Like `load_questions`, also saying how many records were skipped or filtered out."""
    wanted = _check_categories(categories)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit: expected a positive integer or None, got {limit!r}")
    path, fmt = _resolve(path, fmt)

    questions: list[Question] = []
    first_seen: dict[str, str] = {}
    skipped: Counter[str] = Counter()
    present: Counter[str] = Counter()
    records = filtered = 0
    for where, q, skip in _PARSERS[fmt](path):
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
    return load_questions_with_report(path, fmt, limit=limit, categories=categories).questions


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
