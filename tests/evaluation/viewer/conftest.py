"""A small fork-study run shared by the viewer tests (built once per test session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.evaluation.viewer.runs import write_fork_study


@pytest.fixture(scope="session")
def study_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("viewer") / "study"
    write_fork_study(run)
    return run
