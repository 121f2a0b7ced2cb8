"""`branchpoint schema trace|metrics|value`, the docs page that lists the contract, and foreign
step kinds (kept, their usage counted)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.evaluation.judges import ALL_LABELS_BY_KIND
from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.report_schemas import json_schema
from branchpoint.evaluation.tally import is_model_step
from branchpoint.evaluation.value.value_file import ValueReport
from branchpoint.traces import STEP_KINDS, ExecutionRecord, Judgment, ParentRef, RetrievedDoc, Step, Usage

DOCS = Path(__file__).resolve().parents[1] / "docs" / "trace-contract.md"


@pytest.mark.parametrize("which", ["trace", "metrics", "value", "invocation"])
def test_schema_command_prints_json_schema(which: str) -> None:
    result = CliRunner().invoke(app, ["schema", which])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")


def test_unknown_schema_is_refused() -> None:
    result = CliRunner().invoke(app, ["schema", "foo"])
    assert result.exit_code == 2 and "expected one of: trace, metrics, value" in result.output


def test_a_foreign_trace_validates_against_the_schema_and_keeps_its_step_kinds() -> None:
    line = {
        "execution_id": "x1",
        "run_id": "their-run",
        "question_id": "q",
        "question": "?",
        "answerable": True,
        "steps": [
            {"kind": "plan", "usage": {"input_tokens": 10, "output_tokens": 5}, "their_field": 1},
            {"kind": "tool", "text": "42"},
            {"kind": "search", "query": "q", "retrieved": [{"doc_id": "d", "score": 1.0, "text": "t"}]},
        ],
    }
    jsonschema.validate(line, json_schema("trace"))
    record = ExecutionRecord.model_validate(line)
    assert [s.kind for s in record.steps] == ["plan", "tool", "search"]
    assert record.steps[0].model_extra == {"their_field": 1}
    assert json.loads(record.model_dump_json())["steps"][0]["kind"] == "plan"  # written back as read
    # a foreign step with usage is a model call; one without is not; ours as always
    assert [is_model_step(s) for s in record.steps] == [True, False, False]
    assert is_model_step(Step(kind="decide")) and not is_model_step(Step(kind="search", usage=Usage()))


def test_real_reports_match_their_models(tmp_path: Path) -> None:
    from branchpoint.evaluation.metrics import compute_metrics

    records = [
        ExecutionRecord(
            execution_id=f"e{i}",
            run_id="r",
            question_id=f"q{i}",
            question="?",
            answerable=True,
            final_answer="a",
            gold_answers=["a"],
            judgments=[Judgment(judge="rule", kind="answer", label="CORRECT")],
        )
        for i in range(3)
    ]
    metrics = json.loads(json.dumps(compute_metrics(records, "rule"), default=str))
    MetricsReport.model_validate(metrics)
    jsonschema.validate(metrics, json_schema("metrics"))
    assert set(ValueReport.model_fields) >= {"schema_version", "settings", "states", "forecasters"}


def test_docs_page_lists_every_field_kind_and_label() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for model in (ExecutionRecord, Step, Usage, RetrievedDoc, Judgment, ParentRef):
        for name in model.model_fields:
            assert re.search(rf"`{name}`", text), f"{model.__name__}.{name} missing from {DOCS.name}"
    for kind in STEP_KINDS:
        assert f"`{kind}`" in text
    for kind, labels in ALL_LABELS_BY_KIND.items():
        assert f"`{kind}`" in text and all(f"`{label}`" in text for label in labels)
    assert "branchpoint schema trace" in text
