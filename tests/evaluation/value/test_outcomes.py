"""States from forked records: roles, exclusions, shared judgments, rewards, components, dev split."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.value.outcomes import Roles, build_states, dev_split, support_components
from branchpoint.evaluation.value.rewards import answer_items, reward, set_f1
from tests.evaluation.value.helpers import fork_record, make_states


def study_records():
    recs = []
    for rep, label in enumerate(["CORRECT", "INCORRECT", "CORRECT"]):
        recs.append(fork_record("p1", "c1", "THINK", rep, label=label))
    for rep in range(2):
        recs.append(fork_record("p1", "c1", "SEARCH", rep, label="CORRECT", tokens=(400, 20)))
    # a pending query: STOP plays THINK, SEARCH plays SEARCH, SWITCH plays no role by default
    for branch in ("STOP", "SEARCH", "SWITCH"):
        for rep in range(2):
            recs.append(
                fork_record(
                    "p1",
                    "c2",
                    branch,
                    rep,
                    boundary="pending_query",
                    label="CORRECT" if branch != "STOP" else "INCORRECT",
                )
            )
    recs.append(fork_record("p2", "c1", "THINK", 0))  # one THINK repeat only
    recs.append(fork_record("p2", "c1", "SEARCH", 0))
    recs.append(fork_record("p2", "c1", "SEARCH", 1))
    recs.append(fork_record("p3", "c1", "THINK", 0))  # no SEARCH at all
    recs.append(fork_record("p3", "c1", "THINK", 1))
    recs.append(fork_record("p1", "c1", "THINK", 3, status="incomplete"))
    return recs


def test_states_roles_and_what_is_left_out():
    states = build_states(study_records(), judge="given")
    assert states.keys == [("p1", "c1"), ("p1", "c2")]
    assert [y.tolist() for y in states.think.y] == [[1.0, 0.0, 1.0], [0.0, 0.0]]
    assert [y.tolist() for y in states.search.y] == [[1.0, 1.0], [1.0, 1.0]]
    assert states.t_action == ["THINK", "STOP"] and states.s_action == ["SEARCH", "SEARCH"]
    assert states.search.mean_tokens.tolist() == [420.0, 110.0]
    c = states.counts
    assert (c.incomplete, c.other_action, c.few_repeats, c.missing_role) == (1, 2, 1, 1)
    assert states.excluded_keys == {("p2", "c1"), ("p3", "c1")}

    switch = build_states(study_records(), judge="given", roles=Roles(pending=("STOP", "SWITCH")))
    assert switch.s_action == ["SEARCH", "SWITCH"] and switch.counts.other_action == 2
    with pytest.raises(InputError, match="--pending-roles"):
        Roles(pending=("THINK", "SEARCH"))


def test_retried_records_count_once_last_wins():
    recs = study_records()
    retry = fork_record("p1", "c1", "THINK", 1, label="CORRECT")  # same id as the INCORRECT repeat
    states = build_states(recs + [retry], judge="given")
    assert states.think.y[0].tolist() == [1.0, 1.0, 1.0]


def test_identical_answers_share_one_judgment():
    recs = [
        fork_record("p", "c", b, r, answer=a, gold=["Paris"])
        for b, answers in (("THINK", ["Paris", "Paris", "Rome"]), ("SEARCH", ["Paris", "Paris"]))
        for r, a in enumerate(answers)
    ]
    states = build_states(recs, judge="rule")
    assert states.think.y[0].tolist() == [1.0, 1.0, 0.0]
    assert states.counts.judged_records == 5 and states.counts.judge_calls == 2


def test_set_f1_reward_for_collection_answers():
    assert answer_items("Paris, Rome and the Berlin; rome") == {"paris", "rome", "berlin"}
    assert answer_items("I don't know") == set()
    assert set_f1({"a", "b"}, {"b", "c", "d"}) == pytest.approx(2 * 1 / 5)
    assert set_f1(set(), set()) == 1.0
    recs = [
        fork_record("p", "c", b, r, answer=a, gold=["Paris", "Rome"])
        for b, answers in (("THINK", ["Paris", "Paris and Rome"]), ("SEARCH", ["Rome, Oslo", "x"]))
        for r, a in enumerate(answers)
    ]
    states = build_states(recs, reward_name="set_f1")
    assert states.think.y[0] == pytest.approx([2 / 3, 1.0])
    assert states.search.y[0] == pytest.approx([0.5, 0.0])


def test_set_f1_reward_scores_invalid_and_length_outputs_zero():
    from branchpoint.evaluation.value.rewards import InvalidItems

    assert answer_items('["Paris", "rome"]') == {"paris", "rome"}
    assert answer_items('{"items": ["Oslo"]}') == {"oslo"}
    assert answer_items("Paris; Rome (it did not include Milan)") == {"paris", "rome it did not include milan"}
    with pytest.raises(InvalidItems):
        answer_items('["Paris", ')
    with pytest.raises(InvalidItems):
        answer_items('{"items": "Paris"}')
    answers = [
        ('["Paris", "Rome"]', "ok"),
        ('["Paris", ', "ok"),
        ("Paris, Rome", "length"),
        ("Paris, Rome", "malformed"),
        ("Paris, Oslo, Rome", "ok"),
        ("Unknown", "ok"),
    ]
    recs = [
        fork_record("p", "c", "SEARCH" if i % 2 else "THINK", i // 2, answer=a, status=st, gold=["Paris", "Rome"])
        for i, (a, st) in enumerate(answers)
    ]
    states = build_states(recs, reward_name="set_f1")
    # THINK: valid JSON (1.0), length failure (0), P={paris, oslo, rome} vs G={paris, rome}: 2·2/5
    assert states.think.y[0] == pytest.approx([1.0, 0.0, 0.8])
    # SEARCH: broken JSON (invalid: 0), malformed (0), UNKNOWN names nothing (0)
    assert states.search.y[0] == pytest.approx([0.0, 0.0, 0.0])


def test_a_reward_outside_zero_one_is_refused():
    @reward("test_out_of_range")
    def bad(records, judge):
        return np.full(len(records), 2.0)

    with pytest.raises(InputError, match=r"in \[0, 1\]"):
        build_states(study_records(), reward_name="test_out_of_range")
    with pytest.raises(InputError, match='unknown reward "nope"'):
        build_states(study_records(), reward_name="nope")


def test_questions_sharing_a_page_form_one_component():
    recs = [
        fork_record("a", "c", "THINK", 0, question_id="q1", support_group="page-A"),
        fork_record("b", "c", "THINK", 0, question_id="q2", support_group="page-A"),
        fork_record("c", "c", "THINK", 0, question_id="q3", support_group="page-B"),
        fork_record("d", "c", "THINK", 0, question_id="q4", support_group="page-C"),
        fork_record("e", "c", "THINK", 0, question_id="q5"),
    ]
    recs[2] = recs[2].model_copy(update={"support": ["page-B", "page-C"]})  # a foreign trace's list
    comps = support_components(recs)
    assert comps == {"q1": "q1", "q2": "q1", "q3": "q3", "q4": "q3", "q5": "q5"}


def test_dev_split_is_by_component_and_seeded():
    states = make_states([[1, 0]] * 20, [[1, 1]] * 20, components=[f"g{i // 2}" for i in range(20)])
    dev = dev_split(states, 0.3, seed=4)
    assert dev.sum() == 6  # 3 of 10 components, 2 states each
    for comp in set(states.component):
        assert len(set(dev[states.component == comp])) == 1
    np.testing.assert_array_equal(dev, dev_split(states, 0.3, seed=4))
    assert not np.array_equal(dev, dev_split(states, 0.3, seed=5))
    assert not dev_split(states, 0.0).any()
    with pytest.raises(InputError, match="--dev-split"):
        dev_split(states, 1.0)
