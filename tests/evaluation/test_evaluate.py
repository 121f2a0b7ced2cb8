"""evaluate(): run directory in, metrics.json and judged.jsonl out, nothing on bad input."""

from __future__ import annotations

import json

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation import evaluate
from branchpoint.evaluation.metrics import condition_label, metrics_json
from branchpoint.traces import TraceError, dump_record, read_records, write_records
from tests.evaluation.builders import METRICS_KEYS, make_record


def run_records():
    cond = {"search": True}
    return [
        make_record("1", gold=["Rome"], answer="Rome.", condition=cond, output_tokens=10),
        make_record("2", gold=["Paris"], answer="Lyon", condition=cond, output_tokens=10),
        make_record(
            "3",
            answerable=False,
            category="FP",
            answer="There is no such king.",
            condition=cond,
            output_tokens=10,
            search_calls=1,
        ),
    ]


def test_evaluate_run_dir(tmp_path):
    write_records(tmp_path / "executions.jsonl", run_records())
    metrics = evaluate(tmp_path)
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert set(on_disk) >= METRICS_KEYS
    assert on_disk == json.loads(metrics_json(metrics))  # infinities (TPC, intervals) as "inf"
    assert metrics["answer_accuracy"] == 0.5 and metrics["abstention_accuracy"] == 1.0
    assert metrics["tpc"] == pytest.approx((30 + 500) / 2)
    assert list(metrics["by_condition"]) == [condition_label({"search": True})]
    judged = read_records(tmp_path / "judged.jsonl")
    assert [sorted(j.label for j in r.judgments) for r in judged] == [
        ["ANSWERED", "CORRECT"],
        ["ANSWERED", "INCORRECT"],
        ["ABSTAINED", "NOT_ATTEMPTED"],
    ]
    assert not list(tmp_path.glob(".*tmp*"))


def test_evaluate_trace_file_to_out_dir(tmp_path):
    traces = tmp_path / "t.jsonl"
    write_records(traces, run_records())
    out = tmp_path / "out"
    evaluate(traces, judge="rule", out_dir=out)
    assert (out / "metrics.json").is_file() and (out / "judged.jsonl").is_file()
    assert not (tmp_path / "metrics.json").exists()


def test_missing_executions_names_path(tmp_path):
    with pytest.raises(InputError, match=r"executions\.jsonl"):
        evaluate(tmp_path)


def test_schema_error_names_file_line_field_and_writes_nothing(tmp_path):
    good, bad = (dump_record(r) for r in run_records()[:2])
    broken = json.loads(bad)
    broken["answerable"] = "sometimes"
    (tmp_path / "executions.jsonl").write_text(good + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(TraceError) as err:
        evaluate(tmp_path)
    msg = str(err.value)
    assert "executions.jsonl" in msg and "line 2" in msg and '"answerable"' in msg
    assert not (tmp_path / "metrics.json").exists()
    assert not (tmp_path / "judged.jsonl").exists()


def test_judge_failure_writes_nothing(tmp_path):
    write_records(tmp_path / "executions.jsonl", run_records())
    with pytest.raises(InputError, match="no answer judgment"):
        evaluate(tmp_path, judge="given")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["executions.jsonl"]
