"""`branchpoint value` reads the run's spec.yaml first (its `value` section, forecaster settings
included), options given override it, value.json records where each setting came from; a
forecaster's settings are checked against its settings model; `--forecaster-module` imports
from the working directory and the spec's folder."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.registry import REGISTRY
from tests.evaluation.value.test_study import make_run


def study(tmp_path: Path, value: dict | None = None) -> Path:
    run = make_run(tmp_path)
    spec = {"name": "value-settings", **({"value": value} if value is not None else {})}
    (run / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return run


def value(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["value", *args, "--no-progress"])
    return result.exit_code, " ".join(result.output.split())


def read(run: Path) -> dict:
    return json.loads((run / "value.json").read_text(encoding="utf-8"))


def test_value_reads_the_spec_value_section(tmp_path: Path) -> None:
    run = study(
        tmp_path, {"judge": "given", "dev_split": 0.5, "resamples": 0, "forecasters": {"metadata_ridge": {"folds": 2}}}
    )
    code, out = value(str(run))
    assert code == 0, out
    report = read(run)
    settings = report["settings"]
    assert (settings["judge"], settings["dev_split"], settings["resamples"]) == ("given", 0.5, 0)
    assert settings["forecasters"] == {"metadata_ridge": {"folds": 2}}
    assert set(settings["from_spec"]) == {"judge", "dev_split", "resamples", "forecasters.metadata_ridge.folds"}
    assert settings["overrides"] == {} and settings["spec"] == str(run / "spec.yaml")
    assert report["states"]["components"]["dev"] == 3  # round(0.5 · 6 support pages)
    assert report["forecasters"]["metadata_ridge"]["info"]["folds"] == 2  # the setting reached the forecaster


def test_options_given_override_the_spec(tmp_path: Path) -> None:
    run = study(tmp_path, {"judge": "given", "dev_split": 0.5, "resamples": 0})
    code, out = value(str(run), "--dev-split", "0.7", "--forecaster-arg", "metadata_ridge.folds=3")
    assert code == 0, out
    settings = read(run)["settings"]
    assert settings["dev_split"] == 0.7 and settings["resamples"] == 0
    assert settings["overrides"] == {"dev_split": 0.7, "forecasters.metadata_ridge.folds": 3}
    assert set(settings["from_spec"]) == {"judge", "resamples"}
    assert read(run)["forecasters"]["metadata_ridge"]["info"]["folds"] == 3


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("metadata_ridge.fold=3", 'forecaster "metadata_ridge": setting "fold": unknown (takes: penalties, folds)'),
        ("metadata_ridge.folds=one", 'forecaster "metadata_ridge": setting "folds": Input should be a valid integer'),
        ("historical_mean.level=0.5", 'forecaster "historical_mean" takes no settings (got: level)'),
        ("nosuch.x=1", 'unknown forecaster "nosuch" (known: '),
        ("folds=3", "--forecaster-arg 'folds=3': expected NAME.KEY=VALUE"),
    ],
)
def test_a_bad_forecaster_setting_is_named(tmp_path: Path, arg: str, message: str) -> None:
    run = study(tmp_path, {"judge": "given", "resamples": 0})
    code, out = value(str(run), "--forecaster-arg", arg)
    assert code == 2 and message in out, out
    assert not (run / "value.json").exists()


def test_a_bad_value_section_is_named_when_the_spec_is_read(tmp_path: Path) -> None:
    run = study(tmp_path, {"dev_split": 1.5})
    code, out = value(str(run))
    assert code == 2 and 'field "value.dev_split"' in out, out


FORECASTERS = textwrap.dedent("""
    import numpy as np
    from branchpoint.evaluation.value import forecaster


    @forecaster("{name}")
    def constant(states, dev):
        return np.full(len(states), 0.3), np.full(len(states), 0.6)
""")


@pytest.mark.parametrize("where", ["working directory", "spec folder"])
def test_forecaster_modules_import_from_the_working_directory_and_the_spec_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    REGISTRY.names("forecaster")
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    module = f"bp_my_forecasters_{where.split()[0]}"
    if where == "working directory":
        run = study(tmp_path / "study", {"judge": "given", "resamples": 0})
        home = tmp_path / "cwd"
        args = ["--forecaster-module", module]
    else:
        run = study(tmp_path / "study", {"judge": "given", "resamples": 0, "forecaster_modules": [module]})
        home, args = run, []
    home.mkdir(exist_ok=True)
    (home / f"{module}.py").write_text(FORECASTERS.format(name=module), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "cwd" if where == "working directory" else tmp_path)
    try:
        code, out = value(str(run), *args)
    finally:
        sys.modules.pop(module, None)
    assert code == 0, out
    assert read(run)["forecasters"][module] == {"kind": "registered", "fitted": False}
