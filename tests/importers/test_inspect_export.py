"""`branchpoint export inspect`: a branchpoint run written as inspect_ai logs, read back with
inspect_ai itself (`read_eval_log`, and `list_eval_logs`, which `inspect view` lists a folder
with): samples, messages, scores and token usage equal the run's; importing the export gives the
run's steps and totals back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.traces import read_records

pytest.importorskip("inspect_ai", reason="optional dependency: pip install 'branchpoint[inspect]'")

from inspect_ai.log import list_eval_logs, read_eval_log

from branchpoint.importers.inspect_log import read_inspect_log

#: inspect_ai score values of the labels that decide correctness.
VALUES = {"CORRECT": "C", "INCORRECT": "I", "NOT_ATTEMPTED": "N", "ABSTAINED": "C", "ANSWERED": "I"}


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory) -> Path:
    """A two-condition run (search on / off) of the LangChain fake model, judged by the rule judge."""
    tmp = tmp_path_factory.mktemp("export")
    spec = {
        "name": "export-demo",
        "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
        "model": {
            "provider": "langchain",
            "style": "chat",
            "name": "fake",
            "factory": "tests.models.test_langchain_provider:search_then_answer",
        },
        "agent": {"policy": "native", "search_cap": 2, "top_k": 2},
        "retrieval": {"default": "demo", "sources": {"demo": {"kind": "bm25"}}},
        "sweep": {"agent.search": [True, False]},
    }
    (tmp / "spec.yaml").write_text(yaml.safe_dump(spec))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRANCHPOINT_CACHE", str(tmp / "cache"))
        invoke("run", str(tmp / "spec.yaml"), "--out", str(tmp / "run"), "--no-progress")
        invoke("evaluate", str(tmp / "run"), "--judge", "rule", "--bootstrap", "0", "--no-progress")
    return tmp / "run"


def test_the_export_reads_back_with_inspect_ai(judged_run: Path, tmp_path: Path) -> None:
    out = invoke("export", "inspect", str(judged_run), "--out", str(tmp_path / "logs"))
    assert "wrote 2 inspect_ai logs" in out
    records = {r.execution_id: r for r in read_records(judged_run / "judged.jsonl")}
    listed = list_eval_logs(str(tmp_path / "logs"))  # how `inspect view` finds the logs of a folder
    assert len(listed) == 2
    seen = set()
    for info in listed:
        log = read_eval_log(info.name)
        assert log.status == "success" and log.eval.task == "export-demo" and log.eval.model == "langchain/fake"
        assert [s.name for s in log.results.scores] == ["rule"]
        for sample in log.samples:
            record = records[sample.metadata["execution_id"]]
            seen.add(record.execution_id)
            assert log.eval.task_args == record.condition
            assert (sample.id, sample.epoch, sample.input) == (record.question_id, record.repeat + 1, record.question)
            assert sample.target == record.gold_answers
            assert sample.metadata["answerable"] == record.answerable
            usage = sample.model_usage["langchain/fake"]
            assert (usage.input_tokens, usage.output_tokens) == (record.input_tokens, record.output_tokens)
            assert sample.output.completion == record.final_answer
            # messages: the question, then per step the assistant's call or answer and the tool's reply
            assert sample.messages[0].role == "user" and sample.messages[0].text == record.question
            searches = [s for s in record.steps if s.kind == "search"]
            calls = [c for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]
            assert [c.arguments["query"] for c in calls] == [s.query for s in searches]
            tool_replies = [m.text for m in sample.messages if m.role == "tool"]
            assert tool_replies == ["\n".join(d.text for d in s.retrieved) for s in searches]
            assert sample.messages[-1].role == "assistant" and sample.messages[-1].text == record.final_answer
            kind = "answer" if record.answerable else "abstention"
            label = [j.label for j in record.judgments if j.judge == "rule" and j.kind == kind][-1]
            assert sample.scores["rule"].value == VALUES[label]
    assert seen == set(records)  # every execution, once


def test_importing_the_export_gives_the_run_back(judged_run: Path, tmp_path: Path) -> None:
    invoke("export", "inspect", str(judged_run), "--out", str(tmp_path / "logs"))
    records = {r.execution_id: r for r in read_records(judged_run / "judged.jsonl")}
    by_question = {(json.dumps(r.condition, sort_keys=True), r.question_id): r for r in records.values()}
    imported = [r for path in sorted((tmp_path / "logs").glob("*.eval")) for r in read_inspect_log(path)]
    assert len(imported) == len(records)
    for path in (tmp_path / "logs").glob("*.eval"):
        log = read_eval_log(str(path), header_only=True)
        for back in read_inspect_log(path):
            original = by_question[(json.dumps(log.eval.task_args, sort_keys=True), back.question_id)]
            assert [s.kind for s in back.steps] == [s.kind for s in original.steps]
            assert [s.query for s in back.steps] == [s.query for s in original.steps]
            assert (back.input_tokens, back.output_tokens, back.search_calls) == (
                original.input_tokens,
                original.output_tokens,
                original.search_calls,
            )
            assert back.final_answer == original.final_answer and back.answerable == original.answerable
            kind = "answer" if original.answerable else "abstention"
            want = [j.label for j in original.judgments if j.judge == "rule" and j.kind == kind][-1]
            assert [j.label for j in back.judgments] == [want]


def test_export_errors_are_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "inspect", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "not found (expected a run folder or a traces .jsonl file)" in result.output
    assert not (tmp_path / "o").exists()
