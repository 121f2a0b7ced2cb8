"""``musique``: MuSiQue native JSON list (``id, question, answer, answer_aliases, paragraphs``).

gold = [answer, *aliases]; support = titles of supporting paragraphs (in paragraph order);
support_group = the first supporting title. A record with ``"answerable": false`` (MuSiQue-Full)
becomes an unanswerable AU question with no gold answers (its answer is kept in ``note``).
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import (
    Parsed,
    Record,
    dedup,
    objects,
    read_json_list,
    type_name,
)

_MUSIQUE_KEYS = ("id", "question", "answer", "answer_aliases", "paragraphs")


def _parse_musique(path: Path) -> Parsed:
    for where, obj in objects(read_json_list(path)):
        rec = Record(where, obj, _MUSIQUE_KEYS)
        qid, question = rec.ident("id"), rec.text("question")
        answerable = rec.boolean("answerable", True)
        gold = dedup(rec.answers("answer") + rec.answers("answer_aliases", optional=True))
        paragraphs = rec.raw("paragraphs")
        if not isinstance(paragraphs, list):
            got = type_name(paragraphs)
            raise rec.error("paragraphs", f"expected a list of paragraphs, got {got}")
        support = []
        for i, par in enumerate(paragraphs):
            name = f"paragraphs[{i}]"
            if not isinstance(par, dict):
                raise rec.error(name, f"expected an object, got {type_name(par)}")
            for key in ("title", "is_supporting"):
                if key not in par:
                    raise rec.error(f"{name}.{key}", 'missing (expected {"title", "paragraph_text", "is_supporting"})')
            if par["is_supporting"] is True:
                if not isinstance(par["title"], str):
                    got = type_name(par["title"])
                    raise rec.error(f"{name}.title", f"expected a string, got {got}")
                support.append(par["title"])
        support = dedup(support)
        if answerable:
            q = Question(
                id=qid,
                question=question,
                answerable=True,
                gold_answers=gold,
                support=support,
                support_group=support[0] if support else None,
            )
        else:
            q = Question(
                id=qid,
                question=question,
                answerable=False,
                category="AU",
                support=support,
                support_group=support[0] if support else None,
                note=f"MuSiQue unanswerable (supporting paragraphs removed); answer: {gold[0]}"
                if gold
                else "MuSiQue unanswerable (supporting paragraphs removed)",
            )
        yield where, q, None


def _by_name(head: FileHead) -> bool:
    return head.is_json and "musique" in head.name  # R1-Searcher ships musique_500.jsonl


def _sniff(head: FileHead) -> bool:
    if head.is_csv:
        return False
    keys = head.keys
    return {"question", "paragraphs"} <= keys and "answer" in keys


MUSIQUE = register_format(
    QuestionFormat(
        name="musique",
        parse=_parse_musique,
        by_name=_by_name,
        name_rank=40,
        sniff=_sniff,
        sniff_rank=60,
        label="MuSiQue",
    )
)
