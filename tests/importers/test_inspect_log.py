"""inspect_ai eval logs as traces: a log inspect_ai itself wrote (tests/importers/make_inspect_log.py,
its mockllm model), read with inspect_ai's reader, then scored by branchpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.provenance import read_invocations
from branchpoint.traces import read_records

pytest.importorskip("inspect_ai", reason="optional dependency: pip install 'branchpoint[inspect]'")

from branchpoint.importers.inspect_log import read_inspect_log

LOG = Path(__file__).parent / "data" / "inspect_mockllm.eval"


def test_samples_become_traces() -> None:
    q1, q2, q3 = list(read_inspect_log(LOG))
    assert [r.question_id for r in (q1, q2, q3)] == ["q1", "q2", "q3"]
    assert q1.condition == {"task": "task", "model": "mockllm/model"} and q1.repeat == 0
    assert [s.kind for s in q1.steps] == ["decide", "search", "answer"]
    search = q1.steps[1]
    assert search.query == "capital of Australia" and search.retrieved[0].text.endswith("capital city of Australia.")
    assert (q1.search_calls, q1.input_tokens, q1.output_tokens, q1.reasoning_tokens) == (1, 130, 15, 5)
    assert q1.final_answer == "Canberra" and q1.gold_answers == ["Canberra"]
    assert [(j.judge, j.kind, j.label, j.raw) for j in q1.judgments] == [("inspect:includes", "answer", "CORRECT", "C")]
    assert q2.judgments[0].label == "INCORRECT" and q2.search_calls == 0
    # an unanswerable sample (metadata) with a non-search tool: the tool step kept, kind "tool"
    assert (q3.answerable, q3.category) == (False, "FP")
    assert [s.kind for s in q3.steps] == ["decide", "tool", "answer"] and q3.steps[1].action == "calculator"
    assert q3.judgments[0].kind == "abstention" and q3.judgments[0].label == "ABSTAINED"
    assert len({r.execution_id for r in (q1, q2, q3)}) == 3


def test_import_then_evaluate_with_the_given_labels(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    result = CliRunner().invoke(app, ["import", "inspect", str(LOG), "--out", str(traces)])
    assert result.exit_code == 0, result.output
    assert "wrote 3 traces (1 search calls)" in result.output
    records = read_records(traces)
    assert len(records) == 3
    # the import's provenance: one line beside the traces, named by every record it wrote
    (invocation,) = read_invocations(tmp_path)
    assert (invocation.file, invocation.provenance.command) == ("traces.jsonl", "branchpoint import inspect")
    assert {r.invocation for r in records} == {invocation.invocation_id}
    result = CliRunner().invoke(app, ["evaluate", str(traces), "--judge", "given", "--bootstrap", "0", "--no-progress"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["judge"] == "given"
    assert metrics["answer_accuracy"] == pytest.approx(0.5) and metrics["abstention_accuracy"] == pytest.approx(1.0)


def test_not_a_log_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.eval"
    bad.write_text("not a zip")
    with pytest.raises(InputError, match="not an inspect_ai eval log"):
        list(read_inspect_log(bad))
    with pytest.raises(InputError, match="not found"):
        list(read_inspect_log(tmp_path / "missing.eval"))
