"""Every shipped spec in experiments/ runs as it says: it loads, names the model the embedded
server really loads, and plans (sources, policies, multi-turn histories) at full size and at
the `--limit` its comments suggest."""

from __future__ import annotations

import pytest
import yaml

from branchpoint.errors import InputError
from branchpoint.experiments.planning import plan_executions, select_questions
from branchpoint.experiments.spec import load_spec
from tests.conftest import REPO

SPECS = sorted((REPO / "experiments").glob("*.yaml"))
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_every_shipped_spec_loads_and_plans(path, monkeypatch):
    monkeypatch.chdir(REPO)  # relative corpus paths (../shared/data) are meant from the repo root
    if "../shared/data" in path.read_text() and not SHARED_DATA.is_dir():
        pytest.skip(f"{path.name} reads ../shared/data, which is absent here")
    for overrides in ([], ["questions.limit=4"]):
        spec = load_spec(path, overrides)
        plan = plan_executions(spec, select_questions(spec))
        assert plan, f"{path.name}: nothing planned"
        if spec.multi_turn:  # every planned execution of a multi-turn spec has its earlier turns
            assert all(len(p.history) == p.spec.multi_turn.preceding for p in plan)


def test_embedded_model_name_must_be_the_model_it_loads(tmp_path):
    data = yaml.safe_load((REPO / "experiments" / "with_without_search.yaml").read_text())
    data["sweep"]["model.name"] = ["Qwen/Qwen3-8B"]  # what the spec used to do
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        InputError, match=r'field "model.name" \(sweep condition .*Qwen/Qwen3-8B.*loads the packaged gemma-3-270m'
    ):
        load_spec(path)
    data["sweep"].pop("model.name")
    data["model"]["server"] = {"gguf": "/models/Qwen3-0.6B-Q8_0.gguf"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="does not name the GGUF"):
        load_spec(path)  # gemma-3-270m is not that file
    data["model"]["name"] = "qwen3-0.6b"
    path.write_text(yaml.safe_dump(data))
    assert load_spec(path).model.name == "qwen3-0.6b"


def test_multi_turn_with_a_small_limit_draws_earlier_turns_from_the_whole_set(monkeypatch):
    monkeypatch.chdir(REPO)
    spec = load_spec(REPO / "experiments" / "multi_turn.yaml", ["questions.limit=4"])
    questions = select_questions(spec)
    assert len(questions) == 4
    plan = plan_executions(spec, questions)
    nine = [p for p in plan if p.spec.multi_turn.preceding == 9]
    assert nine and all(len(p.history) == 9 for p in nine)
    selected = {q.question for q in questions}
    assert any(turn["question"] not in selected for p in nine for turn in p.history)


def test_every_spec_the_docs_name_exists():
    import re

    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    named = {m for path in texts for m in re.findall(r"experiments/[A-Za-z0-9_.-]+\.yaml", path.read_text())}
    assert "experiments/search_cap_sweep.yaml" in named
    missing = sorted(n for n in named if not (REPO / n).is_file())
    assert not missing, f"README/docs name specs that do not exist: {missing}"


def test_did_you_mean_reaches_nested_sections(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "model": {"server": {"ggfu": "m.gguf"}}, "fork": {"repet": 2}}))
    with pytest.raises(InputError) as err:
        load_spec(path)
    assert 'field "model.server.ggfu": Extra inputs are not permitted (did you mean "gguf"?)' in str(err.value)
    assert 'field "fork.repet": Extra inputs are not permitted (did you mean "repeats"?)' in str(err.value)
