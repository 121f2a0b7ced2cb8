"""The evaluation reads traces only: it never imports agents, experiments or retrieval.

It may import `branchpoint.models`: the LLM judges call a model through the same client as the agents.
"""

from __future__ import annotations

import ast
from pathlib import Path

import branchpoint.evaluation

FORBIDDEN = ("agents", "experiments", "retrieval")


def test_evaluation_imports_no_producer_package():
    root = Path(branchpoint.evaluation.__file__).parent
    for source in root.rglob("*.py"):
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
