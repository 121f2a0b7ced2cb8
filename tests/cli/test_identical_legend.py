"""The `≡k` marks of identical conditions in evaluate's table are explained under it."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app

runner = CliRunner()


def test_identical_condition_marks_have_a_legend(tmp_path):
    spec = {
        "name": "ids",
        "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
        "model": {"provider": "scripted", "script": ['answer", "text": "I don\'t know"}']},
        "agent": {"policy": "constrained", "search": False},
        "sweep": {"agent.prompt": ["plain", "abstention"]},  # the constrained policy keeps its own prompt
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "run"
    assert runner.invoke(app, ["run", str(path), "--out", str(out), "--no-progress"]).exit_code == 0
    result = runner.invoke(app, ["evaluate", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "≡1" in result.output
    text = " ".join(result.output.split())
    assert "≡k: rows with the same k sent identical requests to the model" in text, result.output
