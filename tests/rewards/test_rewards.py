"""Outcome and step rewards called as verl and TRL call them (tests/rewards/trainers.py cites
the trainers' lines), on completions in each of branchpoint's protocols."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.tally import is_correct
from branchpoint.rewards import Question, final_answer, first_action, outcome_scores, step_score
from branchpoint.rewards import trl as trl_rewards_module
from branchpoint.rewards import verl as verl_rewards_module
from branchpoint.traces import ExecutionRecord
from tests.rewards.trainers import trl_rewards, verl_load, verl_score

GOLD = ["Canberra"]

TEXTS = {
    # Search-R1 tags: the last <answer> counts (as Search-R1's extract_solution reads it)
    "<think>Sydney? no.</think><answer>Sydney</answer> later <answer>Canberra</answer>": ("answer", "Canberra"),
    "<think>I should look</think><search>capital of Australia</search>": ("search", None),
    "<answer>Canberra": (None, None),  # an unclosed tag decides nothing
    # the few-shot JSON decision, whole or continued after its prefix
    '{"action": "answer", "text": "Canberra"}': ("answer", "Canberra"),
    'search", "text": "capital of Australia"}': ("search", None),
    # a native policy's final content
    "Canberra": ("answer", "Canberra"),
    "   ": (None, None),
}


@pytest.mark.parametrize("text", list(TEXTS))
def test_completion_readers(text):
    action, answer = TEXTS[text]
    assert first_action(text) == action
    assert final_answer(text) == answer


def test_conversational_completions():
    tool_turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "q"}}}],
    }
    rollout = [
        tool_turn,
        {"role": "tool", "name": "search", "content": "Doc 1 ..."},
        {"role": "assistant", "content": "Canberra"},
    ]
    assert first_action(rollout) == "search" and final_answer(rollout) == "Canberra"
    assert first_action([{"role": "assistant", "content": "Canberra"}]) == "answer"
    assert final_answer([tool_turn]) is None  # cut off after a search: no answer


def test_outcome_reward_is_the_fork_studies_correctness():
    """The reward of an answer is `is_correct` under the rule judge of a record holding it."""
    cases = [
        ("Canberra", Question(GOLD, True)),
        ("Sydney", Question(GOLD, True)),
        (None, Question(GOLD, True)),
        ("I don't know; nobody can know that.", Question([], False, category="AU")),
        ("Paris", Question([], False, category="AU")),
    ]
    got = outcome_scores([a for a, _ in cases], [q for _, q in cases])
    records = [
        ExecutionRecord(
            execution_id=f"e{i}",
            run_id="r",
            question_id="q",
            question="",
            answerable=q.answerable,
            gold_answers=q.gold_answers,
            status="ok" if a is not None else "malformed",
            final_answer=a,
        )
        for i, (a, q) in enumerate(cases)
    ]
    want = [float(is_correct(r, "rule")) for r in judge_records(records, "rule")]
    assert got == want and got == [1.0, 0.0, 0.0, 1.0, 0.0]


def test_verl_compute_score_as_the_naive_manager_calls_it():
    fn = verl_load("pkg://branchpoint.rewards.verl", "compute_score", {"judge": "rule"})
    row = {
        "data_source": "branchpoint_demo",
        # a Parquet list column is a numpy array in verl's non_tensor_batch
        "reward_model": {"ground_truth": {"target": np.array(GOLD, dtype=object)}},
        "extra_info": {"question": "What is the capital of Australia?"},
    }
    assert verl_score(fn, row, "<think>hm</think><answer>Canberra</answer>") == 1.0
    assert verl_score(fn, row, "<answer>Sydney</answer>") == 0.0
    assert verl_score(fn, row, "<search>capital</search>") == 0.0
    unanswerable = {
        "data_source": "d",
        "reward_model": {"ground_truth": {"target": []}},
        "extra_info": {"answerable": False},
    }
    assert verl_score(fn, unanswerable, "<answer>I don't know: it cannot be known.</answer>") == 1.0
    assert verl_score(fn, unanswerable, "<answer>42</answer>") == 0.0
    # answerability given in extra_info wins over the default (gold answers present: answerable)
    flagged = {"data_source": "d", "reward_model": {"ground_truth": GOLD}, "extra_info": {"answerable": False}}
    assert verl_score(fn, flagged, "<answer>I don't know: it cannot be known.</answer>") == 1.0
    assert verl_rewards_module.compute_score.__name__ == "compute_score"


LABELS = {"p_think": 0.25, "p_search": 0.75, "tokens_think": 100.0, "tokens_search": 2100.0, "search_needed": True}


def test_verl_step_score_reads_the_labels_from_extra_info():
    row = {"data_source": "d", "reward_model": {"ground_truth": GOLD}, "extra_info": dict(LABELS)}
    value = verl_load("pkg://branchpoint.rewards.verl", "compute_step_score", {"mode": "value", "price": 0.01})
    assert verl_score(value, row, "<search>q</search>") == pytest.approx(0.75 - 0.01 * 2.1)
    assert verl_score(value, row, "<answer>Canberra</answer>") == pytest.approx(0.25 - 0.01 * 0.1)
    label = verl_load("pkg://branchpoint.rewards.verl", "compute_step_score", {"mode": "label"})
    assert verl_score(label, row, "<search>q</search>") == 1.0
    assert verl_score(label, row, "Canberra") == 0.0
    assert verl_score(label, row, "<search>q") == 0.0  # no decision


def test_trl_outcome_rewards_standard_and_conversational():
    rows = [
        {"prompt": "Q: capital of Australia?", "gold_answers": GOLD, "answerable": True},
        {"prompt": "Q: grains of sand?", "gold_answers": [], "answerable": False},
    ]
    completions = ["<answer>Canberra</answer>", "<answer>I don't know; it cannot be counted.</answer>"]
    assert trl_rewards(trl_rewards_module.outcome_reward, rows, completions) == [1.0, 1.0]
    assert trl_rewards(trl_rewards_module.answer_reward, rows, completions) == [1.0, None]
    assert trl_rewards(trl_rewards_module.abstention_reward, rows, completions) == [None, 1.0]
    chat_rows = [{**r, "prompt": [{"role": "user", "content": r["prompt"]}]} for r in rows]
    chat = [[{"role": "assistant", "content": "Sydney"}], [{"role": "assistant", "content": "About 7 quintillion."}]]
    assert trl_rewards(trl_rewards_module.outcome_reward, chat_rows, chat) == [0.0, 0.0]
    assert trl_rewards_module.outcome_reward.__name__ == "outcome_reward"


def test_trl_missing_column_is_named():
    with pytest.raises(ValueError, match="no `gold_answers` column"):
        trl_rewards(trl_rewards_module.outcome_reward, [{"prompt": "x"}], ["y"])
    with pytest.raises(ValueError, match="p_think"):
        trl_rewards(trl_rewards_module.step_reward, [{"prompt": "x"}], ["y"])


def test_step_score_modes():
    assert step_score("search", LABELS) == 0.75 and step_score("answer", LABELS) == 0.25
    assert step_score(None, LABELS) == 0.0
    assert step_score("answer", {**LABELS, "search_needed": False}, mode="label") == 1.0
    with pytest.raises(ValueError, match="mode"):
        step_score("search", LABELS, mode="q")
