"""Shards: stable names per condition, and each node's model server for its workers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from branchpoint.experiments import load_spec
from branchpoint.experiments.planning import plan_executions, select_questions
from branchpoint.experiments.shards import MODEL_URL_ENV, node_model_spec, shard_name

SPEC = {
    "name": "shards-unit",
    "questions": {"path": "demo", "limit": 2},
    "model": {"provider": "scripted", "script": ['answer", "text": "Canberra"}'], "max_tokens": 32},
    "agent": {"policy": "constrained", "search": False},
    "sweep": {"agent.evidence_words": [40, 60]},
}


@pytest.fixture()
def spec_path(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    return path


def test_node_model_url_replaces_base_url_and_keeps_ids(spec_path):
    spec = load_spec(spec_path)
    node = node_model_spec(spec, {MODEL_URL_ENV: "http://10.0.0.7:8000/v1"})
    assert node.model.base_url == "http://10.0.0.7:8000/v1"
    assert node_model_spec(spec, {}) is spec
    questions = select_questions(spec)
    ids = [p.execution_id for p in plan_executions(spec, questions)]
    assert [p.execution_id for p in plan_executions(node, questions)] == ids


def test_one_shard_per_condition_with_a_stable_name(spec_path):
    spec = load_spec(spec_path)
    plan = plan_executions(spec, select_questions(spec))
    names = [shard_name(p) for p in plan]
    assert len(set(names)) == 2 and all(n.startswith("cond-") for n in names)
    assert names == [shard_name(p) for p in plan_executions(spec, select_questions(spec))]
    assert {shard_name(p) for p in plan if p.condition == plan[0].condition} == {names[0]}
