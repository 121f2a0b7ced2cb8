"""`--set sweep={}` does not silently do nothing: a mapping merges into the sweep, so an empty one
is refused with the way to remove axes (`--set sweep.AXIS=null`), which works."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments.spec import load_spec
from tests.conftest import REPO

runner = CliRunner()


def test_empty_sweep_is_refused_naming_how_to_remove_axes(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["run", str(REPO / "experiments" / "quickstart.yaml"), "--out", str(out), "--set", "sweep={}"]
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "would change nothing" in text and "--set sweep.agent.search=null" in text, text
    assert not out.exists()
    spec = load_spec(REPO / "experiments" / "quickstart.yaml", ["sweep.agent.search=null"])
    assert spec.sweep == {}
    assert yaml.safe_load((REPO / "experiments" / "quickstart.yaml").read_text())["sweep"]
