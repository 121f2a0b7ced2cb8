"""`branchpoint evaluate --judge llm`, `agreement` and `report` from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.traces import read_records, write_records
from tests.evaluation.builders import make_record
from tests.evaluation.fake_openai import CHAT, chat_body, fake_openai
from tests.evaluation.test_metrics import hand_set

runner = CliRunner()


def small_run(tmp_path):
    records = [
        make_record("1", gold=["Canberra"], answer="Canberra"),
        make_record("2", gold=["Canberra"], answer="Sydney, I think"),
        make_record("3", answerable=False, category="AU", answer="Nobody knows."),
    ]
    write_records(tmp_path / "executions.jsonl", records)
    return tmp_path


def test_evaluate_with_llm_judge_then_rule_then_agreement(tmp_path):
    run = small_run(tmp_path)
    with fake_openai() as server:
        server.reply(
            CHAT,
            (200, chat_body("LABEL: CORRECT")),
            (200, chat_body("LABEL: INCORRECT")),
            (200, chat_body("It says nobody knows.\nLABEL: ABSTAINED")),
        )
        args = [
            "evaluate",
            str(run),
            "--judge",
            "llm",
            "--judge-model",
            "judge-m",
            "--judge-base-url",
            server.base_url,
            "--judge-concurrency",
            "1",
            "--bootstrap",
            "50",
            "--no-progress",
        ]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "3 model calls" in result.output
        assert (run / "judge_cache.sqlite").is_file()
        again = runner.invoke(app, args)  # everything from the cache
        assert again.exit_code == 0 and "3 from the cache, 0 model calls" in again.output
        assert len(server.bodies(CHAT)) == 3
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["judge"] == "llm:judge-m" and metrics["bootstrap"]["resamples"] == 50
    assert (metrics["answer_accuracy"], metrics["abstention_accuracy"]) == (0.5, 1.0)
    result = runner.invoke(app, ["evaluate", str(run), "--agreement", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "Judge agreement" in result.output and "llm:judge-m" in result.output
    agreement = json.loads((run / "agreement.json").read_text())
    assert agreement["judges"] == ["llm:judge-m", "rule"]
    assert {j.judge for j in read_records(run / "judged.jsonl")[0].judgments} == {"llm:judge-m", "rule"}
    result = runner.invoke(app, ["agreement", str(run), "--out", str(tmp_path / "agree")])
    assert result.exit_code == 0, result.output
    again = json.loads((tmp_path / "agree" / "agreement.json").read_text())
    assert (again.pop("provenance")["command"], agreement.pop("provenance")["command"]) == (
        "branchpoint agreement",
        "branchpoint evaluate",
    )
    assert again == agreement


def test_evaluate_runs_llm_and_rule_judges_in_one_call_and_prints_where_they_disagree(tmp_path):
    run = small_run(tmp_path)
    with fake_openai() as server:
        server.reply(
            CHAT,
            (200, chat_body("LABEL: CORRECT")),
            (200, chat_body("LABEL: CORRECT")),  # "Sydney, I think": the rule judge says INCORRECT
            (200, chat_body("LABEL: ABSTAINED")),
        )
        result = runner.invoke(
            app,
            [
                "evaluate",
                str(run),
                "--judge",
                "llm",
                "--judge-model",
                "judge-m",
                "--judge-base-url",
                server.base_url,
                "--judge-concurrency",
                "1",
                "--also-judge",
                "rule",
                "--agreement",
                "--bootstrap",
                "0",
                "--no-progress",
            ],
        )
    assert result.exit_code == 0, result.output
    assert "disagree on e-2: llm:judge-m CORRECT, rule INCORRECT" in result.output
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["judge"] == "llm:judge-m"
    agreement = json.loads((run / "agreement.json").read_text())
    assert agreement["judges"] == ["llm:judge-m", "rule"]
    assert [d["execution_id"] for d in agreement["disagreements"] if d["kind"] == "decisive"] == ["e-2"]


def test_llm_judge_needs_model_and_url(tmp_path):
    result = runner.invoke(app, ["evaluate", str(small_run(tmp_path)), "--judge", "llm"])
    assert result.exit_code == 2
    assert "--judge-model" in result.output and "--judge-base-url" in result.output
    assert not (tmp_path / "metrics.json").exists()
    result = runner.invoke(app, ["evaluate", str(tmp_path), "--judge-model", "m"])
    assert result.exit_code == 2 and "apply to judges with settings (llm, llm-answer)" in result.output


def test_report_command(tmp_path):
    """The figures themselves are tested on a synthetic run in test_report.py; here the command."""
    run = tmp_path / "run"
    run.mkdir()
    write_records(run / "executions.jsonl", [r for r in hand_set() if r.status != "incomplete"])
    assert runner.invoke(app, ["evaluate", str(run), "--judge", "given", "--bootstrap", "100"]).exit_code == 0
    result = runner.invoke(app, ["report", str(run), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert "1 figure (tpc_by_outcome.png)" in result.output
    assert (
        "skipped figures without data: accuracy_search, tpc_search_cap, marginal_roi, evidence_balance, multi_turn"
        in result.output
    )
    assert (tmp_path / "rep" / "report.md").is_file()
    assert [p.name for p in (tmp_path / "rep" / "figures").glob("*.png")] == ["tpc_by_outcome.png"]


def test_report_without_metrics_is_one_clear_line(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "metrics.json: not found" in result.output


def test_agreement_without_judged_traces(tmp_path):
    result = runner.invoke(app, ["agreement", str(tmp_path)])
    assert result.exit_code == 2 and "judged.jsonl: not found" in result.output


def test_agreement_command_averages_three_judges_and_names_the_reference(tmp_path):
    from branchpoint.traces import Judgment

    recs = []
    for i, (human, j1, j2) in enumerate(
        [
            ("ABSTAINED", "ABSTAINED", "ABSTAINED"),
            ("ABSTAINED", "ABSTAINED", "ANSWERED"),
            ("ANSWERED", "ABSTAINED", "ANSWERED"),
            ("ANSWERED", "ANSWERED", "ANSWERED"),
        ]
    ):
        rec = make_record(f"u{i}", answerable=False, category="FP", labels={"abstention": human})
        rec.judgments += [
            Judgment(judge="llm1", kind="abstention", label=j1),
            Judgment(judge="llm2", kind="abstention", label=j2),
        ]
        recs.append(rec)
    write_records(tmp_path / "judged.jsonl", recs)
    result = runner.invoke(app, ["agreement", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "average over 3 judges (abstention): 66.7% agreement, mean κ 0.400" in result.output
    assert "llm1 vs human (abstention): 1 disagreements, 1 where only llm1 gave the positive label" in result.output
    saved = json.loads((tmp_path / "agreement.json").read_text())
    assert saved["reference"] == "human" and saved["averages"][0]["mean_agreement"] == pytest.approx(2 / 3)
    result = runner.invoke(app, ["agreement", str(tmp_path), "--reference", "nobody"])
    assert result.exit_code == 2 and 'no judgments by the reference judge "nobody"' in result.output
