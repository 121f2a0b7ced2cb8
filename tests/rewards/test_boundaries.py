"""`branchpoint.rewards` is what a trainer imports: it reads completions and judges answers, and
never imports what runs studies (experiments, checkpoints, retrieval, the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

import branchpoint.rewards

FORBIDDEN = ("experiments", "checkpoints", "retrieval", "cli", "importers")


def test_rewards_import_no_study_package():
    root = Path(branchpoint.rewards.__file__).parent
    sources = list(root.rglob("*.py"))
    assert len(sources) >= 5
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                assert not (parts[0] == "branchpoint" and len(parts) > 1 and parts[1] in FORBIDDEN), (
                    f"{source.name} imports {name}"
                )
