"""The question a trainer's row describes, read from the shapes trainers pass it in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from branchpoint.rewards.outcome import Question


def strings(value: Any) -> list[str]:
    """Gold answers as a list of strings: one string, or any sequence of them (a list, a tuple,
    or the numpy array a Parquet column becomes in verl's batch)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        return [str(v) for v in value]
    except TypeError:
        raise ValueError(f"gold answers: expected a string or a list of strings, got {type(value).__name__}") from None


def question_of(ground_truth: Any, extra: Mapping[str, Any] | None = None) -> Question:
    """The question of a row: gold answers from `ground_truth` (a string, a list, or a mapping
    with `target` (Search-R1's and verl's search data) or `gold_answers`); `answerable` from the
    mapping, else from `extra`, else True exactly when there are gold answers (the project's
    unanswerable questions have none); `question`, `question_id`, `category` likewise."""
    extra = extra or {}
    given = ground_truth if isinstance(ground_truth, Mapping) else {}
    if given:
        gold_value = given.get("target", given.get("gold_answers"))
    else:
        gold_value = ground_truth
    gold = strings(gold_value)

    def field(name: str) -> Any:
        return given.get(name, extra.get(name))

    answerable = field("answerable")
    return Question(
        gold_answers=gold,
        answerable=bool(gold) if answerable is None else bool(answerable),
        question=str(field("question") or ""),
        question_id=str(field("question_id") or "q"),
        category=field("category"),
    )
