"""Validation before the first write (issue 28): every bad input below is one line, exit code 2,
no traceback, and nothing written (a new run folder is not made, an existing one stays
byte-identical)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError

runner = CliRunner()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(args: list[str], *expected: str) -> str:
    result = runner.invoke(app, args)
    out = result.output
    assert result.exit_code == 2, out
    assert "Traceback" not in out and (result.exception is None or isinstance(result.exception, SystemExit)), out
    assert len([line for line in out.splitlines() if line.strip()]) == 1, out
    for text in expected:
        assert text in out, out
    return out


def write_spec(tmp_path: Path, **changes) -> Path:
    data = {
        "name": "before",
        "questions": {"path": "demo", "limit": 2},
        "model": {"provider": "scripted", "script": ['answer", "text": "Canberra"}'], "max_tokens": 16},
        "agent": {"policy": "constrained", "search": False},
    }
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "model, expected",
    [
        ({"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "BP_UNSET_28"}, "BP_UNSET_28"),
        ({"provider": "openai"}, "model.base_url: required"),
        ({"provider": "openai", "base_url": "not a url"}, "not an http(s) URL"),
        ({"provider": "openai", "base_url": "ftp://host/v1"}, "not an http(s) URL"),
    ],
)
def test_model_settings_are_refused_before_the_run_folder_is_made(tmp_path, monkeypatch, model, expected):
    monkeypatch.delenv("BP_UNSET_28", raising=False)
    spec = write_spec(tmp_path, model={"provider": "openai", "name": "m", **model})
    refused(["run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"], expected)
    assert not (tmp_path / "run").exists()


def test_a_directory_where_a_run_file_belongs_is_named_and_nothing_is_rewritten(tmp_path):
    spec = write_spec(tmp_path)
    run_dir = tmp_path / "run"
    assert runner.invoke(app, ["run", str(spec), "--out", str(run_dir), "--no-progress"]).exit_code == 0
    (run_dir / "checkpoints.sqlite").unlink()
    (run_dir / "checkpoints.sqlite").mkdir()
    spec = write_spec(tmp_path, questions={"limit": 4})  # more to do: the run would write
    before = snapshot(run_dir)
    refused(["run", str(spec), "--out", str(run_dir), "--no-progress"], "checkpoints.sqlite: a directory")
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_lost_checkpoints_are_noticed_by_run_and_fork(tmp_path, how):
    spec = write_spec(tmp_path)
    run_dir = tmp_path / "run"
    assert runner.invoke(app, ["run", str(spec), "--out", str(run_dir), "--no-progress"]).exit_code == 0
    db = run_dir / "checkpoints.sqlite"
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    if how == "deleted":
        db.unlink()
    else:
        db.write_bytes(b"")
    spec = write_spec(tmp_path, questions={"limit": 4})
    before = snapshot(run_dir)
    refused(
        ["run", str(spec), "--out", str(run_dir), "--no-progress"],
        f"checkpoints.sqlite: {'missing' if how == 'deleted' else 'empty'}, but 2 recorded executions",
    )
    refused(["fork", str(run_dir), "--actions", "THINK", "--repeats", "1", "--no-progress"], "recorded executions")
    assert snapshot(run_dir) == before


def test_evaluate_with_an_llm_judge_leaves_no_cache_in_a_folder_it_refuses(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "executions.jsonl").write_text('{"execution_id": "a", "run_id": "r"\n', encoding="utf-8")
    refused(
        ["evaluate", str(run_dir), "--judge", "llm", "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1"],
        "invalid JSON",
    )
    assert sorted(p.name for p in run_dir.iterdir()) == ["executions.jsonl"]


def deep(n: int) -> str:
    return "[" * n + "]" * n


def test_deeply_nested_spec_questions_and_corpus_are_one_line(tmp_path):
    spec = tmp_path / "deep.yaml"
    spec.write_text(f"name: deep\nquestions: {{path: demo}}\nextra: {deep(3000)}\n", encoding="utf-8")
    refused(["run", str(spec), "--out", str(tmp_path / "r1"), "--no-progress"], "deep.yaml: nested too deeply")
    refused(
        ["run", str(write_spec(tmp_path)), "--out", str(tmp_path / "r1"), "--set", f"agent.top_k={deep(100)}"],
        "nested deeper than 64 levels",
    )
    questions = tmp_path / "q.jsonl"
    line = {"id": "q1", "question": "x?", "answerable": True}
    questions.write_text(json.dumps(line)[:-1] + f', "gold_answers": {deep(5000)}}}\n', encoding="utf-8")
    refused(
        ["run", str(write_spec(tmp_path, questions={"path": str(questions)})), "--out", str(tmp_path / "r2")],
        "q.jsonl line 1: JSON nested too deeply",
    )
    corpus = tmp_path / "corpus.json"
    corpus.write_text(deep(5000), encoding="utf-8")
    source = {"default": "kb", "sources": {"kb": {"kind": "bm25", "corpus": str(corpus)}}}
    spec = write_spec(tmp_path, agent={"policy": "constrained", "search": True}, retrieval=source)
    refused(["run", str(spec), "--out", str(tmp_path / "r3"), "--no-progress"], "corpus.json: JSON nested too deeply")
    assert not any((tmp_path / r).exists() for r in ("r1", "r2", "r3"))


def test_forecasts_that_are_empty_or_deeply_nested_are_refused(tmp_path):
    from branchpoint.evaluation.value.forecasters import read_state_probabilities

    fields = ("execution_id", "checkpoint_id", "q_think", "q_search")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty.jsonl: no forecasts"):
        read_state_probabilities(empty, {}, 0, set(), fields)
    nested = tmp_path / "nested.jsonl"
    nested.write_text(json.dumps({"execution_id": json.loads(deep(200)), "checkpoint_id": "c"}) + "\n")
    with pytest.raises(InputError, match="nested.jsonl line 1: nested deeper than 64"):
        read_state_probabilities(nested, {}, 0, set(), fields)


def test_a_policy_that_is_not_a_decide_node_is_one_line(tmp_path):
    spec = write_spec(tmp_path, agent={"policy": "os:getcwd"})
    refused(
        ["run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"],
        "a builtin_function_or_method, not a Python function",
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "line, expected",
    [
        ({"id": "q1", "question": "x" * 200_000, "answerable": True}, 'field "question" has 200000 characters'),
        (
            {"id": "q1", "question": "Is it?", "answerable": "yes"},
            'field "answerable": Input should be a valid boolean',
        ),
    ],
)
def test_questions_too_long_or_not_quite_boolean_are_refused_at_load(tmp_path, line, expected):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps(line) + "\n", encoding="utf-8")
    spec = write_spec(tmp_path, questions={"path": str(questions), "format": "branchpoint"})
    refused(["run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"], expected)
    assert not (tmp_path / "run").exists()


def test_invalid_json_messages_say_at_once(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "q1", "question": "unterminated', encoding="utf-8")
    out = refused(["run", str(write_spec(tmp_path, questions={"path": str(questions)})), "--out", str(tmp_path / "r")])
    assert "Unterminated string starting at column" in out and "at at" not in out
    corpus = tmp_path / "c.json"
    corpus.write_text('{"a": "unterminated', encoding="utf-8")
    spec = write_spec(
        tmp_path,
        agent={"policy": "constrained", "search": True},
        retrieval={"default": "kb", "sources": {"kb": {"kind": "bm25", "corpus": str(corpus)}}},
    )
    out = refused(["run", str(spec), "--out", str(tmp_path / "r"), "--no-progress"])
    assert "starting at column" in out and "at at" not in out


def test_a_truncated_faiss_file_is_one_line(tmp_path):
    from branchpoint.retrieval.build import build_index, load_index
    from tests.retrieval.conftest import FakeEncoder

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"d{i}", "contents": f'"T{i}"\ntext {i}'}) + "\n" for i in range(20)),
        encoding="utf-8",
    )
    out = tmp_path / "index"
    build_index(corpus, out, encoder=FakeEncoder())
    faiss_file = out / "index.faiss"
    os.truncate(faiss_file, faiss_file.stat().st_size // 2)
    with pytest.raises(InputError, match="index.faiss: cannot be read as a faiss index"):
        load_index(out, FakeEncoder())
