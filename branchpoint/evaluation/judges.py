"""Judges: functions that read one `ExecutionRecord` and return `Judgment`s, found by name.

A judge is a plain function registered with `@judge("name")`; `get_judge(name)` finds it.
Two judges ship here:

- `rule` (offline default): SQuAD-style answer matching plus a pattern-based abstention
  detector. Every record gets one judgment of kind `answer` (CORRECT / INCORRECT /
  NOT_ATTEMPTED) and one of kind `abstention` (ABSTAINED / ANSWERED). Records with status
  `malformed` or `length` are always INCORRECT and ANSWERED: a broken or truncated output counts
  as a wrong answer and as a failed abstention. Records with status `incomplete` are judged like
  any other; the metrics exclude them.
- `given`: trusts labels already in the trace (from a human, another framework, or an earlier
  judge) and checks them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import NamedTuple

from branchpoint.errors import InputError
from branchpoint.traces import ExecutionRecord, Judgment

JudgeFn = Callable[[ExecutionRecord], list[Judgment]]

ANSWER_LABELS: tuple[str, ...] = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
ABSTENTION_LABELS: tuple[str, ...] = ("ABSTAINED", "ANSWERED")
LABELS_BY_KIND: dict[str, tuple[str, ...]] = {
    "answer": ANSWER_LABELS,
    "abstention": ABSTENTION_LABELS,
}

# Statuses whose output is broken (unparseable action) or cut off (token limit).
BROKEN_STATUSES: frozenset[str] = frozenset({"malformed", "length"})

_REGISTRY: dict[str, JudgeFn] = {}  # filled only by @judge at import time


def judge(name: str) -> Callable[[JudgeFn], JudgeFn]:
    """Register a judge function under `name` (decorator)."""

    def register(fn: JudgeFn) -> JudgeFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise InputError(f'judge "{name}" is already registered')
        _REGISTRY[name] = fn
        return fn

    return register


def judge_names() -> list[str]:
    """Names of all registered judges, sorted."""
    return sorted(_REGISTRY)


def get_judge(name: str) -> JudgeFn:
    """The judge registered under `name`; InputError listing the known names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(
            f'unknown judge "{name}" (known judges: {", ".join(judge_names())})'
        ) from None


def judge_records(records: Iterable[ExecutionRecord], judge_name: str) -> list[ExecutionRecord]:
    """Copies of `records` with the judge's judgments added, replacing earlier ones of that judge."""
    fn = get_judge(judge_name)
    judged = []
    for record in records:
        new = fn(record)
        kept = [j for j in record.judgments if j.judge != judge_name]
        copy = record.model_copy(deep=True)
        copy.judgments = [j.model_copy() for j in kept] + new
        judged.append(copy)
    return judged


# --------------------------------------------------------------------------------------------
# Answer normalisation (SQuAD)
# --------------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles a/an/the, collapse spaces.

    Punctuation is every Unicode punctuation character (a superset of `string.punctuation`, so
    curly quotes and dashes go too); like SQuAD, it is deleted, not replaced by a space.
    """
    text = text.lower()
    text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def contained_gold(answer: str | None, gold_answers: Iterable[str]) -> str | None:
    """The first gold answer whose whole normalised form occurs in the answer on word boundaries.

    Gold "Rome" matches "It is Rome." but not "Romeo". Gold answers that normalise to nothing
    are ignored. Returns None when no gold answer is contained.
    """
    if not answer:
        return None
    padded = f" {normalize_answer(answer)} "
    for gold in gold_answers:
        norm = normalize_answer(gold)
        if norm and f" {norm} " in padded:
            return gold
    return None


# --------------------------------------------------------------------------------------------
# Abstention detector: every pattern lives here
# --------------------------------------------------------------------------------------------


class AbstentionPattern(NamedTuple):
    """One way of abstaining: a name (stored in `Judgment.raw`), its family, and a regex."""

    name: str
    family: str  # "unknown" | "clarification" | "premise"
    regex: re.Pattern[str]


def _p(name: str, family: str, pattern: str) -> AbstentionPattern:
    return AbstentionPattern(name, family, re.compile(pattern))


# Matched against the lowercased answer with curly apostrophes straightened; the first pattern
# that matches, in this order, names the abstention. The premise family is deliberately broad
# (any "never", "did not", "was not" counts): recall over precision, as in the seed work. On an
# answerable question it only matters when no gold answer is contained in the answer.
ABSTENTION_PATTERNS: tuple[AbstentionPattern, ...] = (
    # The answer is not known or not knowable.
    _p("dont_know", "unknown", r"\bi (?:do not|don't|dont) know\b"),
    _p("unknown", "unknown", r"\bunknown\b"),
    _p("cannot_be_determined", "unknown", r"\b(?:cannot|can't|can not) be determined\b"),
    _p("no_reliable_information", "unknown", r"\bno reliable information\b"),
    _p("not_enough_information", "unknown", r"\bnot enough information\b"),
    _p("impossible_to_know", "unknown", r"\bimpossible to know\b"),
    _p("no_one_knows", "unknown", r"\b(?:no one|no-one|nobody) knows\b"),
    _p("unanswerable", "unknown", r"\bunanswerable\b"),
    # The question is underspecified: the model asks for clarification.
    _p("could_you_clarify", "clarification", r"\bcould you (?:please )?clarify\b"),
    _p("which_do_you_mean", "clarification", r"\bwhich\b[^.?!]*\bdo you mean\b"),
    _p("please_specify", "clarification", r"\bplease specify\b"),
    _p("more_context", "clarification", r"\bmore context\b"),
    # The question rests on a false premise: the model corrects it.
    _p("false_premise", "premise", r"\bfalse premise\b"),
    _p("the_premise", "premise", r"\bthe premise\b"),
    _p("actually", "premise", r"\bactually,"),
    _p("there_is_no", "premise", r"\bthere (?:is|was|are|were) no\b"),
    _p("never", "premise", r"\bnever\b"),
    _p("did_not", "premise", r"\b(?:did not|didn't)\b"),
    _p("was_not", "premise", r"\b(?:was not|wasn't)\b"),
    _p("is_not_true", "premise", r"\b(?:is not|isn't) true\b"),
    _p("incorrect_assumption", "premise", r"\bincorrect assumption\b"),
)


def detect_abstention(answer: str | None) -> str | None:
    """Name of the first abstention pattern found in the answer, or None."""
    if not answer:
        return None
    text = answer.lower().replace("\u2019", "'").replace("\u2018", "'")
    for pattern in ABSTENTION_PATTERNS:
        if pattern.regex.search(text):
            return pattern.name
    return None


# --------------------------------------------------------------------------------------------
# The judges
# --------------------------------------------------------------------------------------------


def _is_empty(answer: str | None) -> bool:
    return answer is None or not answer.strip()


@judge("rule")
def rule_judge(record: ExecutionRecord) -> list[Judgment]:
    """Offline judge: SQuAD containment for `answer`, pattern detector for `abstention`."""
    return [_rule_answer(record), _rule_abstention(record)]


def _rule_answer(record: ExecutionRecord) -> Judgment:
    """CORRECT if a gold answer is contained; NOT_ATTEMPTED if empty or abstaining; else INCORRECT."""
    answer = record.final_answer
    if record.status in BROKEN_STATUSES:
        return Judgment(judge="rule", kind="answer", label="INCORRECT", raw=f"status={record.status}")
    if _is_empty(answer):
        return Judgment(judge="rule", kind="answer", label="NOT_ATTEMPTED", raw="empty")
    gold = contained_gold(answer, record.gold_answers)
    if gold is not None:
        return Judgment(judge="rule", kind="answer", label="CORRECT", raw=f"gold={gold}")
    pattern = detect_abstention(answer)
    if pattern is not None:
        return Judgment(judge="rule", kind="answer", label="NOT_ATTEMPTED", raw=pattern)
    return Judgment(judge="rule", kind="answer", label="INCORRECT", raw=None)


def _rule_abstention(record: ExecutionRecord) -> Judgment:
    """ABSTAINED if the detector fires (or the answer is empty with status ok), else ANSWERED."""
    answer = record.final_answer
    if record.status in BROKEN_STATUSES:
        return Judgment(
            judge="rule", kind="abstention", label="ANSWERED", raw=f"status={record.status}"
        )
    if _is_empty(answer):
        label = "ABSTAINED" if record.status == "ok" else "ANSWERED"
        return Judgment(judge="rule", kind="abstention", label=label, raw="empty")
    pattern = detect_abstention(answer)
    if pattern is not None:
        return Judgment(judge="rule", kind="abstention", label="ABSTAINED", raw=pattern)
    return Judgment(judge="rule", kind="abstention", label="ANSWERED", raw=None)


def needed_kind(record: ExecutionRecord) -> str:
    """The judgment kind that decides correctness: `answer` if answerable, else `abstention`."""
    return "answer" if record.answerable else "abstention"


def check_label(record: ExecutionRecord, judgment: Judgment) -> str:
    """The judgment's label, upper-cased; InputError if it is not valid for its kind."""
    label = judgment.label.strip().upper()
    valid = LABELS_BY_KIND.get(judgment.kind)
    if valid is not None and label not in valid:
        raise InputError(
            f'execution {record.execution_id}: judge "{judgment.judge}" gave {judgment.kind} '
            f'label "{judgment.label}" (expected one of {", ".join(valid)})'
        )
    return label


@judge("given")
def given_judge(record: ExecutionRecord) -> list[Judgment]:
    """Use the answer/abstention labels already in the trace (the last one of each kind).

    Labels are checked (case-insensitive, stored upper-case). The kind that decides correctness
    (`answer` for answerable questions, `abstention` otherwise) must be present, except on
    `incomplete` records, which the metrics exclude. Earlier `given` judgments are ignored.
    """
    latest: dict[str, Judgment] = {}
    for j in record.judgments:
        if j.judge != "given" and j.kind in LABELS_BY_KIND:
            latest[j.kind] = j
    out = [
        Judgment(
            judge="given", kind=kind, label=check_label(record, j), raw=f"from={j.judge}"
        )
        for kind, j in sorted(latest.items())
    ]
    kind = needed_kind(record)
    if kind not in latest and record.status != "incomplete":
        raise InputError(
            f"execution {record.execution_id}: no {kind} judgment in the trace "
            f'(judge "given" needs one for every {"answerable" if record.answerable else "unanswerable"} '
            f"question; labels: {', '.join(LABELS_BY_KIND[kind])})"
        )
    return out
