"""The TPC weights λ and μ are defined once (`branchpoint.defaults.DEFAULT_LAMBDA` / `DEFAULT_MU`, the
over-searching study's 0.25 and 500): the spec's evaluation section, `MetricsConfig`, and what
`evaluate` and `training-boundary` score with and write when no weight is given all take that
definition, and the commands' help shows it."""

from __future__ import annotations

import json
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.defaults import DEFAULT_LAMBDA, DEFAULT_MU
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.experiments.spec.sections import EvaluationSpec, ExperimentSpec
from branchpoint.importers.rollout_import import import_rollout_files
from branchpoint.traces import write_records
from tests.evaluation.builders import make_record

ROLLOUTS = Path(__file__).parents[2] / "branchpoint" / "data" / "rollouts"


def test_the_weights_are_the_studys() -> None:
    # over-searching study §3.2: λ = 0.25 (input / output price), μ = 500 (tokens per search call)
    assert (DEFAULT_LAMBDA, DEFAULT_MU) == (0.25, 500.0)


def test_the_spec_and_the_metrics_config_default_to_the_definition() -> None:
    for lam, mu in (
        (EvaluationSpec().lam, EvaluationSpec().mu),
        (ExperimentSpec(name="x").evaluation.lam, ExperimentSpec(name="x").evaluation.mu),
        (MetricsConfig().lam, MetricsConfig().mu),
    ):
        assert (lam, mu) == (DEFAULT_LAMBDA, DEFAULT_MU)
    schema = EvaluationSpec.model_json_schema()["properties"]
    assert (schema["lam"]["default"], schema["mu"]["default"]) == (DEFAULT_LAMBDA, DEFAULT_MU)


def test_evaluate_scores_and_writes_the_default_weights(tmp_path: Path) -> None:
    # a bare trace file (no spec.yaml) and no --lam / --mu: the built-in defaults
    record = make_record("q1", gold=["Canberra"], answer="Canberra", input_tokens=10, output_tokens=2, search_calls=1)
    write_records(tmp_path / "traces.jsonl", [record])
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "traces.jsonl"), "--bootstrap", "0", "--no-progress"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))
    assert (metrics["lam"], metrics["mu"]) == (DEFAULT_LAMBDA, DEFAULT_MU)
    assert (metrics["settings"]["lam"], metrics["settings"]["mu"]) == (DEFAULT_LAMBDA, DEFAULT_MU)
    assert metrics["tpc"] == 2 + DEFAULT_LAMBDA * 10 + DEFAULT_MU * 1  # one correct answer


def test_training_boundary_writes_the_default_weights(tmp_path: Path) -> None:
    traces = tmp_path / "sr1.jsonl"
    import_rollout_files([ROLLOUTS / "searchr1_step10.jsonl"], "searchr1", traces)
    result = CliRunner().invoke(
        app, ["training-boundary", str(traces), "--out", str(tmp_path / "b"), "--bootstrap", "0"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "b" / "training_boundary.json").read_text(encoding="utf-8"))
    assert (report["lam"], report["mu"]) == (DEFAULT_LAMBDA, DEFAULT_MU)


def test_the_commands_help_shows_the_definition() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in ("evaluate", "training-boundary"):
        helps = {p.name: p.help or "" for p in commands[name].params}
        assert f"{DEFAULT_LAMBDA:g}." in helps["lam"], (name, helps["lam"])
        assert f"{DEFAULT_MU:g}." in helps["mu"], (name, helps["mu"])
