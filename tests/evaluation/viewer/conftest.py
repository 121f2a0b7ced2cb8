"""The runs shared by the viewer tests (built once per test session): a small fork study and a\nreal run with its requests logged."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.evaluation.viewer.runs import write_fork_study, write_logged_run


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
