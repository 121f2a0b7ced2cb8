"""Where generated documents rank when each question's own text is searched: the study found
augmentation weak and blamed poor ranking of these documents, so this measures it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.retrieval.negative_evidence.corpus import AugmentResult
from branchpoint.retrieval.negative_evidence.documents import ID_PREFIX, QuestionLike
from branchpoint.retrieval.source import RetrievalSource

REPORT_FILE = "rank_report.json"


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
        data.update(hit_rate=self.hit_rate, mean_own_in_topk=self.mean_own_in_topk, share_of_topk=self.share_of_topk)
        return data


def _ids_by_question(
    generated_ids: Mapping[str, Iterable[str]] | Iterable[str], questions: Sequence[QuestionLike]
) -> dict[str, set[str]]:
    """Question id -> its generated ids, from a mapping or from flat `neg-<qid>-<i>` ids."""
    if isinstance(generated_ids, Mapping):
        return {qid: set(ids) for qid, ids in generated_ids.items()}
    known = {q.id for q in questions}
    by_q: dict[str, set[str]] = {}
    for doc_id in generated_ids:
        qid, _, index = doc_id.removeprefix(ID_PREFIX).rpartition("-")
        if not doc_id.startswith(ID_PREFIX) or not index.isdigit() or qid not in known:
            raise InputError(
                f'generated id "{doc_id}" is not neg-<question id>-<angle index> '
                "for one of the given questions; pass a mapping question id -> ids"
            )
        by_q.setdefault(qid, set()).add(doc_id)
    return by_q


def rank_report(
    source: RetrievalSource,
    questions: Sequence[QuestionLike],
    generated_ids: Mapping[str, Iterable[str]] | Iterable[str],
    k: int = 3,
) -> RankReport:
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
    rows: list[dict[str, Any]] = []
    slots = other = 0
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
        rows.append(
            {
                "question_id": q.id,
                "generated": len(own),
                "ranks": ranks,
                "other_generated": others,
                "top_ids": [d.doc_id for d in hits],
            }
        )
    return RankReport(
        k=k,
        questions=len(rows),
        generated=sum(r["generated"] for r in rows),
        hit_questions=sum(1 for r in rows if r["ranks"]),
        own_in_topk=sum(len(r["ranks"]) for r in rows),
        other_in_topk=other,
        slots=slots,
        rank_counts={r: rank_counts.get(r, 0) for r in range(1, k + 1)},
        best_rank_counts={**{str(r): best.get(str(r), 0) for r in range(1, k + 1)}, "miss": best.get("miss", 0)},
        per_question=rows,
    )


def write_rank_report(
    source: RetrievalSource, questions: Sequence[QuestionLike], result: AugmentResult, out_dir: str | Path, k: int = 3
) -> RankReport:
    """`rank_report` of an augmentation's generated documents, written to OUT/rank_report.json."""
    ids: dict[str, list[str]] = {}
    for d in result.docs:
        ids.setdefault(d.question_id, []).append(d.doc_id)
    report = rank_report(source, questions, ids, k=k)
    (Path(out_dir) / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    return report
