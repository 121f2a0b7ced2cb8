"""One rule for every path in a spec: relative to the spec file's folder (paths given with --set:
to the working directory). The run folder's copy of the spec holds them absolute and records the
original folder (`base_dir`), so commands on the run folder work from any working directory,
`module:function` policies beside the original spec included."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments import load_spec
from branchpoint.experiments.spec import expand_conditions
from branchpoint.traces import FORKS_FILE, read_records

POLICY = '''
from branchpoint.agents import Decision, apply_decision


def search_once(state, runtime):
    """Search the question once, then answer with the first passage's title."""
    ctx = runtime.context
    if state["searches"] == 0 and ctx.offers_search:
        return apply_decision(state, Decision("search", state["question"]), ctx)
    title = state["evidence"][0]["title"] if state.get("evidence") else "I don't know"
    return apply_decision(state, Decision("answer", title), ctx)
'''


@pytest.fixture(autouse=True)
def fresh_policy_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test imports its own my_policy.py (from its own folder)."""
    monkeypatch.delitem(sys.modules, "my_policy", raising=False)


def write_study(folder: Path) -> Path:
    """A spec with its question file, corpus and policy module beside it, all named relatively."""
    folder.mkdir(parents=True)
    for name, qid, question, gold in (
        ("questions.jsonl", "q1", "What is the capital of Australia?", "Canberra"),
        ("more_questions.jsonl", "q2", "Who painted the Mona Lisa?", "Leonardo da Vinci"),
    ):
        line = {"id": qid, "question": question, "answerable": True, "gold_answers": [gold]}
        (folder / name).write_text(json.dumps(line) + "\n", encoding="utf-8")
    (folder / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "contents": f'"{t}"\n{x}'}) + "\n"
            for i, t, x in (
                ("d1", "Canberra", "Canberra is the capital city of Australia."),
                ("d2", "Leonardo da Vinci", "Leonardo da Vinci painted the Mona Lisa."),
            )
        ),
        encoding="utf-8",
    )
    (folder / "my_policy.py").write_text(POLICY, encoding="utf-8")
    spec = {
        "name": "paths",
        "questions": {"path": "questions.jsonl"},
        "model": {"provider": "scripted", "script": ["unused"], "max_tokens": 16},
        "agent": {"policy": "my_policy:search_once", "search_cap": 1, "top_k": 1},
        "retrieval": {"default": "notes", "sources": {"notes": {"kind": "bm25", "corpus": "corpus.jsonl"}}},
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return folder / "spec.yaml"


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


def test_paths_resolve_beside_the_spec_and_the_run_folder_works_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    spec_file = write_study(tmp_path / "study")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = load_spec(spec_file)
    assert spec.questions.path == str(tmp_path / "study" / "questions.jsonl")
    assert spec.retrieval.sources["notes"].corpus == str(tmp_path / "study" / "corpus.jsonl")
    assert spec.base_dir == str(tmp_path / "study")

    cli("run", str(spec_file), "--out", str(tmp_path / "run"))
    recorded = yaml.safe_load((tmp_path / "run" / "spec.yaml").read_text(encoding="utf-8"))
    assert recorded["questions"]["path"] == spec.questions.path and recorded["base_dir"] == str(tmp_path / "study")
    [record] = read_records(tmp_path / "run" / "executions.jsonl")
    assert record.final_answer == "Canberra"

    # from yet another folder: fork (the policy module lives beside the original spec only) and evaluate
    third = tmp_path / "third"
    third.mkdir()
    monkeypatch.chdir(third)
    cli("fork", str(tmp_path / "run"), "--boundaries", "initial", "--repeats", "2", "--temperature", "0.5")
    assert read_records(tmp_path / "run" / FORKS_FILE)
    cli("evaluate", str(tmp_path / "run"), "--bootstrap", "0")
    # and the run folder, moved, still resolves its data
    os.rename(tmp_path / "run", tmp_path / "moved")
    assert load_spec(tmp_path / "moved" / "spec.yaml").questions.path == spec.questions.path


def test_set_paths_resolve_against_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec_file = write_study(tmp_path / "study")
    monkeypatch.chdir(tmp_path)
    spec = load_spec(spec_file, ["questions.path=study/more_questions.jsonl"])
    assert spec.questions.path == str(tmp_path / "study" / "more_questions.jsonl")
    spec = load_spec(spec_file, ["sweep.questions.path=[study/questions.jsonl, study/more_questions.jsonl]"])
    paths = [c.questions.path for _, c in expand_conditions(spec)]
    assert paths == [str(tmp_path / "study" / "questions.jsonl"), str(tmp_path / "study" / "more_questions.jsonl")]


def test_sweep_values_in_the_file_resolve_beside_it_and_keep_their_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_file = write_study(tmp_path / "study")
    data = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    data["sweep"] = {"questions.path": ["questions.jsonl", "more_questions.jsonl"]}
    spec_file.write_text(yaml.safe_dump(data), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    conditions = expand_conditions(load_spec(spec_file))
    assert [c for c, _ in conditions] == [
        {"questions.path": "questions.jsonl"},
        {"questions.path": "more_questions.jsonl"},
    ]
    assert [s.questions.path for _, s in conditions] == [
        str(tmp_path / "study" / "questions.jsonl"),
        str(tmp_path / "study" / "more_questions.jsonl"),
    ]


def test_a_run_folder_copy_without_base_dir_keeps_the_working_directory_rule(tmp_path, monkeypatch):
    """A run folder written before copies recorded `base_dir` (relative paths, no base_dir)
    still resolves them as it was made: against the working directory, not the run folder."""
    study = write_study(tmp_path / "study").parent
    run_dir = tmp_path / "runs" / "old"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.yaml").write_text(
        yaml.safe_dump({"name": "old", "questions": {"path": "questions.jsonl"}}), encoding="utf-8"
    )
    monkeypatch.chdir(study)
    assert load_spec(run_dir / "spec.yaml", check_policy=False, recorded=True).questions.path == str(
        study / "questions.jsonl"
    )
    # a user's own spec file keeps the new rule (beside the file)
    assert load_spec(run_dir / "spec.yaml", check_policy=False).questions.path == str(run_dir / "questions.jsonl")


def test_a_simulated_model_looks_questions_up_in_the_run_questions(tmp_path: Path, monkeypatch) -> None:
    """`--set model.provider=sim` on any question set: the simulator's question set follows
    questions.path (however it was given, swept included) unless model.sim.questions is set."""
    spec_file = write_study(tmp_path / "study")
    monkeypatch.chdir(tmp_path)
    spec = load_spec(spec_file, ["model.provider=sim"])
    assert spec.model.sim.questions == spec.questions.path == str(tmp_path / "study" / "questions.jsonl")
    spec = load_spec(spec_file, ["model.provider=sim", "questions.path=study/more_questions.jsonl"])
    assert spec.model.sim.questions == str(tmp_path / "study" / "more_questions.jsonl")
    spec = load_spec(spec_file, ["model.provider=sim", "sweep.questions.path=[study/more_questions.jsonl]"])
    assert [c.model.sim.questions for _, c in expand_conditions(spec)] == [
        str(tmp_path / "study" / "more_questions.jsonl")
    ]
    spec = load_spec(spec_file, ["model.provider=sim", "model.sim.questions=demo"])
    assert spec.model.sim.questions == "demo"
