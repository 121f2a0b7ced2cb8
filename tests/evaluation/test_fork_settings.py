"""Fork settings fingerprints: what enters them, what does not, and when a set of branches mixes
two settings (`evaluation.fork_settings`)."""

from __future__ import annotations

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.fork_settings import (
    ForkSettingsChoice,
    choose,
    derive_settings,
    fingerprint_of,
    view_groups,
    with_fork_settings,
)
from branchpoint.traces import ExecutionRecord


def branch(
    action: str, *, budget: int | None = None, seed: int = 1, repeat: int = 0, **sampling: float
) -> ExecutionRecord:
    cond: dict = {"fork.action": action, "fork.temperature": 0.6, "fork.top_p": 0.95}
    if budget is not None:
        cond["fork.search_budget"] = budget
    return ExecutionRecord(
        execution_id=f"{action}-{budget}-{seed}-{repeat}-{sorted(sampling.items())}",
        run_id="r",
        condition=cond,
        question_id="q",
        question="?",
        answerable=True,
        parent={"execution_id": "p", "checkpoint_id": "c", "boundary": "initial"},
        branch=action,
        repeat=repeat,
        sampling={"temperature": 0.6, "top_p": 0.95, "seed": seed, **sampling},
    )


def test_seed_and_repeat_do_not_enter_the_fingerprint_but_budget_and_sampling_do() -> None:
    a = fingerprint_of(branch("SEARCH", budget=3, seed=1, repeat=0))
    assert a == fingerprint_of(branch("SEARCH", budget=3, seed=99, repeat=5))
    assert a != fingerprint_of(branch("SEARCH", budget=1))
    assert a != fingerprint_of(branch("SEARCH", budget=3, temperature=1.0))
    assert a != fingerprint_of(branch("SEARCH", budget=3, top_k=5))
    # a completion request's neutral penalties are the same draw as a chat request without them
    assert a == fingerprint_of(branch("SEARCH", budget=3, frequency_penalty=0, presence_penalty=0))
    assert a == fingerprint_of(branch("SEARCH", budget=3, top_p=0.95))
    # the plan's sampling where a record has none; a run's own execution has no fork settings
    bare = branch("SEARCH", budget=3).model_copy(update={"sampling": None})
    assert fingerprint_of(bare) == a
    assert derive_settings(bare.model_copy(update={"parent": None})) is None


def test_the_written_fingerprint_is_the_derived_one() -> None:
    rec = with_fork_settings(branch("SWITCH", budget=2))
    assert rec.fork_settings == {"depth": 1, "search_budget": 2, "temperature": 0.6, "top_p": 0.95}
    assert rec.fork_fingerprint == fingerprint_of(branch("SWITCH", budget=2))


def test_think_branches_pool_with_any_budget_but_two_budgets_do_not() -> None:
    think = [branch("THINK", repeat=i) for i in range(2)]
    one = [branch("SEARCH", budget=1, repeat=i) for i in range(2)]
    three = [branch("SEARCH", budget=3, repeat=i) for i in range(2)]
    kept, summary = choose(think + one, ForkSettingsChoice(), "forks.jsonl")
    assert len(kept) == 4 and not summary["mixed"] and len(summary["fingerprints"]) == 2
    with pytest.raises(InputError) as err:
        choose(think + one + three, ForkSettingsChoice(), "forks.jsonl")
    fp1, fp3 = fingerprint_of(one[0]), fingerprint_of(three[0])
    assert str(err.value) == (
        f"forks.jsonl holds branches of two fork settings: search_budget=1 (fingerprint {fp1}) vs "
        f"search_budget=3 (fingerprint {fp3}); pass --mix-fork-settings to pool them, or --fork-settings "
        "FINGERPRINT to choose one"
    )
    kept, summary = choose(think + one + three, ForkSettingsChoice(fingerprint=fp3[:5]), "forks.jsonl")
    assert kept == think + three and summary["left_out"] == 2 and summary["chosen"] == fp3[:5]
    kept, summary = choose(think + one + three, ForkSettingsChoice(mix=True), "forks.jsonl")
    assert len(kept) == 6 and summary["mixed"] and summary["mix_allowed"]


def test_a_think_role_at_another_temperature_is_a_mix_too() -> None:
    with pytest.raises(InputError, match=r"temperature=0.6 .* vs temperature=1"):
        choose([branch("THINK"), branch("SEARCH", budget=3, temperature=1.0)], ForkSettingsChoice(), "f")


def test_a_fingerprint_that_matches_none_is_refused_listing_what_there_is() -> None:
    with pytest.raises(
        InputError, match=r"--fork-settings zz: no fork settings of f match \(it holds .*search_budget=1"
    ):
        choose([branch("SEARCH", budget=1)], ForkSettingsChoice(fingerprint="zz"), "f")


def test_the_viewer_keeps_two_budgets_apart_unless_value_chose_or_mixed() -> None:
    settings = [
        derive_settings(r) or {} for r in (branch("THINK"), branch("SEARCH", budget=1), branch("SEARCH", budget=3))
    ]
    tags, note = view_groups(settings, ForkSettingsChoice())
    assert tags == [None, "search_budget=1", "search_budget=3"]  # THINK is shared by both budgets
    assert note is not None and "no Δ" in note
    tags, note = view_groups(settings, ForkSettingsChoice(fingerprint="x"), chosen=settings[2])
    assert tags == [None, "search_budget=1", None] and "--fork-settings x" in (note or "")
    tags, note = view_groups(settings, ForkSettingsChoice(mix=True))
    assert tags == [None, None, None] and "pools" in (note or "")
    assert view_groups(settings[:2], ForkSettingsChoice()) == ([None, None], None)
