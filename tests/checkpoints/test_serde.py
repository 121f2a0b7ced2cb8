"""The checkpoint serializer lives on its own, so the checkpoint modules import each other without
a cycle (the PostgreSQL store used to import the SQLite store back for it)."""

from __future__ import annotations

import ast
from pathlib import Path

import branchpoint.checkpoints
from branchpoint.checkpoints.serde import safe_serde


def imports_within(package: Path, prefix: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, at any depth (lazy imports too)."""
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        name = f"{prefix}.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        found |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        graph[name] = {m for m in found if m.startswith(prefix + ".") and m != name}
    return graph


def test_checkpoint_modules_import_each_other_without_a_cycle():
    graph = imports_within(Path(branchpoint.checkpoints.__file__).parent, "branchpoint.checkpoints")
    assert "branchpoint.checkpoints.store" not in graph["branchpoint.checkpoints.postgres"]
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import cycle: {' -> '.join((*path, node))}"
        if node in done:
            return
        for dep in graph.get(node, ()):
            visit(dep, (*path, node))
        done.add(node)

    for module in graph:
        visit(module, ())


def test_safe_serde_round_trips_plain_state():
    serde = safe_serde()
    value = {"steps": [{"kind": "search", "retrieved": [{"doc_id": "d", "score": 1.0}]}], "pending": None}
    assert serde.loads_typed(serde.dumps_typed(value)) == value
