"""`fork` and `replay` read the run's spec.yaml first: its `fork:` section is the plan's default,
options given (and --set) override it, and RUN_DIR/fork_settings.jsonl records each invocation's
plan with where each setting came from."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.traces import FORK_SETTINGS_FILE, FORKS_FILE, REPLAYS_FILE, read_records
from tests.experiments.conftest import CountingOpener, search_until_told_responder
from tests.experiments.test_replay import SPEC

FORK = {"boundaries": ["initial"], "actions": ["THINK", "SEARCH"], "repeats": 2, "search_budget": 1, "temperature": 0.7}


def make_run(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "fork": FORK}))
    out = tmp_path / "run"
    run_experiment(
        load_spec(spec), out, progress=False, model_opener=CountingOpener(responder=search_until_told_responder)
    )
    return out


def invocations(run_dir):
    return [json.loads(line) for line in (run_dir / FORK_SETTINGS_FILE).read_text().splitlines()]


def test_fork_takes_its_plan_from_the_spec_and_records_overrides(tmp_path, isolated_cache):
    run_dir = make_run(tmp_path)
    result = CliRunner().invoke(app, ["fork", str(run_dir), "--no-progress"])
    assert result.exit_code == 0, result.output
    branches = read_records(run_dir / FORKS_FILE)
    assert len(branches) == 2 * 2 * 2  # 2 executions × initial only × THINK, SEARCH × 2 repeats
    assert {b.parent.boundary for b in branches} == {"initial"} and {b.repeat for b in branches} == {0, 1}
    assert {b.sampling["temperature"] for b in branches} == {0.7}
    [line] = invocations(run_dir)
    settings = line["settings"]
    assert line["command"] == "fork" and settings["repeats"] == 2 and settings["search_budget"] == 1
    # from_spec: what the spec sets to other than the defaults (actions THINK, SEARCH is the default)
    assert set(settings["from_spec"]) == set(FORK) - {"actions"} and settings["overrides"] == {}
    assert settings["spec"] == str(run_dir / "spec.yaml")

    result = CliRunner().invoke(app, ["fork", str(run_dir), "--repeats", "3", "--set", "top_p=0.9", "--no-progress"])
    assert result.exit_code == 0, result.output
    settings = invocations(run_dir)[-1]["settings"]
    assert settings["overrides"] == {"repeats": 3, "top_p": 0.9} and "repeats" not in settings["from_spec"]
    assert (settings["repeats"], settings["temperature"], settings["top_p"]) == (3, 0.7, 0.9)
    assert {b.repeat for b in read_records(run_dir / FORKS_FILE)} == {0, 1, 2}


def test_replay_samples_as_the_spec_fork_section_says(tmp_path, isolated_cache):
    run_dir = make_run(tmp_path)
    parent = RunStore(run_dir).records()[0]
    result = CliRunner().invoke(app, ["replay", str(run_dir), "--execution", parent.execution_id, "--no-progress"])
    assert result.exit_code == 0, result.output
    [replayed] = read_records(run_dir / REPLAYS_FILE)
    assert replayed.sampling["temperature"] == 0.7
    line = invocations(run_dir)[-1]
    assert line["command"] == "replay" and line["settings"]["from_spec"] == ["temperature"]
    assert line["settings"]["repeats"] == 1
