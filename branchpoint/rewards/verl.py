"""Reward functions in verl's shape: `compute_score(data_source, solution_str, ground_truth,
extra_info)`, called by keyword for each response by verl's reward managers.

Point verl at one with `custom_reward_function.path` (this file, or a file that imports it) and
`custom_reward_function.name`; `custom_reward_function.reward_kwargs` reach it as keyword
arguments (`judge` for the outcome reward, `mode` and `price` for the step reward). Rows carry the
question in `reward_model.ground_truth` (gold answers: a list, or `{"target": [...]}` as verl's
Search-R1 data has it, optionally with `answerable`) and, for step rewards, the state's labels in
`extra_info` (the columns of `branchpoint export labels`). Both return a float.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.rewards.completions import final_answer, first_action
from branchpoint.rewards.outcome import outcome_score
from branchpoint.rewards.questions import question_of
from branchpoint.rewards.step import step_score


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    judge: str = DEFAULT_JUDGE,
    **kwargs: Any,
) -> float:
    """The outcome reward of a response (`outcome.outcome_score`): 1 for a correct answer to an
    answerable question or an abstention on an unanswerable one, under `judge`. `data_source`
    and verl's other keyword arguments (`num_turns`, reward-router settings) are not used."""
    return outcome_score(final_answer(solution_str), question_of(ground_truth, extra_info), judge)


def compute_step_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    mode: str = "value",
    price: float = 0.0,
    **kwargs: Any,
) -> float:
    """The step reward of a response's first decision at its labelled state (`step.step_score`),
    the labels read from `extra_info`."""
    return step_score(first_action(solution_str), extra_info or {}, mode, price)
