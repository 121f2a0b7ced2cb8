"""Bad input through the command line: one clear line naming file, line or field, exit code 2,
and nothing already recorded changed (every file of the run directory byte-identical)."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.traces import MAX_LINE_BYTES, TraceError, read_records

runner = CliRunner()

SPEC = {
    "name": "bad",
    "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
    "model": {"provider": "scripted", "script": ['answer", "text": "I don\'t know"}']},
    "agent": {"policy": "constrained", "search": False},
}
GOOD_QUESTION = {"id": "q1", "question": "Who painted the Mona Lisa?", "answerable": True, "gold_answers": ["Leonardo"]}


def snapshot(run_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())}


@pytest.fixture()
def run_dir(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(spec), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return out


def fails_cleanly(args: list[str], run_dir, expected: str) -> None:
    """The command exits 2 with one `error:` line containing `expected`; the run dir is unchanged."""
    before = snapshot(run_dir)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("error:") and expected in result.output, result.output
    assert snapshot(run_dir) == before


def spec_with(tmp_path, **sections) -> str:
    data = json.loads(json.dumps(SPEC))
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


QUESTION_FILES = {
    "truncated": (json.dumps(GOOD_QUESTION) + "\n" + json.dumps(GOOD_QUESTION)[:30] + "\n").encode(),
    "not_utf8": b'{"id": "q1", "question": "caf\xe9?", "answerable": true}\n',
    "empty": b"",
    "wrong_type": (json.dumps({**GOOD_QUESTION, "answerable": "perhaps"}) + "\n").encode(),
    "unknown_field": (json.dumps({**GOOD_QUESTION, "colour": "red"}) + "\n").encode(),
    "not_object": b"[1, 2, 3]\n",
}
QUESTION_ERRORS = {
    "truncated": "q.jsonl line 2: invalid JSON",
    "not_utf8": "q.jsonl line 1: not UTF-8",
    "empty": "no questions (the file is empty)",
    "wrong_type": 'q.jsonl line 1: field "answerable"',
    "unknown_field": 'field "colour" is not a Question field',
    "not_object": "q.jsonl line 1: expected a JSON object",
}


@pytest.mark.parametrize("case", sorted(QUESTION_FILES))
def test_bad_question_files(tmp_path, run_dir, case):
    path = tmp_path / "q.jsonl"
    path.write_bytes(QUESTION_FILES[case])
    spec = spec_with(tmp_path, questions={"path": str(path), "format": "branchpoint", "sample": None})
    fails_cleanly(["run", spec, "--out", str(run_dir), "--no-progress"], run_dir, QUESTION_ERRORS[case])


def test_huge_question_line(tmp_path, run_dir):
    path = tmp_path / "q.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"id": "q1", "question": "' + b"x" * (MAX_LINE_BYTES + 10) + b'", "answerable": true}\n')
    spec = spec_with(tmp_path, questions={"path": str(path), "format": "branchpoint", "sample": None})
    fails_cleanly(
        ["run", spec, "--out", str(run_dir), "--no-progress"],
        run_dir,
        f"q.jsonl line 1: longer than {MAX_LINE_BYTES} bytes",
    )


def test_a_50_mb_line_is_refused_quickly_with_bounded_memory(tmp_path):
    path = tmp_path / "t.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"execution_id": "a", "run_id": "r", "question_id": "q", "question": "Q?", "answerable": true}\n')
        fh.write(b'{"x": "' + b"y" * (50 * 1024 * 1024) + b'"}\n')
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(TraceError, match="t.jsonl line 2: longer than"):
            read_records(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 10
    assert peak < 2 * MAX_LINE_BYTES + 8 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"


SPEC_ERRORS = {
    "unknown_key": ({"agent": {"serach_cap": 3}}, 'field "agent.serach_cap": Extra inputs are not permitted'),
    "wrong_type": ({"agent": {"top_k": "three"}}, 'field "agent.top_k"'),
    "unknown_provider": ({"model": {"provider": "anthropic"}}, 'field "model.provider"'),
    "unknown_policy": ({"agent": {"policy": "clever"}}, 'unknown policy "clever"'),
    "unknown_source": ({"retrieval": {"default": "wiki"}}, "retrieval.default: unknown source 'wiki'"),
    "unknown_judge": ({"evaluation": {"judge": "gpt-judge"}}, 'field "evaluation.judge": unknown judge'),
    "unknown_fork_judge": ({"fork": {"judge": "gpt-judge"}}, 'field "fork.judge": unknown judge'),
    "unknown_encoder": (
        {"retrieval": {"default": "d", "sources": {"d": {"encoder": "bge-large"}}}},
        "retrieval.sources.d.encoder: unknown encoder 'bge-large'",
    ),
    "missing_corpus": (
        {"retrieval": {"default": "d", "sources": {"d": {"corpus": "/nonexistent/wiki.jsonl"}}}},
        "retrieval.sources.d.corpus: file not found",
    ),
    "unknown_question_format": ({"questions": {"format": "squad"}}, 'unknown question format "squad"'),
    "bad_name": ({"name": "../elsewhere"}, 'field "name"'),
}


@pytest.mark.parametrize("case", sorted(SPEC_ERRORS))
def test_bad_specs(tmp_path, run_dir, case):
    sections, expected = SPEC_ERRORS[case]
    fails_cleanly(["run", spec_with(tmp_path, **sections), "--out", str(run_dir), "--no-progress"], run_dir, expected)


def test_spec_not_utf8_or_not_yaml(tmp_path, run_dir):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    fails_cleanly(["run", str(path), "--out", str(run_dir)], run_dir, "s.yaml: not UTF-8")
    path.write_bytes(b"name: [unclosed\n")
    fails_cleanly(["run", str(path), "--out", str(run_dir)], run_dir, "invalid YAML")
    path.write_bytes(b"")
    fails_cleanly(["run", str(path), "--out", str(run_dir)], run_dir, "expected a mapping")


@pytest.mark.parametrize(
    "content, expected",
    [
        (b'{"execution_id": "a", "run_id"\n', "executions.jsonl line 2: invalid JSON"),
        (
            b'{"execution_id": "a", "run_id": "bad", "question_id": "q", "question": "Q", "answerable": 3}\n',
            'executions.jsonl line 2: field "answerable"',
        ),
        (b'{"execution_id": "\xff"}\n', "executions.jsonl line 2: not UTF-8"),
    ],
)
def test_damaged_trace_file_stops_run_evaluate_and_fork(tmp_path, run_dir, content, expected):
    traces = run_dir / "executions.jsonl"
    first = traces.read_bytes().splitlines(keepends=True)[0]
    traces.write_bytes(first + content)
    spec = str(tmp_path / "spec.yaml")
    fails_cleanly(["run", spec, "--out", str(run_dir), "--no-progress"], run_dir, expected)
    fails_cleanly(["evaluate", str(run_dir)], run_dir, expected)
    fails_cleanly(["fork", str(run_dir), "--no-progress"], run_dir, expected)


def test_empty_trace_file(tmp_path, run_dir):
    (run_dir / "executions.jsonl").write_bytes(b"")
    fails_cleanly(["evaluate", str(run_dir)], run_dir, "no execution records to evaluate")


def test_fork_with_unknown_names_and_missing_checkpoints(tmp_path, run_dir):
    fails_cleanly(
        ["fork", str(run_dir), "--execution", "nope", "--no-progress"],
        run_dir,
        "--execution nope: no finished executions",
    )
    fails_cleanly(["fork", str(run_dir), "--actions", "JUMP"], run_dir, "--actions: unknown action 'JUMP'")
    fails_cleanly(["fork", str(run_dir), "--boundaries", "midway"], run_dir, "--boundaries: unknown kind 'midway'")
    fails_cleanly(
        ["checkpoints", "ls", str(run_dir), "--execution", "nope"], run_dir, "--execution nope: no executions"
    )
    # the checkpoint store of another run: the executions' saved states are not there
    other = tmp_path / "other.sqlite"
    from branchpoint.checkpoints import sqlite_checkpointer

    with sqlite_checkpointer(other):
        pass
    fails_cleanly(
        ["fork", str(run_dir), "--checkpoints", str(other), "--no-progress"],
        run_dir,
        "no saved states in the checkpoint store",
    )
    fails_cleanly(["evaluate", str(run_dir), "--judge", "gpt-judge"], run_dir, 'unknown judge "gpt-judge"')
