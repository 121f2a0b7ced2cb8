"""Negative-evidence augmentation: synthetic documents saying why a question cannot be answered.

The over-searching study adds, for each unanswerable question, short encyclopedic documents
explaining why the information asked for is unavailable or cannot be determined, one per
*angle* (`ANGLES`: ambiguity, coverage gaps, methodological limits, ...), to the corpus; an agent
that retrieves them has evidence for abstaining. The study found the effect weak and blamed
poor ranking of these documents, so `rank_report` measures how often they reach the top-k for
their own question.

Pipeline (`branchpoint augment`):
1. `generate_negative_docs`: for each question and each of the first `n` angles, one model call
   (chat or completion style) asking for a `Title: ...` line and ~100 words; `parse_generated`
   reads the reply robustly; a malformed reply is retried once with a format reminder, then
   skipped and counted.
2. `write_augmented_corpus`: OUT/corpus.jsonl = the original passages followed by the generated
   documents (FlashRAG `{"id", "contents"}`, ids `neg-<question id>-<angle index>`, angle
   index 0-9 in `ANGLES` order); OUT/generated.jsonl = one row per generated document
   (id, question_id, question, angle_index, angle, title, text). Rerunning into the same OUT
   reuses rows of generated.jsonl whose question is unchanged and generates only what is missing.
3. `rank_report`: search each question's own text on an index of the augmented corpus and count
   where its generated documents rank.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from branchpoint.errors import InputError
from branchpoint.models.call import ModelClient
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.source import RetrievalSource
from branchpoint.traces import TraceError, iter_json_lines, write_files_atomically

log = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
GENERATED_FILE = "generated.jsonl"
REPORT_FILE = "rank_report.json"
ID_PREFIX = "neg-"


@dataclass(frozen=True)
class Angle:
    """One reason an answer can be unavailable, and what the document should say about it."""

    name: str
    guidance: str


ANGLES: tuple[Angle, ...] = (
    Angle("ambiguous or inconsistent information",
          "the question's key terms are ambiguous, or the available records describe the matter "
          "inconsistently, so no single answer can be stated"),
    Angle("data coverage gaps",
          "the relevant data were never systematically collected or published, or existing "
          "datasets do not cover this case"),
    Angle("methodological limits",
          "the quantity cannot be measured or estimated reliably with existing methods, or any "
          "estimate depends heavily on definitions and assumptions"),
    Angle("privacy or legal restrictions",
          "the information is confidential, protected by privacy law, sealed, classified or "
          "proprietary"),
    Angle("temporal availability",
          "the information is not yet available, has not been released, or was only recorded "
          "after the period in question"),
    Angle("geographic specificity",
          "figures exist only for a broader or different area than the one the question needs, "
          "and cannot be broken down to it"),
    Angle("conflicting information",
          "reputable sources give contradictory figures or accounts, and none is authoritative"),
    Angle("no scientific consensus",
          "experts disagree or the research remains inconclusive, so no accepted answer exists"),
    Angle("rapidly changing future events",
          "the answer depends on future or fast-changing events that cannot be known in advance"),
    Angle("absence of historical records",
          "no records survive, or none were ever kept, for the period or event in question"),
)

#: Words a parsed document must have (fewer: treated as malformed) and the most kept.
MIN_WORDS = 25
MAX_WORDS = 160


class QuestionLike(Protocol):
    """What augmentation reads from a question (branchpoint's `Question` has these fields)."""

    id: str
    question: str
    answerable: bool


@dataclass(frozen=True)
class NegativeDoc:
    """One generated document: which question and angle it is for, its title and text."""

    doc_id: str
    question_id: str
    question: str
    angle_index: int
    angle: str
    title: str
    text: str

    def passage(self) -> Passage:
        """The document as a corpus passage."""
        return Passage(doc_id=self.doc_id, title=self.title, text=self.text)

    def row(self) -> dict[str, Any]:
        """The generated.jsonl row."""
        return {"id": self.doc_id, "question_id": self.question_id, "question": self.question,
                "angle_index": self.angle_index, "angle": self.angle, "title": self.title,
                "text": self.text}


def negative_doc_id(question_id: str, angle_index: int) -> str:
    """`neg-<question id>-<angle index>`."""
    return f"{ID_PREFIX}{question_id}-{angle_index}"


# --- prompts ------------------------------------------------------------------------------------

_CHAT_SYSTEM = "You write short, neutral entries for a reference encyclopedia."

_CHAT_USER = """\
Write a short encyclopedic document (about 100 words) explaining why the information needed to \
answer the question below is unavailable or cannot be determined. Focus on this angle: \
{angle} ({guidance}).

Write in a neutral, factual, encyclopedic register about the topic of the question. Do not \
answer the question and do not invent a specific answer.

Question: {question}

Reply in exactly this format, with nothing before or after:
Title: <a short title naming the topic>
<one paragraph of about 100 words>"""

_REMINDER = ("Your previous reply could not be used. Start with a line `Title: <title>`, then "
             "one paragraph of about 100 words.")

_COMPLETION_HEADER = """\
Encyclopedia entries of about 100 words, each explaining why the answer to a question is \
unavailable or cannot be determined, from the stated angle. Each entry is a `Title:` line \
followed by one paragraph.

Question: How many people attended the first performance of Shakespeare's Hamlet?
Angle: absence of historical records
Title: Attendance at early performances of Hamlet
No record of the audience at the first performance of Hamlet is known to survive. The play was \
probably first staged by the Lord Chamberlain's Men around 1600 or 1601, but theatre companies \
of the period kept no systematic box-office ledgers, and the surviving accounts of Philip \
Henslowe concern a rival company. Even the date and venue of the premiere are uncertain. \
Estimates of Elizabethan theatre capacity, up to about 3,000 for the Globe, describe what a \
playhouse could hold rather than who attended a given performance, so the size of the first \
audience cannot be determined from the historical record.
"""

_COMPLETION_ITEM = "\nQuestion: {question}\nAngle: {angle}\nTitle:"


def chat_messages(question: str, angle: Angle, retry: bool = False) -> list[dict[str, str]]:
    """The chat prompt for one (question, angle); `retry` adds a format reminder."""
    user = _CHAT_USER.format(angle=angle.name, guidance=angle.guidance, question=question.strip())
    if retry:
        user = f"{user}\n\n{_REMINDER}"
    return [{"role": "system", "content": _CHAT_SYSTEM}, {"role": "user", "content": user}]


def completion_prompt(question: str, angle: Angle, retry: bool = False) -> str:
    """The few-shot completion prompt for one (question, angle); it ends with `Title:`."""
    header = _COMPLETION_HEADER
    if retry:
        header = header.replace("followed by one paragraph.", "followed by one paragraph of about "
                                "100 words, on the lines after the title.")
    return header + _COMPLETION_ITEM.format(question=question.strip(), angle=angle.name)


# --- parsing ------------------------------------------------------------------------------------

_TITLE_LINE = re.compile(r"^[\s#*_>`\"'-]*title[*_\s]*[:：][*_\s]*(?P<title>.*)$", re.IGNORECASE)
_BODY_LABEL = re.compile(r"^[*_\s]*(?:text|document|body|content|entry|paragraph)[*_\s]*[:：][*_]*\s*",
                         re.IGNORECASE)
_NEXT_ITEM = re.compile(r"\s(?:Question|Angle|Title)\s*:", re.IGNORECASE)


def _clean_title(raw: str) -> str:
    title = raw.strip().strip("*_#`").strip()
    if len(title) >= 2 and title[0] == title[-1] and title[0] in "\"'":
        title = title[1:-1].strip()
    return " ".join(title.split())


def _trim(words: list[str], most: int) -> str:
    """At most `most` words, ending at a sentence end when one leaves at least MIN_WORDS."""
    kept = words[:most]
    for end in range(len(kept), MIN_WORDS - 1, -1):
        if kept[end - 1].endswith((".", "!", "?")):
            return " ".join(kept[:end])
    return " ".join(kept)


def parse_generated(reply: str, min_words: int = MIN_WORDS, max_words: int = MAX_WORDS
                    ) -> tuple[str, str] | None:
    """(title, text) from a model reply `Title: ...` + text, or None if it is not usable.

    Tolerates markdown (`**Title:**`, `# Title: ...`), code fences, a title alone on the line
    after `Title:`, a `Text:` label, and a model that goes on to write another entry (cut at the
    next `Question:` / `Title:`). Rejects replies without a title line, titles over 20 words or 150
    characters, and texts under `min_words` words; texts over `max_words` are cut at a sentence end.
    """
    lines = [ln for ln in reply.replace("\r\n", "\n").split("\n") if not ln.strip().startswith("```")]
    for i, line in enumerate(lines):
        match = _TITLE_LINE.match(line)
        if match:
            break
    else:
        return None
    title, body = _clean_title(match.group("title")), lines[i + 1 :]
    if not title:  # "Title:" alone, the title on the next non-empty line
        rest = [ln for ln in body if ln.strip()]
        if not rest:
            return None
        title, body = _clean_title(rest[0]), body[body.index(rest[0]) + 1 :]
    text = " ".join(" ".join(ln.split()) for ln in body if ln.strip())
    text = _BODY_LABEL.sub("", text, count=1)
    cut = _NEXT_ITEM.search(f" {text}")
    if cut:
        text = f" {text}"[: cut.start()].strip()
    words = text.split()
    if not title or len(title.split()) > 20 or len(title) > 150 or len(words) < min_words:
        return None
    return title, _trim(words, max_words) if len(words) > max_words else text


# --- generation ---------------------------------------------------------------------------------

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Outcome:
    doc: NegativeDoc | None
    calls: int
    input_tokens: int
    output_tokens: int


def _generate_one(client: ModelClient, question: QuestionLike, angle_index: int,
                  style: Literal["chat", "completion"], max_tokens: int) -> _Outcome:
    """One document: a call, and one retry with a format reminder if the reply does not parse."""
    angle = ANGLES[angle_index]
    outcome = _Outcome(None, 0, 0, 0)
    for retry in (False, True):
        if style == "chat":
            call = client.chat(chat_messages(question.question, angle, retry), max_tokens=max_tokens)
            reply = call.text
        else:
            call = client.complete(completion_prompt(question.question, angle, retry),
                                   stop=["\nQuestion:", "\nAngle:"], max_tokens=max_tokens)
            reply = "Title:" + call.text
        outcome.calls += 1
        outcome.input_tokens += call.usage.input_tokens
        outcome.output_tokens += call.usage.output_tokens
        parsed = parse_generated(reply)
        if parsed is not None:
            title, text = parsed
            outcome.doc = NegativeDoc(
                doc_id=negative_doc_id(question.id, angle_index), question_id=question.id,
                question=question.question, angle_index=angle_index, angle=angle.name,
                title=title, text=text,
            )  # fmt: skip
            return outcome
        log.info("unusable reply for %s, angle %d%s: %r", question.id, angle_index,
                 " (after a retry)" if retry else "", reply[:200])
    return outcome


def select_questions(questions: Iterable[QuestionLike], all_questions: bool = False,
                     limit: int | None = None) -> list[QuestionLike]:
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
) -> tuple[list[NegativeDoc], GenerationStats]:
    """Documents for each question from each of the first `n` angles, in (question, angle) order.

    `existing` documents (by id, same question text) are reused without a model call; `on_doc`
    is called, in order, with each newly generated one (to save it as it comes).
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
        return _generate_one(client, item[0], item[1], style, max_tokens)

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
            stats.retried += int(out.calls > 1)
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


# --- files --------------------------------------------------------------------------------------

def read_generated(path: str | Path) -> dict[str, NegativeDoc]:
    """Documents of a generated.jsonl by id (empty if the file does not exist)."""
    path = Path(path)
    if not path.is_file():
        return {}
    docs: dict[str, NegativeDoc] = {}
    try:
        for lineno, obj in iter_json_lines(path):
            try:
                doc = NegativeDoc(
                    doc_id=str(obj["id"]), question_id=str(obj["question_id"]), question=str(obj["question"]),
                    angle_index=int(obj["angle_index"]), angle=str(obj["angle"]), title=str(obj["title"]),
                    text=str(obj["text"]),
                )  # fmt: skip
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"{path} line {lineno}: not a generated-document row ({exc!r}); "
                                 "delete the file to regenerate") from None
            docs[doc.doc_id] = doc
    except TraceError as exc:
        raise InputError(str(exc)) from None
    return docs


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write rows to `path` atomically (a temporary sibling renamed into place)."""
    write_files_atomically({path: "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)})


def write_augmented_corpus(out_dir: str | Path, passages: Sequence[Passage],
                           docs: Sequence[NegativeDoc]) -> Path:
    """OUT/corpus.jsonl: the passages, then the generated documents (FlashRAG jsonl); its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"id": p.doc_id, "contents": p.contents} for p in passages]
    rows += [{"id": d.doc_id, "contents": d.passage().contents} for d in docs]
    path = out_dir / CORPUS_FILE
    _write_jsonl(path, rows)
    return path


def check_id_conflicts(passages: Sequence[Passage], questions: Sequence[QuestionLike], n: int) -> None:
    """InputError if a generated id would collide with a corpus id."""
    ids = {p.doc_id for p in passages}
    for q in questions:
        for a in range(n):
            if negative_doc_id(q.id, a) in ids:
                raise InputError(f'corpus already has a passage with id "{negative_doc_id(q.id, a)}", '
                                 "the id a generated document would get; was this corpus augmented before?")


@dataclass
class AugmentResult:
    """What `augment` wrote and how generation went."""

    corpus_path: Path
    generated_path: Path
    docs: list[NegativeDoc]
    stats: GenerationStats
    corpus_passages: int


def augment(
    client: ModelClient,
    questions: Sequence[QuestionLike],
    passages: Sequence[Passage],
    out_dir: str | Path,
    *,
    n: int = 10,
    style: Literal["chat", "completion"] = "chat",
    max_tokens: int = 256,
    concurrency: int = 1,
    progress: bool = False,
) -> AugmentResult:
    """Generate documents for `questions` and write OUT/generated.jsonl and OUT/corpus.jsonl.

    Resumable: rows already in OUT/generated.jsonl for the same question text are kept; each
    new document is appended as soon as it is generated.
    """
    out_dir = Path(out_dir)
    if not questions:
        raise InputError("no questions to augment (none selected)")
    check_id_conflicts(passages, questions, n)
    out_dir.mkdir(parents=True, exist_ok=True)
    generated_path = out_dir / GENERATED_FILE
    previous = read_generated(generated_path)
    wanted = {negative_doc_id(q.id, a): q.question for q in questions for a in range(n)}
    kept = {i: d for i, d in previous.items() if wanted.get(i) == d.question}
    _write_jsonl(generated_path, (d.row() for d in kept.values()))
    with generated_path.open("a", encoding="utf-8") as fh:

        def save(doc: NegativeDoc) -> None:
            fh.write(json.dumps(doc.row(), ensure_ascii=False) + "\n")
            fh.flush()

        docs, stats = generate_negative_docs(
            client, questions, n=n, style=style, max_tokens=max_tokens, concurrency=concurrency,
            existing=kept, on_doc=save, progress=progress,
        )  # fmt: skip
    _write_jsonl(generated_path, (d.row() for d in docs))  # in (question, angle) order
    corpus_path = write_augmented_corpus(out_dir, passages, docs)
    return AugmentResult(corpus_path=corpus_path, generated_path=generated_path, docs=docs, stats=stats,
                         corpus_passages=len(passages))


# --- ranking ------------------------------------------------------------------------------------

@dataclass
class RankReport:
    """Where generated documents rank when each question's own text is searched (top-k).

    `rank_counts[r]`: own generated documents at rank r (1 = best); `best_rank_counts[r]`:
    questions whose best own document is at rank r (`"miss"`: none in the top-k).
    `other_in_topk`: generated documents of *other* questions in a question's top-k.
    """

    k: int
    questions: int
    generated: int
    hit_questions: int
    own_in_topk: int
    other_in_topk: int
    slots: int
    rank_counts: dict[int, int]
    best_rank_counts: dict[str, int]
    per_question: list[dict[str, Any]]

    @property
    def hit_rate(self) -> float:
        """Share of questions with at least one own generated document in the top-k."""
        return self.hit_questions / self.questions if self.questions else 0.0

    @property
    def mean_own_in_topk(self) -> float:
        """Own generated documents in the top-k, per question."""
        return self.own_in_topk / self.questions if self.questions else 0.0

    @property
    def share_of_topk(self) -> float:
        """Share of all returned top-k slots held by the question's own generated documents."""
        return self.own_in_topk / self.slots if self.slots else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rank_counts"] = {str(r): c for r, c in self.rank_counts.items()}
        data.update(hit_rate=self.hit_rate, mean_own_in_topk=self.mean_own_in_topk,
                    share_of_topk=self.share_of_topk)
        return data


def _ids_by_question(generated_ids: Mapping[str, Iterable[str]] | Iterable[str],
                     questions: Sequence[QuestionLike]) -> dict[str, set[str]]:
    """Question id -> its generated ids, from a mapping or from flat `neg-<qid>-<i>` ids."""
    if isinstance(generated_ids, Mapping):
        return {qid: set(ids) for qid, ids in generated_ids.items()}
    known = {q.id for q in questions}
    by_q: dict[str, set[str]] = {}
    for doc_id in generated_ids:
        qid, _, index = doc_id.removeprefix(ID_PREFIX).rpartition("-")
        if not doc_id.startswith(ID_PREFIX) or not index.isdigit() or qid not in known:
            raise InputError(f'generated id "{doc_id}" is not neg-<question id>-<angle index> '
                             "for one of the given questions; pass a mapping question id -> ids")
        by_q.setdefault(qid, set()).add(doc_id)
    return by_q


def rank_report(source: RetrievalSource, questions: Sequence[QuestionLike],
                generated_ids: Mapping[str, Iterable[str]] | Iterable[str], k: int = 3) -> RankReport:
    """How often each question's generated documents are in the top-k for the question's text.

    Only questions with generated documents are counted. The query is the question text itself,
    a stand-in for the agent's first search.
    """
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    by_q = _ids_by_question(generated_ids, questions)
    every = set().union(*by_q.values()) if by_q else set()
    rank_counts: Counter[int] = Counter()
    best: Counter[str] = Counter()
    rows, slots, other = [], 0, 0
    for q in questions:
        own = by_q.get(q.id)
        if not own:
            continue
        hits = source.search(q.question, k)[:k]
        slots += len(hits)
        ranks = [r for r, d in enumerate(hits, 1) if d.doc_id in own]
        others = sum(1 for d in hits if d.doc_id in every and d.doc_id not in own)
        other += others
        rank_counts.update(ranks)
        best[str(ranks[0]) if ranks else "miss"] += 1
        rows.append({"question_id": q.id, "generated": len(own), "ranks": ranks, "other_generated": others,
                     "top_ids": [d.doc_id for d in hits]})
    return RankReport(
        k=k, questions=len(rows), generated=sum(r["generated"] for r in rows),
        hit_questions=sum(1 for r in rows if r["ranks"]), own_in_topk=sum(len(r["ranks"]) for r in rows),
        other_in_topk=other, slots=slots,
        rank_counts={r: rank_counts.get(r, 0) for r in range(1, k + 1)},
        best_rank_counts={**{str(r): best.get(str(r), 0) for r in range(1, k + 1)}, "miss": best.get("miss", 0)},
        per_question=rows,
    )  # fmt: skip


def write_rank_report(source: RetrievalSource, questions: Sequence[QuestionLike], result: AugmentResult,
                      out_dir: str | Path, k: int = 3) -> RankReport:
    """`rank_report` of an augmentation's generated documents, written to OUT/rank_report.json."""
    ids: dict[str, list[str]] = {}
    for d in result.docs:
        ids.setdefault(d.question_id, []).append(d.doc_id)
    report = rank_report(source, questions, ids, k=k)
    (Path(out_dir) / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    return report
