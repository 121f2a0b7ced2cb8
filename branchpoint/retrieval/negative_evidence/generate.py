"""Generating negative-evidence documents: one model call per (question, angle), one retry with a
format reminder when the reply does not parse or copies the prompt's example, a fact-check call
where the question's file says what is true (a document contradicting it is dropped), documents
reused from an earlier run."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from branchpoint.errors import InputError
from branchpoint.models.call import ModelClient
from branchpoint.retrieval.negative_evidence.checks import (
    CONTRADICTS_FACTS,
    COPIES_EXAMPLE,
    check_messages,
    check_prompt,
    copies_example,
    known_facts,
    parse_verdict,
)
from branchpoint.retrieval.negative_evidence.documents import (
    ANGLES,
    NegativeDoc,
    QuestionLike,
    negative_doc_id,
)
from branchpoint.retrieval.negative_evidence.prompts import (
    chat_messages,
    completion_prompt,
    parse_generated,
)

log = logging.getLogger(__name__)


@dataclass
class GenerationStats:
    """What generation did: documents asked for, made, reused, retried and skipped, and its cost."""

    questions: int = 0
    requested: int = 0
    generated: int = 0
    reused: int = 0
    retried: int = 0
    skipped: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    skipped_ids: list[str] = field(default_factory=list)
    #: Documents dropped by a check (`checks`), by reason: their ids.
    dropped: dict[str, list[str]] = field(default_factory=dict)
    fact_checked: int = 0
    #: Fact checks whose reply said neither CONTRADICTS nor CONSISTENT (the document is kept).
    fact_check_unclear: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Outcome:
    doc: NegativeDoc | None
    calls: int
    input_tokens: int
    output_tokens: int
    dropped: str | None = None  # the check that dropped the document
    checked: bool = False
    unclear: bool = False


def _fact_check(
    client: ModelClient, question: QuestionLike, doc: NegativeDoc, style: Literal["chat", "completion"], out: _Outcome
) -> bool | None:
    """Whether the document contradicts the question's known facts (None: nothing known, or an
    unclear verdict); the call's cost is added to `out`."""
    facts = known_facts(question)
    if not facts:
        return None
    if style == "chat":
        call = client.chat(check_messages(question.question, facts, doc.title, doc.text), max_tokens=8)
    else:
        call = client.complete(check_prompt(question.question, facts, doc.title, doc.text), max_tokens=8)
    out.calls += 1
    out.input_tokens += call.usage.input_tokens
    out.output_tokens += call.usage.output_tokens
    out.checked = True
    verdict = parse_verdict(call.text)
    out.unclear = verdict is None
    return verdict


def _generate_one(
    client: ModelClient,
    question: QuestionLike,
    angle_index: int,
    style: Literal["chat", "completion"],
    max_tokens: int,
    fact_check: bool = True,
) -> _Outcome:
    """One document: a call, and one retry with a format reminder if the reply does not parse or
    copies the prompt's example; then, with `fact_check`, the check against the known facts."""
    angle = ANGLES[angle_index]
    outcome = _Outcome(None, 0, 0, 0)
    for retry in (False, True):
        if style == "chat":
            call = client.chat(chat_messages(question.question, angle, retry), max_tokens=max_tokens)
            reply = call.text
        else:
            call = client.complete(
                completion_prompt(question.question, angle, retry),
                stop=["\nQuestion:", "\nAngle:"],
                max_tokens=max_tokens,
            )
            reply = "Title:" + call.text
        outcome.calls += 1
        outcome.input_tokens += call.usage.input_tokens
        outcome.output_tokens += call.usage.output_tokens
        parsed = parse_generated(reply)
        if parsed is not None and copies_example(parsed[1]):
            outcome.dropped = COPIES_EXAMPLE
            log.info("reply for %s, angle %d copies the prompt's example", question.id, angle_index)
            continue
        if parsed is not None:
            title, text = parsed
            outcome.dropped = None
            outcome.doc = NegativeDoc(
                doc_id=negative_doc_id(question.id, angle_index),
                question_id=question.id,
                question=question.question,
                angle_index=angle_index,
                angle=angle.name,
                title=title,
                text=text,
            )
            if fact_check and _fact_check(client, question, outcome.doc, style, outcome):
                outcome.doc, outcome.dropped = None, CONTRADICTS_FACTS
            return outcome
        log.info(
            "unusable reply for %s, angle %d%s: %r",
            question.id,
            angle_index,
            " (after a retry)" if retry else "",
            reply[:200],
        )
    return outcome


def select_questions(
    questions: Iterable[QuestionLike], all_questions: bool = False, limit: int | None = None
) -> list[QuestionLike]:
    """The unanswerable questions (every one with `all_questions`), the first `limit` of them."""
    chosen = [q for q in questions if all_questions or not q.answerable]
    return chosen[:limit] if limit is not None else chosen


def generate_negative_docs(
    client: ModelClient,
    questions: Sequence[QuestionLike],
    *,
    n: int = 10,
    style: Literal["chat", "completion"] = "chat",
    max_tokens: int = 256,
    concurrency: int = 1,
    existing: Mapping[str, NegativeDoc] | None = None,
    on_doc: Callable[[NegativeDoc], None] | None = None,
    progress: bool = False,
    fact_check: bool = True,
) -> tuple[list[NegativeDoc], GenerationStats]:
    """Documents for each question from each of the first `n` angles, in (question, angle) order.

    `existing` documents (by id, same question text) are reused without a model call; `on_doc`
    is called, in order, with each newly generated one (to save it as it comes). A document
    copying the prompt's example, or (with `fact_check`) contradicting its question's known
    facts, is dropped and counted in `stats.dropped` by reason.
    """
    if not 1 <= n <= len(ANGLES):
        raise InputError(f"n: documents per question must be between 1 and {len(ANGLES)}, got {n}")
    if style not in ("chat", "completion"):
        raise InputError(f"style: expected chat or completion, got {style!r}")
    if concurrency < 1:
        raise InputError(f"concurrency: must be at least 1, got {concurrency}")
    existing = existing or {}
    stats = GenerationStats(questions=len(questions), requested=len(questions) * n)
    slots: list[NegativeDoc | tuple[QuestionLike, int]] = []
    for q in questions:
        for a in range(n):
            old = existing.get(negative_doc_id(q.id, a))
            if old is not None and old.question == q.question and old.angle_index == a:
                slots.append(old)
                stats.reused += 1
            else:
                slots.append((q, a))
    todo = [s for s in slots if isinstance(s, tuple)]

    def work(item: tuple[QuestionLike, int]) -> _Outcome:
        return _generate_one(client, item[0], item[1], style, max_tokens, fact_check)

    made: dict[str, NegativeDoc] = {}
    pool = ThreadPoolExecutor(max_workers=concurrency)
    try:
        outcomes: Iterable[_Outcome] = pool.map(work, todo)
        if progress:
            from rich.progress import track

            outcomes = track(outcomes, total=len(todo), description=f"generating {len(todo)} documents")
        for (q, a), out in zip(todo, outcomes):
            stats.model_calls += out.calls
            stats.input_tokens += out.input_tokens
            stats.output_tokens += out.output_tokens
            stats.retried += int(out.calls - int(out.checked) > 1)
            stats.fact_checked += int(out.checked)
            stats.fact_check_unclear += int(out.unclear)
            if out.doc is None and out.dropped is not None:
                stats.dropped.setdefault(out.dropped, []).append(negative_doc_id(q.id, a))
                continue
            if out.doc is None:
                stats.skipped += 1
                stats.skipped_ids.append(negative_doc_id(q.id, a))
                continue
            stats.generated += 1
            made[out.doc.doc_id] = out.doc
            if on_doc is not None:
                on_doc(out.doc)
    finally:  # on a failure (e.g. the model server is gone) do not wait for the queued calls
        pool.shutdown(wait=True, cancel_futures=True)
    docs = [s if isinstance(s, NegativeDoc) else made.get(negative_doc_id(s[0].id, s[1])) for s in slots]
    return [d for d in docs if d is not None], stats
