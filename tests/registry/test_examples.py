"""The four "add a new ..." examples of the docs (policy, LLM judge, source kind, forecaster):
each one file under tests/registry/examples, registered by importing it and working end to end."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest

from branchpoint.agents import (
    AgentContext,
    build_graph,
    initial_state,
    recursion_limit,
    resolve_policy,
)
from branchpoint.evaluation.judge_options import judge_from_options
from branchpoint.evaluation.judges import JudgeRun, build_judge
from branchpoint.evaluation.value.forecasters import (
    registered_forecasters,
    run_forecaster,
)
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.models import ScriptedModel
from branchpoint.registry import REGISTRY
from branchpoint.tools import SearchTool
from tests.evaluation.builders import make_record
from tests.evaluation.fake_openai import CHAT, chat_body, fake_openai
from tests.graphs import invoke

EXAMPLES = (
    "search_first_policy",
    "strict_llm_judge",
    "token_f1_judge",
    "keyword_source",
    "evidence_count_forecaster",
    "conformance_checks",
)
PASSAGES = {
    "d1": "Canberra is the capital of Australia.",
    "d2": "Sydney is the largest city in Australia.",
}


@pytest.fixture()
def ex(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """The example modules, imported (so registered) for one test: the registry gets back its
    entries afterwards, so other tests see only the built-in components."""
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    names = [f"tests.registry.examples.{name}" for name in EXAMPLES]
    for name in names:
        sys.modules.pop(name, None)
    yield SimpleNamespace(**{name: importlib.import_module(f"tests.registry.examples.{name}") for name in EXAMPLES})
    for name in names:
        sys.modules.pop(name, None)


def test_the_source_kind_validates_and_opens_itself(ex: SimpleNamespace) -> None:
    spec = ExperimentSpec(
        name="x",
        retrieval={
            "default": "notes",
            "sources": {"notes": {"kind": "keyword", "passages": PASSAGES}},
        },
    )
    notes = spec.retrieval.sources["notes"]
    assert isinstance(notes, ex.keyword_source.KeywordSourceSpec)
    assert notes.open("notes").search("capital of Australia", 1)[0].doc_id == "d1"
    assert ExperimentSpec.model_validate(spec.model_dump()).retrieval.sources["notes"] == notes
    assert "keyword" in REGISTRY.names("source")


def test_the_policy_runs_in_the_graph(ex: SimpleNamespace) -> None:
    source = ex.keyword_source.KeywordSourceSpec(passages=PASSAGES).open("notes")
    model = ScriptedModel(['answer", "text": "Canberra"}'])
    ctx = AgentContext(
        model=model,
        search=SearchTool({"notes": source}, "notes", top_k=1),
        search_cap=2,
    )
    graph = build_graph(resolve_policy("search-first"))
    out = invoke(
        graph,
        initial_state("q1", "What is the capital of Australia?", "notes"),
        {"recursion_limit": recursion_limit(2)},
        context=ctx,
    )
    assert out["searches"] == 1 and out["final_answer"] == "Canberra"
    assert resolve_policy("search-first").node is ex.search_first_policy.search_first


def test_the_llm_judge_is_built_from_a_model_spec(tmp_path, ex: SimpleNamespace) -> None:
    with fake_openai() as server:
        server.reply(CHAT, (200, chat_body("LABEL: INCORRECT")))
        judge = build_judge(
            "llm-strict",
            {"model": {"name": "m", "base_url": server.base_url}, "evidence": False},
            JudgeRun(tmp_path / "cache.sqlite"),
        )
        [judgments] = judge.judge_many([make_record("a", gold=["Canberra"], answer="Maybe Canberra?")])
        [body] = server.bodies(CHAT)
    assert [(j.judge, j.label, j.prompt_version) for j in judgments] == [
        ("llm-strict:m", "INCORRECT", "answer-strict-v1")
    ]
    assert "a hedge is INCORRECT" in body["messages"][0]["content"]
    # the same judge from the command line (`evaluate --judge llm-strict ...`) and from a spec
    cli = judge_from_options(
        "llm-strict", tmp_path, model="m", base_url="http://127.0.0.1:9/v1", evidence=False, progress=False
    )
    spec = ExperimentSpec(
        name="x",
        evaluation={
            "judge": "llm-strict",
            "evidence": False,
            "model": {"name": "m", "base_url": "http://127.0.0.1:9/v1"},
        },
    )
    from_spec = spec.evaluation.open_judge(tmp_path)
    for built in (cli, from_spec):
        assert built.name == "llm-strict:m" and built.prompts["answer"] is ex.strict_llm_judge.STRICT_ANSWER
        assert not built.evidence and built.retries == 1


def test_the_forecaster_is_scored_with_the_others(ex: SimpleNamespace) -> None:
    [entry] = [e for e in registered_forecasters() if e.name == "early_search_gain"]
    assert entry.fn is ex.evidence_count_forecaster.early_search_gain and not entry.fitted
    fc = run_forecaster(
        entry,
        _Sized(SimpleNamespace(prefix_steps=[0, 1, None, 3])),
        np.array([], dtype=int),
    )
    assert np.allclose(fc.q_search, [0.6, 0.3, 0.6, 0.15]) and np.allclose(fc.q_think, 0.4)


class _Sized:
    """A state table stand-in with the one column the example reads."""

    def __init__(self, ns: SimpleNamespace) -> None:
        self.prefix_steps = ns.prefix_steps

    def __len__(self) -> int:
        return len(self.prefix_steps)


def test_the_extending_page_shows_each_example_file_as_it_is():
    """docs/extending.md includes each example file (snippets), so the page cannot drift from
    the code these tests run."""
    from tests.conftest import REPO

    page = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")
    for name in EXAMPLES:
        assert f'--8<-- "tests/registry/examples/{name}.py"' in page, name


def test_the_example_components_pass_the_conformance_kit(ex: SimpleNamespace) -> None:
    """The page's conformance example, as a plug-in's own test runs it."""
    ex.conformance_checks.test_my_components_conform()
