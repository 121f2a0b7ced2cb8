"""A run folder is the study: `evaluate` reads the run's spec.yaml first (its evaluation section:
judge, the judge's settings, λ, μ), options given on the command line override it, and
metrics.json records which setting came from where. A judge's settings come from the spec or
from `--judge-arg`, checked against the judge's settings model."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.registry import REGISTRY
from branchpoint.traces import write_records
from tests.evaluation.builders import make_record

TOKEN_F1 = "tests.registry.examples.token_f1_judge:token_f1_judge"


@pytest.fixture()
def plugin_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example judge registers for one test only (the built-ins are loaded first, so the
    registry keeps them afterwards)."""
    REGISTRY.names("judge")
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    yield
    sys.modules.pop("tests.registry.examples.token_f1_judge", None)


def make_run(folder: Path, evaluation: dict | None) -> Path:
    """A run folder with a spec.yaml (its evaluation section) and two answered questions: one
    answer is the gold answer, the other shares half its words (token F1 0.67)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"name": "spec-first", **({"evaluation": evaluation} if evaluation is not None else {})}
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    records = [
        make_record("q1", gold=["Canberra"], answer="Canberra", input_tokens=10, output_tokens=2),
        make_record("q2", gold=["Mount Everest"], answer="Everest", input_tokens=10, output_tokens=2),
    ]
    write_records(folder / "executions.jsonl", records)
    return folder


def evaluate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["evaluate", *args, "--bootstrap", "0", "--no-progress"])
    return result.exit_code, result.output


def metrics(folder: Path) -> dict:
    return json.loads((folder / "metrics.json").read_text(encoding="utf-8"))


def test_evaluate_reads_the_spec_evaluation_section(tmp_path: Path, plugin_registry: None) -> None:
    run = make_run(tmp_path / "run", {"judge": TOKEN_F1, "threshold": 0.99, "lam": 2, "mu": 0})
    code, out = evaluate(str(run))
    assert code == 0, out
    m = metrics(run)
    assert (m["judge"], m["lam"], m["mu"]) == ("token-f1", 2.0, 0.0)
    assert m["answer_accuracy"] == 0.5  # "Everest" has token F1 0.67 < 0.99
    settings = m["settings"]
    assert settings["spec"] == str(run / "spec.yaml") and settings["overrides"] == {"bootstrap": 0}
    assert {"judge", "judge_settings.threshold", "lam", "mu"} <= set(settings["from_spec"])
    assert settings["judge_settings"] == {"threshold": 0.99}


def test_options_given_override_the_spec_and_are_recorded(tmp_path: Path, plugin_registry: None) -> None:
    run = make_run(tmp_path / "run", {"judge": TOKEN_F1, "threshold": 0.99, "lam": 2, "mu": 0})
    code, out = evaluate(str(run), "--judge-arg", "threshold=0.5", "--mu", "100")
    assert code == 0, out
    m = metrics(run)
    assert (m["judge"], m["lam"], m["mu"], m["answer_accuracy"]) == ("token-f1", 2.0, 100.0, 1.0)
    settings = m["settings"]
    assert settings["overrides"] == {"judge_settings.threshold": 0.5, "mu": 100.0, "bootstrap": 0}
    assert "lam" in settings["from_spec"] and "mu" not in settings["from_spec"]
    assert "judge_settings.threshold" not in settings["from_spec"]
    # the report says where the settings came from
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "## Settings" in report and f"from `{run / 'spec.yaml'}`: judge, lam;" in report
    assert "on the command line: mu = 100.0, bootstrap = 0, judge_settings.threshold = 0.5" in report
    # another judge: the spec's judge settings are that judge's, not this one's
    code, out = evaluate(str(run), "--judge", "rule")
    assert code == 0, out
    assert metrics(run)["judge"] == "rule" and metrics(run)["settings"]["judge_settings"] == {}


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("treshold=0.5", 'judge "token-f1": setting "treshold": unknown (takes: threshold)'),
        ("threshold=high", 'judge "token-f1": setting "threshold": Input should be a valid number'),
        ("threshold", "--judge-arg 'threshold': expected KEY=VALUE"),
    ],
)
def test_a_bad_judge_setting_is_named(tmp_path: Path, plugin_registry: None, arg: str, message: str) -> None:
    run = make_run(tmp_path / "run", {"judge": TOKEN_F1})
    code, out = evaluate(str(run), "--judge-arg", arg)
    assert code == 2 and message in " ".join(out.split()), out
    assert not (run / "metrics.json").exists()


def test_a_bare_trace_file_gets_the_built_in_defaults(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", None)
    traces = tmp_path / "elsewhere" / "traces.jsonl"
    traces.parent.mkdir()
    traces.write_bytes((run / "executions.jsonl").read_bytes())
    code, out = evaluate(str(traces), "--lam", "1")
    assert code == 0, out
    settings = metrics(traces.parent)["settings"]
    assert settings["spec"] is None and "built-in defaults" in settings["defaults"]
    assert (settings["judge"], settings["lam"], settings["mu"]) == ("rule", 1.0, 500.0)
    assert settings["from_spec"] == [] and settings["overrides"] == {"lam": 1.0, "bootstrap": 0}
