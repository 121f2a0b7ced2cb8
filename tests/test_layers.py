"""The layers hold: `lint-imports` keeps every import-linter contract in pyproject.toml
([tool.importlinter]: which package may import which, imports inside functions included), so
`make test` fails on a broken layer as `make check` does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_import_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.is_file(), f"{lint} is missing: install the dev extra (pip install -e '.[dev]')"
    # run from the repository root, so that it analyses this checkout's `branchpoint`
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
