"""How verl and TRL call a reward function, written out as their code does it (read from their
sources; no line is copied), so tests call ours exactly so. Neither trainer is installed here:
each needs torch on a GPU stack.

- verl (volcengine/verl at b178a3cd56f58b2d502255daba591e92833930a7):
  `verl/workers/reward_manager/naive.py` lines 77-90: per response, `ground_truth` is
  `non_tensor_batch["reward_model"]["ground_truth"]`, `extra_info` the row's `extra_info` dict
  with `num_turns` and `rollout_reward_scores` set into it, then
  `compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)`, all by
  keyword; a dict result is read at `score` (lines 92-98).
  `verl/trainer/ppo/reward.py` lines 42-48 and 80-96 (`get_custom_reward_fn`): the function is
  loaded from `custom_reward_function.path` / `.name` (`verl/utils/import_utils.py` lines
  87-128, 184-197: `pkg://module.path` imports the module) and called with the config's
  `reward_kwargs` merged over the call's keywords.
- TRL (huggingface/trl at f2cd57710ae345ea6428ae95363267fcf38a3dc8):
  `trl/trainer/grpo_trainer.py` lines 1612-1627 (`_calculate_rewards`): every dataset column but
  `prompt`, `completion`, `completion_ids` becomes a keyword argument holding one value per
  completion, plus `trainer_state`, `log_extra`, `log_metric`; lines 1656-1664: a plain function
  is called as `reward_func(prompts=prompts, completions=completions,
  completion_ids=completion_ids_list, **reward_kwargs)` and None results become NaN. Completions
  (lines 2176-2189): conversational prompts give `[{"role": "assistant", "content": text}]` per
  completion, standard ones the decoded text; with tools, each later assistant turn is appended
  (lines 2123-2132) after the tool's `{"role": "tool", "name", "content"}` message (line 2007).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def verl_load(path: str, name: str, reward_kwargs: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """`get_custom_reward_fn` for a `pkg://` path: the object, with `reward_kwargs` merged over
    each call's keywords."""
    assert path.startswith("pkg://")
    raw = getattr(importlib.import_module(path[len("pkg://") :].replace("/", ".")), name)
    extra = dict(reward_kwargs or {})

    def call(*args: Any, **kwargs: Any) -> Any:
        return raw(*args, **{**kwargs, **extra})

    return call


def verl_score(fn: Callable[..., Any], row: Mapping[str, Any], response_str: str, num_turns: int | None = 2) -> float:
    """The naive reward manager's call for one response of a verl data row (`data_source`,
    `reward_model.ground_truth`, `extra_info`)."""
    extra_info = dict(row.get("extra_info", {}))
    extra_info["num_turns"] = num_turns
    extra_info["rollout_reward_scores"] = {}
    score = fn(
        data_source=row["data_source"],
        solution_str=response_str,
        ground_truth=row["reward_model"]["ground_truth"],
        extra_info=extra_info,
    )
    return float(score["score"] if isinstance(score, dict) else score)


class TrainerState:
    """Stands in for `transformers.TrainerState` in the keyword TRL passes (the functions here
    do not read it)."""

    global_step = 0


def trl_rewards(
    fn: Callable[..., Any], inputs: Sequence[Mapping[str, Any]], completions: Sequence[Any]
) -> list[float | None]:
    """`_calculate_rewards` for one plain reward function: `inputs` are the dataset rows (one per
    completion, the group's rows repeated), each with its `prompt`."""
    prompts = [x["prompt"] for x in inputs]
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
    reward_kwargs: dict[str, Any] = {k: [x[k] for x in inputs] for k in keys}
    reward_kwargs["trainer_state"] = TrainerState()
    logged: dict[str, list[Any]] = {}
    reward_kwargs["log_extra"] = lambda column, values: logged.setdefault(column, []).extend(values)
    reward_kwargs["log_metric"] = lambda name, value: logged.setdefault(name, []).append(value)
    completion_ids = [[1, 2, 3] for _ in completions]
    out = fn(prompts=prompts, completions=completions, completion_ids=completion_ids, **reward_kwargs)
    assert len(out) == len(completions)
    return list(out)
