"""The trace contract: round trips, foreign fields kept, errors naming file, line and field."""

from __future__ import annotations

import json

import pytest

from branchpoint.traces import (
    ExecutionRecord,
    TraceError,
    append_record,
    execution_id,
    read_records,
    write_records,
)


def record(**kw) -> ExecutionRecord:
    base = dict(execution_id="e1", run_id="r", question_id="q1", question="Q?", answerable=True)
    return ExecutionRecord(**{**base, **kw})


def test_round_trip_and_append(tmp_path):
    path = tmp_path / "t.jsonl"
    write_records(path, [record(execution_id="a")])
    append_record(path, record(execution_id="b", steps=[{"kind": "search", "query": "x"}]))
    got = read_records(path)
    assert [r.execution_id for r in got] == ["a", "b"]
    assert got[1].steps[0].query == "x"


def test_foreign_minimal_trace_is_readable_and_extra_fields_kept(tmp_path):
    path = tmp_path / "foreign.jsonl"
    line = {
        "execution_id": "x",
        "run_id": "other",
        "question_id": "q",
        "question": "Q?",
        "answerable": False,
        "category": "FP",
        "final_answer": "No.",
        "producer": "my-framework",
        "steps": [{"kind": "search", "query": "q", "retrieved": [{"doc_id": "d", "score": 1, "text": "t"}]}],
    }
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    rec = read_records(path)[0]
    assert rec.model_dump()["producer"] == "my-framework"
    assert rec.steps[0].retrieved[0].title is None


def test_schema_error_names_file_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = record().model_dump_json()
    bad = json.loads(good)
    bad["answerable"] = "perhaps"
    path.write_text(good + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r'bad.jsonl line 2: field "answerable"'):
        read_records(path)


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"execution_id": \n', "line 1: invalid JSON"),
        (b"[1, 2]\n", "line 1: expected a JSON object, got list"),
        (b'{"a": "\xff\xfe"}\n', "line 1: not UTF-8"),
    ],
)
def test_malformed_lines(tmp_path, content, message):
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        read_records(path)


def test_invalid_status_and_category_are_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({**json.loads(record().model_dump_json()), "status": "weird"}) + "\n")
    with pytest.raises(TraceError, match='field "status"'):
        read_records(path)


def test_execution_id_is_deterministic_and_sensitive():
    a = execution_id("run", {"x": 1}, "q1")
    assert a == execution_id("run", {"x": 1}, "q1")
    assert a != execution_id("run", {"x": 2}, "q1")
    assert a != execution_id("run", {"x": 1}, "q1", branch="THINK", repeat=1)


def test_write_records_leaves_no_partial_file_on_error(tmp_path):
    path = tmp_path / "t.jsonl"
    write_records(path, [record()])
    before = path.read_bytes()

    class Broken(ExecutionRecord):
        def model_dump(self, *a, **k):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_records(path, [record(execution_id="z"), Broken(**record().model_dump())])
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]
