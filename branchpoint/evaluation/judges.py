"""Judges: functions that read one `ExecutionRecord` and return `Judgment`s, found by name.

A judge is registered (kind `judge` of `branchpoint.registry`) with `@judge("name")`, as one of:

- a plain function `record -> list[Judgment]` (no settings);
- a factory `fn(settings, run) -> BatchJudge` registered with `settings=SomeSettingsModel`: the
  judge's settings (a pydantic model, e.g. the LLM judges' `model: {...}`) come from the spec's
  `evaluation` section or the command line, `run` says where its cache lives (`JudgeRun`).

`build_judge(name, settings, run)` builds either into a `BatchJudge`; names may also be
`package.module:attr`. Two judges are registered here, the LLM judges (`llm`, `llm-answer`,
factories over a chat model) in `llm_judges`:

- `rule` (offline default): SQuAD-style answer matching plus a pattern-based abstention
  detector. Every record gets one judgment of kind `answer` (CORRECT / INCORRECT /
  NOT_ATTEMPTED) and one of kind `abstention` (ABSTAINED / ANSWERED). Records with status
  `malformed` or `length` are always INCORRECT and ANSWERED: a broken or truncated output counts
  as a wrong answer and as a failed abstention. Records with status `incomplete` are judged like
  any other; the metrics exclude them. Every record also gets one `evidence` judgment per
  distinct retrieved document (POSITIVE / NEGATIVE, from a lexical cue detector; crude, an
  offline stand-in for the LLM evidence judge), answerable ones too: the study reports the
  negative-evidence share for both.
- `given`: trusts labels already in the trace (from a human, another framework, or an earlier
  judge) and checks them.

Every kind also accepts the label `UNPARSEABLE`: an LLM judge whose output could not be parsed
after its retries records it, and the metrics leave such items out and count them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from branchpoint.defaults import DEFAULT_JUDGE, RULE_JUDGE
from branchpoint.errors import InputError
from branchpoint.evaluation.abstention_rules import (
    ABSTENTION_PATTERNS,
    AbstentionPattern,
    classify_abstention,
    detect_abstention,
)
from branchpoint.evaluation.answer_normalization import contained_gold, normalize_answer
from branchpoint.evaluation.gold_matching import GoldMatch, match_gold
from branchpoint.registry import REGISTRY
from branchpoint.registry_kinds import Kind
from branchpoint.traces import (
    ExecutionRecord,
    Judgment,
    RetrievedDoc,
)

# The rules live in `abstention_rules`, `gold_matching` and `answer_normalization`; these names
# are re-exported from here as before.
__all__ = [
    "ABSTENTION_PATTERNS",
    "DEFAULT_JUDGE",
    "RULE_JUDGE",
    "AbstentionPattern",
    "classify_abstention",
    "contained_gold",
    "detect_abstention",
    "match_gold",
    "normalize_answer",
]

JudgeFn = Callable[[ExecutionRecord], list[Judgment]]
"""A judge as a function: one record in, its judgments out (register it with `@judge(name)`)."""

ANSWER_LABELS: tuple[str, ...] = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
"""The labels of an `answer` judgment."""
ABSTENTION_LABELS: tuple[str, ...] = ("ABSTAINED", "ANSWERED")
"""The labels of an `abstention` judgment."""
EVIDENCE_LABELS: tuple[str, ...] = ("POSITIVE", "NEGATIVE")
"""The labels of an `evidence` judgment of one retrieved document."""
UNPARSEABLE = "UNPARSEABLE"
"""A judge output that could not be parsed (after retries): excluded from metrics, counted."""
#: The labels of the per-execution kinds (evidence judgments are per retrieved document).
LABELS_BY_KIND: dict[str, tuple[str, ...]] = {
    "answer": ANSWER_LABELS,
    "abstention": ABSTENTION_LABELS,
}
ALL_LABELS_BY_KIND: dict[str, tuple[str, ...]] = {**LABELS_BY_KIND, "evidence": EVIDENCE_LABELS}

# Statuses whose output is broken (unparseable action) or cut off (token limit).
BROKEN_STATUSES: frozenset[str] = frozenset({"malformed", "length"})


#: The typed handle of the registry kind: a judge function `record -> list[Judgment]`, or (one
#: registered with settings) a factory `fn(settings, run) -> BatchJudge`.
JUDGE: Kind[Callable[..., Any]] = Kind("judge")


def judge(name: str, *, settings: type[BaseModel] | None = None) -> Callable[[Any], Any]:
    """Register a judge under `name` (decorator): a function `record -> list[Judgment]`, or, with
    `settings` (the pydantic model of its settings), a factory `fn(settings, run) -> BatchJudge`."""
    return REGISTRY.register("judge", name, settings=settings)


class BatchJudge(Protocol):
    """A judge object (e.g. an LLM judge): a `name` and judgments for many records at once."""

    @property
    def name(self) -> str:
        """The judge's name, stamped on its judgments."""
        ...

    def judge_many(self, records: Sequence[ExecutionRecord]) -> list[list[Judgment]]:
        """One list of judgments per record, in order."""
        ...


@dataclass(frozen=True)
class JudgeRun:
    """What a judge factory gets besides its settings: where its judgment cache lives (None: in
    memory only), whether to show progress, and the response cache its model calls go through
    (`--cache DIR`, shared across runs; None: the settings' own `model.response_cache`, if any)."""

    cache_path: Path | None = None
    progress: bool = False
    response_cache: str | None = None


@dataclass(frozen=True)
class FunctionJudge:
    """A `BatchJudge` over a registered per-record judge function."""

    name: str
    fn: JudgeFn

    def judge_many(self, records: Sequence[ExecutionRecord]) -> list[list[Judgment]]:
        """`fn` applied to each record."""
        return [self.fn(record) for record in records]


def judge_settings_model(name: str, search_paths: Sequence[str | Path] = ()) -> type[BaseModel] | None:
    """The settings model of the judge `name` (None: a plain function that takes no settings)."""
    return REGISTRY.get("judge", name, search_paths).settings_model


def check_judge(
    name: str, settings: Mapping[str, Any] | None = None, search_paths: Sequence[str | Path] = ()
) -> BaseModel | None:
    """The judge's settings validated (None for a judge without settings), opening nothing:
    an unknown name lists the known ones, bad settings name the key (`registry.check_settings`)."""
    return REGISTRY.check_settings("judge", name, settings, search_paths)


def build_judge(
    name: str,
    settings: Mapping[str, Any] | None = None,
    run: JudgeRun = JudgeRun(),
    search_paths: Sequence[str | Path] = (),
) -> BatchJudge:
    """The judge `name` (registered, or `package.module:attr`) built with its settings: what a
    spec's `evaluation: {judge: NAME, ...settings}` and `evaluate --judge NAME` both name."""
    entry = REGISTRY.get(JUDGE, name, search_paths)
    parsed = check_judge(name, settings, search_paths)
    if parsed is None:
        return FunctionJudge(entry.name, entry.obj)
    built: BatchJudge = entry.obj(parsed, run)
    return built


def judge_records(records: Iterable[ExecutionRecord], judge: str | BatchJudge) -> list[ExecutionRecord]:
    """Copies of `records` with the judge's judgments added, replacing earlier ones of that judge.

    `judge` is a judge name (one that takes no settings, e.g. `rule`, `given`) or a judge object
    (`build_judge`, `LLMJudge`), whose `judge_many` sees every record at once (to batch,
    deduplicate and cache model calls).
    """
    records = list(records)
    judge_obj = build_judge(judge) if isinstance(judge, str) else judge
    name = judge_obj.name
    new_judgments = judge_obj.judge_many(records)
    judged = []
    for record, new in zip(records, new_judgments, strict=True):
        kept = [j for j in record.judgments if j.judge != name]
        copy = record.model_copy(deep=True)
        copy.judgments = [j.model_copy() for j in kept] + new
        judged.append(copy)
    return judged


# --------------------------------------------------------------------------------------------
# The judges
# --------------------------------------------------------------------------------------------


def _is_empty(answer: str | None) -> bool:
    return answer is None or not answer.strip()


# Lexical cues that a document signals uncertainty, contradiction or unknowability (the rule
# judge's evidence labels): matched against the lowercased document text, first match wins.
_EVIDENCE_UNKNOWN = (
    "dont_know",
    "unknown",
    "cannot_be_determined",
    "no_reliable_information",
    "not_enough_information",
    "impossible_to_know",
    "no_one_knows",
    "unanswerable",
)
_p = AbstentionPattern.compile
NEGATIVE_EVIDENCE_PATTERNS: tuple[AbstentionPattern, ...] = tuple(
    p for p in ABSTENTION_PATTERNS if p.name in _EVIDENCE_UNKNOWN
) + (
    _p("no_record", "negative", r"\bno (?:surviving |known |reliable |written )?records?\b"),
    _p("not_known", "negative", r"\b(?:not|never been) (?:known|recorded|documented|established)\b"),
    _p("disputed", "negative", r"\b(?:disputed|contested|unclear|uncertain|unverified|unconfirmed)\b"),
    _p("no_evidence", "negative", r"\bno (?:evidence|consensus|agreement)\b"),
    _p("mystery", "negative", r"\b(?:mystery|remains unknown|lost to history)\b"),
    _p("misconception", "negative", r"\b(?:myth|misconception|apocryphal|contrary to popular)\b"),
    _p("never_happened", "negative", r"\b(?:never|did not|didn't) (?:happen|exist|occur|take place)\b"),
    _p("ambiguous", "negative", r"\b(?:ambiguous|may refer to|can refer to|several (?:people|places|things))\b"),
)


def detect_negative_evidence(text: str | None) -> str | None:
    """Name of the first negative-evidence cue in a document's text, or None."""
    if not text:
        return None
    lowered = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    for pattern in NEGATIVE_EVIDENCE_PATTERNS:
        if pattern.regex.search(lowered):
            return pattern.name
    return None


def retrieved_documents(record: ExecutionRecord) -> list[RetrievedDoc]:
    """The distinct documents (by doc_id, first occurrence) the record's search steps retrieved."""
    seen: dict[str, RetrievedDoc] = {}
    for step in record.steps:
        if step.kind == "search":
            for doc in step.retrieved:
                seen.setdefault(doc.doc_id, doc)
    return list(seen.values())


def evidence_documents(record: ExecutionRecord) -> list[RetrievedDoc]:
    """The documents an evidence judge labels: those of non-incomplete records (answerable or not)."""
    if record.status == "incomplete":
        return []
    return retrieved_documents(record)


@judge(RULE_JUDGE)
def rule_judge(record: ExecutionRecord) -> list[Judgment]:
    """Offline judge: gold matching for `answer`, the question-aware detector for `abstention`
    (`abstention_rules`), and a lexical cue detector for the `evidence` of every retrieved document
    (NEGATIVE when a cue in `NEGATIVE_EVIDENCE_PATTERNS` occurs in the document, else POSITIVE)."""
    return [_rule_answer(record), _rule_abstention(record), *_rule_evidence(record)]


def _rule_evidence(record: ExecutionRecord) -> list[Judgment]:
    out = []
    for doc in evidence_documents(record):
        cue = detect_negative_evidence(f"{doc.title or ''}\n{doc.text}")
        out.append(
            Judgment(
                judge=RULE_JUDGE, kind="evidence", label="NEGATIVE" if cue else "POSITIVE", raw=cue, doc_id=doc.doc_id
            )
        )
    return out


def _abstention_reason(record: ExecutionRecord, gold_given: bool) -> str | None:
    return classify_abstention(
        record.final_answer,
        record.question,
        category=record.category,
        answerable=record.answerable,
        gold_given=gold_given,
    )


def _gold_raw(match: GoldMatch) -> str:
    gold, how = match
    return f"gold={gold}" if how == "contained" else f"gold={gold};match={how}"


def _rule_answer(record: ExecutionRecord) -> Judgment:
    """CORRECT if the response gives a gold answer (`match_gold`); NOT_ATTEMPTED if empty or
    abstaining; else INCORRECT."""
    answer = record.final_answer
    if record.status in BROKEN_STATUSES:
        return Judgment(judge=RULE_JUDGE, kind="answer", label="INCORRECT", raw=f"status={record.status}")
    if _is_empty(answer):
        return Judgment(judge=RULE_JUDGE, kind="answer", label="NOT_ATTEMPTED", raw="empty")
    match = match_gold(answer, record.gold_answers, record.question)
    if match is not None:
        return Judgment(judge=RULE_JUDGE, kind="answer", label="CORRECT", raw=_gold_raw(match))
    reason = _abstention_reason(record, gold_given=False)
    if reason is not None:
        return Judgment(judge=RULE_JUDGE, kind="answer", label="NOT_ATTEMPTED", raw=reason)
    return Judgment(judge=RULE_JUDGE, kind="answer", label="INCORRECT", raw=None)


def _rule_abstention(record: ExecutionRecord) -> Judgment:
    """ABSTAINED if `classify_abstention` finds a reason (or the answer is empty with status
    ok), else ANSWERED. The question, its category and (answerable questions) whether the gold
    answer is given decide whether a negation corrects a premise or answers."""
    answer = record.final_answer
    if record.status in BROKEN_STATUSES:
        return Judgment(judge=RULE_JUDGE, kind="abstention", label="ANSWERED", raw=f"status={record.status}")
    if _is_empty(answer):
        label = "ABSTAINED" if record.status == "ok" else "ANSWERED"
        return Judgment(judge=RULE_JUDGE, kind="abstention", label=label, raw="empty")
    gold_given = record.answerable and match_gold(answer, record.gold_answers, record.question) is not None
    reason = _abstention_reason(record, gold_given=gold_given)
    if reason is not None:
        return Judgment(judge=RULE_JUDGE, kind="abstention", label="ABSTAINED", raw=reason)
    return Judgment(judge=RULE_JUDGE, kind="abstention", label="ANSWERED", raw=None)


def needed_kind(record: ExecutionRecord) -> str:
    """The judgment kind that decides correctness: `answer` if answerable, else `abstention`."""
    return "answer" if record.answerable else "abstention"


def check_label(record: ExecutionRecord, judgment: Judgment) -> str:
    """The judgment's label, upper-cased; InputError if it is not valid for its kind.

    `UNPARSEABLE` is valid for every kind (an LLM judge's output that could not be parsed).
    """
    label = judgment.label.strip().upper()
    valid = ALL_LABELS_BY_KIND.get(judgment.kind)
    if valid is not None and label not in valid and label != UNPARSEABLE:
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
    Evidence judgments are copied from the last judge that gave any (one per document).
    """
    latest: dict[str, Judgment] = {}
    evidence_judge: str | None = None
    for j in record.judgments:
        if j.judge != "given" and j.kind in LABELS_BY_KIND:
            latest[j.kind] = j
        elif j.judge != "given" and j.kind == "evidence":
            evidence_judge = j.judge
    out = [
        Judgment(judge="given", kind=kind, label=check_label(record, j), raw=f"from={j.judge}")
        for kind, j in sorted(latest.items())
    ]
    docs: dict[str, Judgment] = {}
    for j in record.judgments:
        if j.judge == evidence_judge and j.kind == "evidence":
            docs[str(getattr(j, "doc_id", None))] = j
    out += [
        Judgment(
            judge="given",
            kind="evidence",
            label=check_label(record, j),
            raw=f"from={j.judge}",
            doc_id=getattr(j, "doc_id", None),
        )
        for j in docs.values()
    ]
    kind = needed_kind(record)
    if kind not in latest and record.status != "incomplete":
        raise InputError(
            f"execution {record.execution_id}: no {kind} judgment in the trace "
            f'(judge "given" needs one for every {"answerable" if record.answerable else "unanswerable"} '
            f"question; labels: {', '.join(LABELS_BY_KIND[kind])})"
        )
    return out
