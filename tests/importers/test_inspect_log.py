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


GRADED = Path(__file__).parent / "data" / "inspect_graded.eval"


def test_the_graders_calls_are_no_agent_steps() -> None:
    """inspect_graded.eval: the same agent as inspect_mockllm.eval, scored by includes and by
    model_graded_qa, whose grader (mockllm, role grader, 100/10 tokens a call) runs in its span."""
    plain = list(read_inspect_log(LOG))
    graded = list(read_inspect_log(GRADED, scorer="model_graded_qa"))
    for mine, theirs in zip(graded, plain, strict=True):
        assert [s.kind for s in mine.steps] == [s.kind for s in theirs.steps]
        assert (mine.input_tokens, mine.output_tokens) == (theirs.input_tokens, theirs.output_tokens)
        assert mine.model_extra["scoring_usage"] == {"calls": 1, "input_tokens": 100, "output_tokens": 10}
    assert [(r.input_tokens, r.output_tokens) for r in graded] == [(130, 15), (40, 4), (150, 18)]
    assert [[j.judge for j in r.judgments] for r in graded] == [["inspect:model_graded_qa"]] * 3
    assert [r.judgments[0].label for r in graded] == ["CORRECT", "INCORRECT", "ABSTAINED"]


def test_a_log_with_several_scorers_needs_scorer(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["import", "inspect", str(GRADED), "--out", str(tmp_path / "t.jsonl")])
    assert result.exit_code == 2
    assert "the log has 2 scorers (includes, model_graded_qa): choose one with --scorer NAME" in result.output
    assert not (tmp_path / "t.jsonl").exists()
    result = CliRunner().invoke(
        app, ["import", "inspect", str(GRADED), "--scorer", "f1", "--out", str(tmp_path / "t.jsonl")]
    )
    assert (
        result.exit_code == 2 and "no scorer 'f1' in the log (its scorers: includes, model_graded_qa)" in result.output
    )
    assert not (tmp_path / "t.jsonl").exists()


def test_tpc_of_a_graded_log_counts_only_the_agent(tmp_path: Path) -> None:
    """The graded log's metrics, judged by either scorer, equal the ungraded log's (the same agent,
    the same labels): the grader's tokens are in no TPC."""
    metrics = []
    for log, scorer in ((LOG, None), (GRADED, "includes"), (GRADED, "model_graded_qa")):
        folder = tmp_path / f"{log.stem}-{scorer}"
        folder.mkdir()
        args = ["import", "inspect", str(log), "--out", str(folder / "t.jsonl")]
        result = CliRunner().invoke(app, args + (["--scorer", scorer] if scorer else []))
        assert result.exit_code == 0, result.output
        result = CliRunner().invoke(
            app, ["evaluate", str(folder / "t.jsonl"), "--judge", "given", "--bootstrap", "0", "--no-progress"]
        )
        assert result.exit_code == 0, result.output
        metrics.append(json.loads((folder / "metrics.json").read_text()))
    for key in ("tpc", "answer_accuracy", "abstention_accuracy", "mean_input_tokens", "mean_output_tokens"):
        assert metrics[0].get(key) == metrics[1].get(key) == metrics[2].get(key), key
    assert metrics[0]["tpc"] is not None
