"""The files of an augmentation: generated.jsonl, the augmented corpus, and the resumable `augment`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from branchpoint.errors import InputError
from branchpoint.models.call import ModelClient
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.negative_evidence.documents import (
    NegativeDoc,
    QuestionLike,
    negative_doc_id,
)
from branchpoint.retrieval.negative_evidence.generate import (
    GenerationStats,
    generate_negative_docs,
)
from branchpoint.traces import TraceError, iter_json_lines, write_files_atomically

CORPUS_FILE = "corpus.jsonl"


GENERATED_FILE = "generated.jsonl"


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
                    doc_id=str(obj["id"]),
                    question_id=str(obj["question_id"]),
                    question=str(obj["question"]),
                    angle_index=int(obj["angle_index"]),
                    angle=str(obj["angle"]),
                    title=str(obj["title"]),
                    text=str(obj["text"]),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(
                    f"{path} line {lineno}: not a generated-document row ({exc!r}); delete the file to regenerate"
                ) from None
            docs[doc.doc_id] = doc
    except TraceError as exc:
        raise InputError(str(exc)) from None
    return docs


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write rows to `path` atomically (a temporary sibling renamed into place)."""
    write_files_atomically({path: "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)})


def write_augmented_corpus(out_dir: str | Path, passages: Sequence[Passage], docs: Sequence[NegativeDoc]) -> Path:
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
                raise InputError(
                    f'corpus already has a passage with id "{negative_doc_id(q.id, a)}", '
                    "the id a generated document would get; was this corpus augmented before?"
                )


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
    fact_check: bool = True,
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
            client,
            questions,
            n=n,
            style=style,
            max_tokens=max_tokens,
            concurrency=concurrency,
            existing=kept,
            on_doc=save,
            progress=progress,
            fact_check=fact_check,
        )
    _write_jsonl(generated_path, (d.row() for d in docs))  # in (question, angle) order
    corpus_path = write_augmented_corpus(out_dir, passages, docs)
    return AugmentResult(
        corpus_path=corpus_path, generated_path=generated_path, docs=docs, stats=stats, corpus_passages=len(passages)
    )
