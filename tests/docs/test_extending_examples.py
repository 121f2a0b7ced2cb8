"""The four one-file examples of docs/extending.md (policy, LLM judge, source kind, forecaster):
each block runs as written and registers its component, into a registry of the test's own (so
the package's registry is never touched), and the judge, source and forecaster work."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import branchpoint.registry
from branchpoint.models.spec import ModelSpec
from branchpoint.registry import Registry
from tests.conftest import REPO

PAGE = REPO / "docs" / "extending.md"


def example(heading: str) -> str:
    """The first python block under `## heading`."""
    section = PAGE.read_text(encoding="utf-8").split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"docs/extending.md: no python block under {heading!r}"
    return match.group(1)


@pytest.fixture
def registry(monkeypatch):
    """A fresh registry that `from branchpoint.registry import register` hands to the examples."""
    fresh = Registry()
    monkeypatch.setattr(branchpoint.registry, "register", fresh.register)
    return fresh


def run_example(heading: str) -> dict:
    namespace: dict = {"__name__": "docs_example"}
    exec(compile(example(heading), f"extending.md:{heading}", "exec", dont_inherit=True), namespace)  # noqa: S102 (our own page)
    return namespace


def test_the_policy_example_registers_a_decide_node(registry):
    ns = run_example("Add a policy")
    entry = registry.get("policy", "search_first")
    assert entry.obj is ns["search_first"] and callable(entry.obj)


def test_the_llm_judge_example_is_a_factory_of_an_llm_judge(registry):
    from branchpoint.evaluation.llm_judges import LLMJudge

    run_example("Add an LLM judge")
    factory = registry.get("judge", "llm-strict").obj
    judge = factory(ModelSpec(provider="openai", name="m", base_url="http://127.0.0.1:9/v1", style="chat"), retries=2)
    assert isinstance(judge, LLMJudge) and judge.name == "llm-strict:m" and judge.retries == 2
    assert judge.prompts["answer"].version == "strict-answer-v1"
    assert "{response}" in judge.prompts["answer"].template


def test_the_source_kind_example_validates_and_searches(registry, tmp_path):
    from pydantic import ValidationError

    run_example("Add a retrieval source kind")
    spec_class = registry.get("source", "keyword").obj
    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "contents": "\"Canberra\"\nCanberra is the capital of Australia."},
        {"id": "b", "contents": "\"Sydney\"\nSydney is the largest city of Australia."}]) + "\n")
    source = spec_class(kind="keyword", corpus=str(corpus)).open("grep")
    docs = source.search("capital australia", 3)
    assert [d.doc_id for d in docs] == ["a"] and docs[0].source == "grep"
    assert len(source.search("australia", 1)) == 1 and source.cache_params.startswith("keyword:")
    with pytest.raises(ValidationError):
        spec_class(kind="keyword", corpus=str(corpus), url="http://x")


def test_the_forecaster_example_forecasts_every_state(registry):
    run_example("Add a search-value forecaster")
    fn = registry.get("forecaster", "search_when_nothing_in_hand").obj

    class States:  # the columns the example reads
        boundary_kind = np.array(["initial", "after_search_k", "pending_query"])

        def __len__(self):
            return 3

    q_think, q_search = fn(States(), np.zeros(3, bool))
    assert q_think.tolist() == [0.2, 0.6, 0.6] and q_search.tolist() == [0.7] * 3


def test_the_plug_in_table_names_the_entry_point_group():
    text = PAGE.read_text(encoding="utf-8")
    assert f'[project.entry-points."{branchpoint.registry.PLUGIN_GROUP}"]' in text
