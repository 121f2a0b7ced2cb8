"""``hotpotqa``: HotpotQA native JSON list (``_id, question, answer, type, level, supporting_facts``).

support = supporting-fact titles (deduplicated, in order), support_group = the first of them,
stratum = ``"type/level"``.
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

_HOTPOT_KEYS = ("_id", "question", "answer", "type", "level", "supporting_facts")


def _parse_hotpotqa(path: Path) -> Parsed:
    for where, obj in objects(read_json_list(path)):
        rec = Record(where, obj, _HOTPOT_KEYS)
        qid, question, gold = rec.ident("_id"), rec.text("question"), rec.answers("answer")
        facts = rec.raw("supporting_facts")
        if not isinstance(facts, list):
            got = type_name(facts)
            raise rec.error("supporting_facts", f"expected a list of [title, sentence], got {got}")
        support = []
        for i, fact in enumerate(facts):
            if not isinstance(fact, list) or not fact or not isinstance(fact[0], str):
                raise rec.error(f"supporting_facts[{i}]", f"expected [title, sentence index], got {fact!r:.60}")
            support.append(fact[0])
        support = dedup(support)
        parts = [str(obj[k]) for k in ("type", "level") if rec.has(k)]
        yield (
            where,
            Question(
                id=qid,
                question=question,
                answerable=True,
                gold_answers=gold,
                support=support,
                support_group=support[0] if support else None,
                stratum="/".join(parts) if parts else None,
            ),
            None,
        )


def _by_name(head: FileHead) -> bool:
    return head.is_json and "hotpot" in head.name


def _sniff(head: FileHead) -> bool:
    return not head.is_csv and {"_id", "supporting_facts"} <= head.keys


HOTPOTQA = register_format(
    QuestionFormat(
        name="hotpotqa",
        parse=_parse_hotpotqa,
        by_name=_by_name,
        name_rank=50,
        sniff=_sniff,
        sniff_rank=70,
        label="HotpotQA",
    )
)
