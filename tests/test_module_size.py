"""Small modules with one job: no module of the package exceeds 500 lines (a module that grows past
it is split by job, as `experiments.runner` and `traces` were)."""

from __future__ import annotations

from pathlib import Path

import branchpoint

MAX_LINES = 500


def oversized(package: Path, limit: int = MAX_LINES) -> list[str]:
    """`path: N lines` for each module of `package` longer than `limit` lines."""
    out = []
    for path in sorted(package.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(f"{path.relative_to(package.parent)}: {n} lines")
    return out


def test_no_module_exceeds_500_lines() -> None:
    assert oversized(Path(branchpoint.__file__).parent) == []


def test_the_size_check_finds_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    assert oversized(tmp_path) == [f"{tmp_path.name}/long.py: {MAX_LINES + 1} lines"]
