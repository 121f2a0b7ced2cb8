"""The Ray executor: same executions as a local run, each recorded once, nothing left behind.

The tests that need Ray share one local instance (2 CPUs, opened by the executor's own
`ray_session`, which checks on closing that nothing was left in ~/.ray or /tmp) and run the
scripted model without search, so no index is built in the workers.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments import ExperimentSpec, RunStore, load_spec, run_experiment
from branchpoint.experiments.planning import plan_executions, select_questions
from branchpoint.experiments.ray_executor import ray_session, run_experiment_ray
from branchpoint.experiments.shards import SHARDS_DIR, ShardTask, run_shard, shard_name
from branchpoint.experiments.states import saved_states
from branchpoint.experiments.verify import verify_run
from branchpoint.traces import read_records
from tests.experiments.test_work_driver import run_content

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

SPEC = {
    "name": "ray-unit",
    "questions": {"path": "demo", "limit": 4},
    "model": {"provider": "scripted", "script": ['answer", "text": "Canberra"}'], "max_tokens": 32},
    "agent": {"policy": "constrained", "search": False},
    "sweep": {"agent.evidence_words": [40, 50, 60]},
}


@pytest.fixture()
def spec_path(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    return path


def _home_ray_state() -> list[str] | None:
    home = Path.home() / ".ray"
    return sorted(str(p) for p in home.rglob("*")) if home.exists() else None


def _tmp_ray_dirs() -> set[str]:
    tmp = Path(tempfile.gettempdir())
    return {p.name for p in tmp.glob("bp-ray-*")} | ({"ray"} if (tmp / "ray").exists() else set())


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """One local Ray instance for the module; on closing, nothing of it may be left behind."""
    names = ("RAY_TMPDIR", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED")
    home_before, tmp_before = _home_ray_state(), _tmp_ray_dirs()
    env_before = {k: os.environ.get(k) for k in names}
    with pytest.MonkeyPatch.context() as mp:  # workers inherit the environment Ray starts with
        mp.setenv("BRANCHPOINT_CACHE", str(tmp_path_factory.mktemp("ray-cache")))
        with ray_session(num_cpus=2):
            yield
    assert not ray.is_initialized()
    assert _home_ray_state() == home_before, "the Ray session wrote into ~/.ray"
    assert _tmp_ray_dirs() == tmp_before, "the Ray session left its temporary folder behind"
    assert {k: os.environ.get(k) for k in names} == env_before, "the Ray session changed the environment"


def _ids(run_dir: Path) -> list[str]:
    return [r.execution_id for r in read_records(run_dir / "executions.jsonl")]


def test_ray_run_matches_local_run(tmp_path, spec_path, monkeypatch, ray_cluster):
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    spec = load_spec(spec_path)
    local = run_experiment(spec, tmp_path / "local", progress=False)
    assert local.ran == 12

    # A driver killed after one shard finished: that shard's folder is all that is left of it.
    run_dir = tmp_path / "ray"
    first = plan_executions(spec, select_questions(spec))[:4]
    assert len({shard_name(p) for p in first}) == 1
    RunStore(run_dir).create(spec.model_dump(mode="json"))
    run_shard(
        ShardTask(
            spec.model_dump(mode="json"),
            str(run_dir),
            shard_name(first[0]),
            [p.execution_id for p in first],
            None,
            1,
            os.getcwd(),
        )
    )

    summary = run_experiment_ray(spec, run_dir, progress=False, concurrency=2)

    # the recovered shard is folded in, not rerun; the other two conditions ran as Ray tasks
    assert (summary.planned, summary.skipped, summary.ran, summary.statuses) == (12, 4, 8, {"ok": 8})
    ids = _ids(run_dir)
    assert len(ids) == len(set(ids)) == 12
    assert sorted(ids) == sorted(_ids(tmp_path / "local"))
    assert not (run_dir / SHARDS_DIR).exists()  # every shard folded, then its folder deleted: stored once
    # checkpoints are folded into the run's own database: `checkpoints ls` and `fork` find them
    boundaries = saved_states(run_dir)
    assert {s.execution_id for s in boundaries} == set(ids)
    # the same records and the same checkpoint boundaries as the run in one process
    assert run_content(run_dir) == run_content(tmp_path / "local")
    report = verify_run(run_dir, sample=0)
    assert report.ok, report.problems

    again = run_experiment_ray(spec, run_dir, progress=False)
    assert (again.ran, again.skipped) == (0, 12)
    assert _ids(run_dir) == ids


def test_cli_ray_after_local_run_runs_nothing(tmp_path, spec_path, monkeypatch):
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    cli = CliRunner()
    out = tmp_path / "run"
    first = cli.invoke(app, ["run", str(spec_path), "--out", str(out), "--no-progress"])
    assert first.exit_code == 0, first.output

    def no_session(*args, **kwargs):
        raise AssertionError("a Ray session was opened with nothing to run")

    # same ids: the Ray executor finds every execution recorded and opens no Ray session
    monkeypatch.setattr("branchpoint.experiments.ray_executor.ray_session", no_session)
    again = cli.invoke(app, ["run", str(spec_path), "--out", str(out), "--no-progress", "--executor", "ray"])
    assert again.exit_code == 0, again.output
    assert "12 already recorded, 0 run" in again.output

    bad = cli.invoke(app, ["run", str(spec_path), "--out", str(out), "--ray-address", "auto"])
    assert bad.exit_code == 2 and "--ray-address applies to --executor ray only" in bad.output
    bad = cli.invoke(app, ["run", str(spec_path), "--out", str(out), "--executor", "dask"])
    assert bad.exit_code == 2 and "expected local or ray" in bad.output


def test_sqlite_checkpoint_path_is_refused(tmp_path, spec_path):
    with pytest.raises(InputError, match="postgresql:// URL"):
        run_experiment_ray(load_spec(spec_path), tmp_path / "run", checkpoints=str(tmp_path / "c.sqlite"))


def test_missing_ray_says_how_to_install(tmp_path, spec_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InputError, match=r"pip install 'ray==2\.60\.0'"):
        run_experiment_ray(load_spec(spec_path), tmp_path / "run")


def test_failing_shard_reports_its_input_error(tmp_path, monkeypatch, ray_cluster):
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    spec = ExperimentSpec.model_validate({**SPEC, "model": {"provider": "scripted"}, "sweep": {}})
    with pytest.raises(InputError, match=r"shard cond-\w+ \(condition base\): model\.script: provider 'scripted'"):
        run_experiment_ray(spec, tmp_path / "run", progress=False)
    assert ray.is_initialized()  # the caller's session is left open
    assert RunStore(tmp_path / "run").records() == []
