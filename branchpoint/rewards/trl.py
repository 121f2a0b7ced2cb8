"""Reward functions in TRL's shape: `reward_func(prompts, completions, **kwargs) -> list`,
called by `GRPOTrainer` with the batch's prompts and completions, `completion_ids`, every other
dataset column as a keyword argument (one value per completion), and `trainer_state`,
`log_extra`, `log_metric`.

Completions are text (standard format) or message lists (conversational format, tool calls
included). The outcome rewards read the columns `gold_answers` and, when present, `answerable`,
`question`, `question_id`, `category` (the columns of `branchpoint export labels`); the step
reward reads the label columns (`step.LABEL_COLUMNS`). A reward that does not apply to a row
returns None there, which TRL leaves out of that row's sum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.rewards.completions import Completion, final_answer, first_action
from branchpoint.rewards.outcome import Question, outcome_scores
from branchpoint.rewards.questions import question_of
from branchpoint.rewards.step import check_mode, step_score

RewardFunc = Callable[..., list[float | None]]
#: The dataset columns an outcome reward reads, besides `gold_answers`.
QUESTION_COLUMNS = ("answerable", "question", "question_id", "category")


def _column(kwargs: dict[str, Any], name: str, n: int) -> list[Any]:
    values = kwargs.get(name)
    if values is None:
        raise ValueError(
            f"reward function: the dataset has no `{name}` column (TRL passes columns as keyword arguments)"
        )
    if len(values) != n:
        raise ValueError(f"reward function: column `{name}` has {len(values)} values for {n} completions")
    return list(values)


def _questions(kwargs: dict[str, Any], n: int) -> list[Question]:
    gold = _column(kwargs, "gold_answers", n)
    extras = [{c: kwargs[c][i] for c in QUESTION_COLUMNS if kwargs.get(c) is not None} for i in range(n)]
    return [question_of(list(g) if g is not None else [], e) for g, e in zip(gold, extras)]


def outcome_reward_func(judge: str = DEFAULT_JUDGE, only: str | None = None) -> RewardFunc:
    """A TRL reward function of the outcome reward under `judge`; `only` = `answerable` or
    `unanswerable` scores those rows and returns None on the others (TRL logs each function
    under its name: `outcome_reward`, `answer_reward`, `abstention_reward`)."""
    if only not in (None, "answerable", "unanswerable"):
        raise ValueError(f"outcome_reward_func: only must be 'answerable' or 'unanswerable', got {only!r}")

    def reward(prompts: Sequence[Any], completions: Sequence[Completion], **kwargs: Any) -> list[float | None]:
        questions = _questions(kwargs, len(completions))
        scores = outcome_scores([final_answer(c) for c in completions], questions, judge)
        keep = [only is None or q.answerable == (only == "answerable") for q in questions]
        return [s if k else None for s, k in zip(scores, keep)]

    reward.__name__ = {None: "outcome_reward", "answerable": "answer_reward", "unanswerable": "abstention_reward"}[only]
    reward.__qualname__ = reward.__name__
    return reward


def step_reward_func(mode: str = "value", price: float = 0.0) -> RewardFunc:
    """A TRL reward function of the step reward (`step.step_score`) of each completion's first
    decision, the state's labels read from the dataset's label columns."""
    check_mode(mode)

    def reward(prompts: Sequence[Any], completions: Sequence[Completion], **kwargs: Any) -> list[float | None]:
        from branchpoint.rewards.step import LABEL_COLUMNS

        n = len(completions)
        columns = {c: _column(kwargs, c, n) for c in LABEL_COLUMNS}
        return [
            step_score(first_action(c), {k: v[i] for k, v in columns.items()}, mode, price)
            for i, c in enumerate(completions)
        ]

    reward.__name__ = reward.__qualname__ = "step_reward"
    return reward


#: The default functions (rule judge; value-mode step reward at price 0).
outcome_reward = outcome_reward_func()
answer_reward = outcome_reward_func(only="answerable")
abstention_reward = outcome_reward_func(only="unanswerable")
step_reward = step_reward_func()
