"""The runs shared by the viewer tests (built once per test session): a small fork study and a\nreal run with its requests logged."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.evaluation.viewer.runs import write_fork_study, write_logged_run, write_rebuilt_run


@pytest.fixture(scope="session")
def study_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("viewer") / "study"
    write_fork_study(run)
    return run


@pytest.fixture(scope="session")
def logged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run on the simulated model with requests.jsonl and an LLM judge's outputs."""
    run = tmp_path_factory.mktemp("viewer-logged") / "logged"
    write_logged_run(run)
    return run


@pytest.fixture(scope="session")
def rebuilt_run(tmp_path_factory: pytest.TempPathFactory, logged_run: Path) -> Path:
    """The logged run's spec run again without --log-requests, its requests rebuilt from the
    checkpoints (requests.rebuilt.jsonl)."""
    run = tmp_path_factory.mktemp("viewer-rebuilt") / "logged"
    write_rebuilt_run(run, logged_run)
    return run
