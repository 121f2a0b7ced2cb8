"""Rewards of forked executions: what a repeat scores, in [0, 1] (kind `reward` of the registry).

- `correct` (the default): 1 when the judge says CORRECT, or ABSTAINED on an unanswerable
  question, as in `metrics.is_correct`;
- `set_f1` (collection tasks, the search-value study's STOP-feedback study): F1 of the answer's
  set of items against the gold items, invalid and length outputs at zero.

`containment` and `exact_match` (the scoring-objective comparison) are in `objectives`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from branchpoint.evaluation.judges import detect_abstention, judge_records, normalize_answer
from branchpoint.evaluation.metrics import is_correct
from branchpoint.registry import REGISTRY
from branchpoint.registry_kinds import Kind
from branchpoint.traces import ExecutionRecord

RewardFn = Callable[[Sequence[ExecutionRecord], str], np.ndarray]
#: The typed handle of the registry kind: `REGISTRY.get(REWARD, name).obj` is a `RewardFn`.
REWARD: Kind[RewardFn] = Kind("reward")


# --------------------------------------------------------------------------------------------
# Rewards
# --------------------------------------------------------------------------------------------


def reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Register a reward `fn(records, judge) -> array of floats in [0, 1]` under `name` (kind
    `reward` of `branchpoint.registry`).

    A reward that calls a judge may also take `count: JudgingCount` and add what it judged.
    """
    return REGISTRY.register("reward", name)


def get_reward(name: str) -> RewardFn:
    """The reward registered as `name` (or `package.module:function`); InputError listing the
    known names otherwise."""
    return REGISTRY.get(REWARD, name).obj


@dataclass
class JudgingCount:
    """How many judge calls the correctness reward made (identical answers share one)."""

    records: int = 0
    judged: int = 0


def _answer_key(record: ExecutionRecord) -> tuple[Any, ...]:
    """Records with equal keys get the same judgment: same question, gold, status and answer."""
    return (record.question_id, record.answerable, tuple(record.gold_answers), record.status, record.final_answer)


@reward("correct")
def correctness_reward(records: Sequence[ExecutionRecord], judge: str, count: JudgingCount | None = None) -> np.ndarray:
    """Y = 1 when the record is correct under `judge` (answerable: CORRECT; unanswerable:
    ABSTAINED), else 0.

    Identical answers to the same question share one judgment (the judge runs once per
    distinct (question, gold answers, status, final answer)), except for the `given` judge,
    whose labels belong to each record.
    """
    if judge == "given":
        judged = judge_records(records, judge)
        out = np.array([float(is_correct(r, judge)) for r in judged])
        if count is not None:
            count.records += len(records)
            count.judged += len(records)
        return out
    first: dict[tuple[Any, ...], int] = {}
    for i, r in enumerate(records):
        first.setdefault(_answer_key(r), i)
    reps = list(first.values())
    labels = {_answer_key(r): float(is_correct(r, judge)) for r in judge_records([records[i] for i in reps], judge)}
    if count is not None:
        count.records += len(records)
        count.judged += len(reps)
    return np.array([labels[_answer_key(r)] for r in records], dtype=float)


_ITEM_SPLIT = re.compile(r"\s*(?:[,;\n|]|\band\b|&)\s*", re.IGNORECASE)
_UNKNOWN_ANSWERS = frozenset({"unknown", "i dont know", "i do not know", "dont know", "not known", "no answer"})


def is_unknown_answer(text: str | None) -> bool:
    """True for an empty answer or an explicit UNKNOWN: the answer normalises to nothing, or
    names no answer ("unknown", "I don't know"), or the abstention detector names a pattern of
    its "unknown" family ("cannot be determined", …). Premise corrections, confident negations
    and clarification requests are *not* UNKNOWN here: they are answers like any other."""
    norm = normalize_answer(text or "")
    if not norm or norm in _UNKNOWN_ANSWERS:
        return True
    name = detect_abstention(text)
    if name is None:
        return False
    from branchpoint.evaluation import judges

    families: dict[str, str] = {p.name: p.family for p in getattr(judges, "ABSTENTION_PATTERNS", ())}
    return families.get(name, "unknown" if "know" in name else "") == "unknown"


class InvalidItems(ValueError):
    """A collection answer that starts as structured output (JSON) but is not a list of items."""


def answer_items(text: str | None) -> set[str]:
    """The set of items a collection answer names, each SQuAD-normalised, empty items dropped.

    A structured answer (JSON: a list of strings, or an object whose "items" is one) gives its
    items; text that starts like JSON (`[` or `{`) but is not such a list raises InvalidItems.
    Plain text is split on `,` `;` `|` newlines, "and", "&". An explicit UNKNOWN
    (`is_unknown_answer`) names no items."""
    if not text or is_unknown_answer(text):
        return set()
    stripped = text.strip()
    if stripped[:1] in ("[", "{"):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError:
            raise InvalidItems("not valid JSON") from None
        items = obj.get("items") if isinstance(obj, dict) else obj
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise InvalidItems('expected a JSON list of strings (or {"items": [...]})')
        return {norm for x in items if (norm := normalize_answer(x))}
    return {norm for part in _ITEM_SPLIT.split(text) if (norm := normalize_answer(part))}


def set_f1(predicted: set[str], reference: set[str]) -> float:
    """F1 = 2|P ∩ G| / (|P| + |G|) of predicted items P against reference items G; 1.0 when both
    are empty (nothing to name, nothing named)."""
    if not predicted and not reference:
        return 1.0
    return 2.0 * len(predicted & reference) / (len(predicted) + len(reference))


@reward("set_f1")
def set_f1_reward(records: Sequence[ExecutionRecord], judge: str, count: JudgingCount | None = None) -> np.ndarray:
    """Y = bounded set F1 of the answer's items (`answer_items`) against the gold answers, each
    gold answer one reference item (SQuAD-normalised): the collection study's reward
    (search-value study §4.1 and Appendix E, "Collection rewards use set precision, recall and
    F1 against curated atomic reference items"). Invalid outputs (status `malformed`, or a
    structured answer that is not a list of items) and length failures (status `length`)
    score 0, as in the study. Incomplete records never get here (they are not scored). The
    judge is not used."""
    out = []
    for r in records:
        if r.status in ("malformed", "length"):
            out.append(0.0)
            continue
        gold = {g for a in r.gold_answers if (g := normalize_answer(a))}
        try:
            items = answer_items(r.final_answer)
        except InvalidItems:
            out.append(0.0)
            continue
        out.append(set_f1(items, gold))
    return np.array(out, dtype=float)
