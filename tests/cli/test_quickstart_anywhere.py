"""`branchpoint quickstart` runs from any folder: its spec ships in the package, identical to
experiments/quickstart.yaml (the copy users edit)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.cli.quickstart import packaged_quickstart_spec
from tests.conftest import REPO

runner = CliRunner()


def test_the_packaged_spec_is_experiments_quickstart_yaml():
    assert packaged_quickstart_spec().read_bytes() == (REPO / "experiments" / "quickstart.yaml").read_bytes()


def test_quickstart_runs_outside_the_repository(tmp_path, monkeypatch, isolated_cache):
    monkeypatch.chdir(tmp_path)  # no experiments/ here
    args = ["quickstart", "--no-progress", "--sample", "1,1", "--set", "sweep.agent.search=[false]"]
    sim = ["--set", "model.provider=sim", "--set", "model.sim.latency_scale=0"]
    result = runner.invoke(app, [*args, *sim])
    assert result.exit_code == 0, result.output
    assert "agent.search=false" in result.output
    metrics = json.loads((tmp_path / "runs" / "quickstart" / "metrics.json").read_text())
    assert metrics["n"] == 2
