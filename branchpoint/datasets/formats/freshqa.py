"""``freshqa``: FreshQA csv (columns ``id, question, false_premise, fact_type, answer_0`` ... ``answer_9``).

Other columns such as ``split`` are ignored (unless a split is asked for). The header is the
first row (within the first 10 lines) with a ``question`` cell, so the preamble lines of
FreshQA's releases are skipped. false_premise TRUE -> unanswerable FP, ``note`` = answer_0 (the
debunking answer); FALSE -> answerable, gold = the non-empty answer_0..answer_9. stratum =
fact_type. ids: ``freshqa-<id>``.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, QuestionFormat, register_format
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, Record, dedup, read_csv
from branchpoint.errors import InputError

_FRESHQA_COLUMNS = ("id", "question", "false_premise", "fact_type", "answer_0")


_FRESHQA_ANSWERS = tuple(f"answer_{i}" for i in range(10))


#: FreshQA's splits (its `split` column).
FRESHQA_SPLITS = ("TEST", "DEV")


def _parse_freshqa(path: Path, split: str | None = None) -> Parsed:
    for _, where, row in read_csv(path, _FRESHQA_COLUMNS):
        if split is not None:
            if "split" not in row:
                raise InputError(f'{where}: column "split" missing (needed for split {split})')
            if row["split"].upper() != split:
                yield where, None, f"split {row['split'] or '(empty)'}"
                continue
        rec = Record(where, row, _FRESHQA_COLUMNS)
        qid, question = f"freshqa-{rec.text('id')}", rec.text("question")
        premise = row["false_premise"].lower()
        if premise not in ("true", "false"):
            got = row["false_premise"]
            raise rec.error("false_premise", f"expected TRUE or FALSE, got {got!r:.40}")
        answers = dedup(row[c] for c in _FRESHQA_ANSWERS if row.get(c))
        stratum = row["fact_type"] or None
        if premise == "true":
            q = Question(
                id=qid,
                question=question,
                answerable=False,
                category="FP",
                stratum=stratum,
                note=row["answer_0"] or None,
            )
        elif not answers:
            raise rec.error(
                "answer_0",
                "empty (expected at least one answer in answer_0..answer_9 for a question without a false premise)",
            )
        else:
            q = Question(id=qid, question=question, answerable=True, gold_answers=answers, stratum=stratum)
        yield where, q, None


def _by_name(head: FileHead) -> bool:
    return head.is_csv and "freshqa" in head.name


def _sniff(head: FileHead) -> bool:
    return head.is_csv and {"false_premise", "answer_0"} <= set(head.csv_columns)


FRESHQA = register_format(
    QuestionFormat(
        name="freshqa",
        parse=_parse_freshqa,
        by_name=_by_name,
        name_rank=80,
        sniff=_sniff,
        sniff_rank=10,
        splits=FRESHQA_SPLITS,
        label="FreshQA",
    )
)
