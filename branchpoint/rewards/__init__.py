"""Rewards for training search agents: outcome rewards (answer and abstention, judged as
branchpoint's evaluations judge) and step rewards from a fork study's exported labels, in the
shapes trainers call.

- verl: `branchpoint.rewards.verl.compute_score` and `compute_step_score`
  (`compute_score(data_source, solution_str, ground_truth, extra_info)`);
- TRL: `branchpoint.rewards.trl.outcome_reward`, `answer_reward`, `abstention_reward`,
  `step_reward` (`reward_func(prompts, completions, **kwargs)`), or the factories
  `outcome_reward_func(judge, only)` and `step_reward_func(mode, price)`;
- plain: `outcome_score(s)`, `step_score`, and the completion readers `final_answer`,
  `first_action`.

docs/training.md shows each with a trainer's call.
"""

from branchpoint.rewards.completions import final_answer, first_action
from branchpoint.rewards.outcome import Question, outcome_score, outcome_scores
from branchpoint.rewards.step import LABEL_COLUMNS, step_score

__all__ = [
    "LABEL_COLUMNS",
    "Question",
    "final_answer",
    "first_action",
    "outcome_score",
    "outcome_scores",
    "step_score",
]
