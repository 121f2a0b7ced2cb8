"""The conformance kit (`branchpoint.testing`) passes every registered built-in policy, judge,
source kind, forecaster and router, and fails a deliberately broken plug-in of each kind with
an error naming it and the rule it broke."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

import numpy as np
import pytest

from branchpoint.evaluation.judges import JudgeRun, judge_records
from branchpoint.evaluation.value.forecasters import Forecast
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.retrieval.server import RetrievalService, running_server
from branchpoint.retrieval.sources.base import SourceSpec, source_class
from branchpoint.testing import (
    KeywordSource,
    check_forecaster,
    check_judge,
    check_policy,
    check_router,
    check_source,
    conforms,
    registered,
)
from branchpoint.testing.demo import demo_passages, sample_records
from branchpoint.traces import Judgment, RetrievedDoc
from tests.evaluation.fake_openai import CHAT, chat_body, fake_openai

#: Settings each built-in source kind is checked with (the others take their defaults: the demo
#: corpus), and the kinds that reorder or draw results on purpose (`ranked=False`).
SOURCE_SETTINGS: dict[str, dict[str, Any]] = {"noisy": {"p": 0.5}}
UNRANKED = {"random", "noisy", "shuffled"}
BUILTIN_SOURCES = ["bm25", "dense", "empty", "noisy", "oracle", "random", "searchr1", "shuffled", "withheld"]


@pytest.fixture()
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plug-ins registered by a test are gone afterwards."""
    for kind in ("policy", "judge", "source", "forecaster", "router"):
        REGISTRY.names(kind)
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    yield


# --- every built-in passes --------------------------------------------------------------------


@pytest.mark.parametrize("name", registered("policy"))
def test_every_builtin_policy_conforms(name: str) -> None:
    out = conforms("policy", name)
    assert out["status"] == "ok" and out["final_answer"] == "Canberra"


def test_every_builtin_judge_conforms(tmp_path) -> None:
    assert registered("judge") == ["given", "llm", "llm-answer", "rule"]
    rule = check_judge("rule")
    assert [j.label for j in rule[0] if j.kind == "answer"] == ["CORRECT"]
    check_judge("given", records=judge_records(sample_records(), "rule"))
    with fake_openai() as server:
        server.reply(CHAT, (200, chat_body("LABEL: CORRECT")))
        for name in ("llm", "llm-answer"):
            settings = {"model": {"name": "m", "base_url": server.base_url}}
            judged = check_judge(name, settings, run=JudgeRun(tmp_path / f"{name}.sqlite"))
            assert any(j.label == "CORRECT" for js in judged for j in js), name


def test_every_builtin_source_kind_conforms() -> None:
    from branchpoint.retrieval.encoder import get_encoder
    from branchpoint.retrieval.index import DenseIndex

    assert registered("source") == BUILTIN_SOURCES  # a new built-in kind is checked here too
    for kind in BUILTIN_SOURCES:
        if kind == "searchr1":
            continue
        source = check_source(source_class(kind)(**SOURCE_SETTINGS.get(kind, {})), ranked=kind not in UNRANKED)
        assert source.name == "kit", kind
    index = DenseIndex.build(demo_passages()[:20], get_encoder())
    with running_server(RetrievalService(index)) as base:
        check_source(source_class("searchr1")(url=f"{base}/retrieve"))


def test_every_builtin_forecaster_and_router_conforms() -> None:
    for name in registered("forecaster"):
        fc = check_forecaster(name)
        assert isinstance(fc, Forecast), f"{name} did not run on the kit's states: {fc}"
    assert registered("router") == ["always_search", "always_think"]
    assert check_router("always_search").tolist() == [1.0] * 24
    assert check_router("always_think").sum() == 0


# --- a broken plug-in of each kind fails ----------------------------------------------------------


def writes_the_state(state, runtime):
    """Broken: writes into the state it is given instead of returning an update."""
    state["searches"] = 5
    return {"final_answer": "Canberra", "status": "ok"}


CALLS = {"n": 0}


def prompts_from_a_counter(state, runtime):
    """Broken: its prompt depends on how often it ran, not on the state alone."""
    CALLS["n"] += 1
    runtime.context.model.complete(f"attempt {CALLS['n']}: {state['question']}")
    return {"final_answer": "Canberra", "status": "ok"}


def unknown_channel(state, runtime):
    """Broken: writes a key that is no state channel."""
    return {"final_answer": "Canberra", "answer_confidence": 0.9}


def test_broken_policies_fail_with_what_they_broke(scratch_registry) -> None:
    with pytest.raises(AssertionError, match=r'policy "writes_the_state": .*changed the state it was given'):
        check_policy(writes_the_state)
    with pytest.raises(AssertionError, match=r'policy "prompts_from_a_counter": the same state gave other requests'):
        check_policy(prompts_from_a_counter)
    with pytest.raises(AssertionError, match=r"no state channel: answer_confidence"):
        check_policy(unknown_channel)
    with pytest.raises(
        RegistryError, match=r'policy "no-args" \(.*\): it does not take \(state\) or \(state, runtime\)'
    ):
        REGISTRY.add("policy", "no-args", lambda: {})
    with pytest.raises(AssertionError, match=r'policy "<lambda>".*does not take \(state\)'):
        check_policy(lambda: {})


def test_broken_judges_fail_with_what_they_broke(scratch_registry) -> None:
    def maybe_judge(record):
        return [Judgment(judge="maybe_judge", kind="answer", label="MAYBE")]

    def someone_else(record):
        return [Judgment(judge="other", kind="answer", label="CORRECT")]

    def evidence_for_nothing(record):
        return [Judgment(judge="evidence_for_nothing", kind="evidence", label="POSITIVE", doc_id="not-retrieved")]

    with pytest.raises(AssertionError, match=r'judge "maybe_judge": record kit-0: label "MAYBE" for kind answer'):
        check_judge(maybe_judge)
    with pytest.raises(AssertionError, match=r'a judgment stamped "other", not the judge\'s own name'):
        check_judge(someone_else)
    with pytest.raises(AssertionError, match=r"evidence judgment of doc_id 'not-retrieved'"):
        check_judge(evidence_for_nothing)
    with pytest.raises(RegistryError, match=r'judge "factory" .*does not take the arguments \(settings, run\)'):
        from pydantic import BaseModel

        class Settings(BaseModel):
            threshold: float = 0.5

        REGISTRY.add("judge", "factory", lambda settings: None, settings=Settings)


class UnsortedSpec(SourceSpec):
    """Broken: a source kind whose results are not best first, and one more than asked."""

    kind: Literal["unsorted"] = "unsorted"
    extra_doc: bool = False
    unused_fields: ClassVar = {}

    def open(self, name: str, *, progress: bool = False) -> Any:
        spec = self

        class Unsorted(KeywordSource):
            def search(self, query: str, k: int) -> list[RetrievedDoc]:
                docs = list(reversed(super().search(query, k + 1)))
                return docs if spec.extra_doc else docs[:k]

        return Unsorted(name)


def test_broken_sources_fail_with_what_they_broke() -> None:
    with pytest.raises(
        AssertionError, match=r'source "kit": search\(\'capital of Australia\', 3\): scores .* not best first'
    ):
        check_source(UnsortedSpec())
    with pytest.raises(AssertionError, match=r"search\('capital of Australia', 3\) returned 4 documents"):
        check_source(UnsortedSpec(extra_doc=True))
    with pytest.raises(AssertionError, match=r"is not a RetrievalSource"):
        check_source(object())
    with pytest.raises(RegistryError, match=r'source "no-open" .*: its `open` is abstract'):

        class NoOpen(SourceSpec):
            kind: Literal["no-open"] = "no-open"

        REGISTRY.add("source", "no-open", NoOpen)


def test_broken_forecasters_and_routers_fail_with_what_they_broke() -> None:
    def peeks_at_test_outcomes(states, dev):
        return states.think.mean_y, states.search.mean_y  # every row's outcomes: not in the view

    def overconfident(states, dev):
        return np.full(len(states), 1.5), np.full(len(states), 0.5)

    def search_everywhere_twice(states, dev, price):
        return np.ones(2 * len(states))

    def unseeded(states, dev, price):  # broken: a different rule on every run
        return np.random.default_rng().random(len(states))

    with pytest.raises(AssertionError, match=r'forecaster "peeks_at_test_outcomes": .*`states.think`.*not in it'):
        check_forecaster(peeks_at_test_outcomes)
    with pytest.raises(AssertionError, match=r'forecaster "overconfident": q_think must be probabilities in \[0, 1\]'):
        check_forecaster(overconfident)
    with pytest.raises(
        AssertionError, match=r'router "search_everywhere_twice": returned shape \(48,\), expected \(24,\)'
    ):
        check_router(search_everywhere_twice)
    with pytest.raises(AssertionError, match=r'router "unseeded": its P\(SEARCH\) changed'):
        check_router(unseeded)
    with pytest.raises(AssertionError, match=r'router "<lambda>" .*does not take the arguments \(states, dev, price\)'):
        check_router(lambda states, dev: None)
