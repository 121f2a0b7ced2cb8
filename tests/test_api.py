"""The public surface (`branchpoint.api`): every name is exported, documented by a docstring the API
reference renders, and the reference page shows the module; and no module imports another
module's private names (a name another module needs is part of its home's interface)."""

from __future__ import annotations

import ast
from pathlib import Path

import griffe
import pytest

import branchpoint
import branchpoint.api as api

ROOT = Path(branchpoint.__file__).parent.parent


def undocumented(module: str, names: list[str], search_paths: list[str]) -> list[str]:
    """`name: why` for each exported name the reference could not document: missing, a module
    (mkdocstrings skips module aliases on a module's page) or without a docstring."""
    loaded = griffe.load(module, search_paths=search_paths, resolve_aliases=True, resolve_implicit=True)
    problems = []
    for name in names:
        member = loaded.members.get(name)
        if member is None:
            problems.append(f"{name}: not found by griffe")
            continue
        target = member.final_target if isinstance(member, griffe.Alias) else member
        if target.is_module:
            problems.append(f"{name}: resolves to the module {target.path}, not the object")
        elif target.docstring is None or not target.docstring.value.strip():
            problems.append(f"{name}: {target.path} has no docstring")
    return problems


def test_every_public_name_is_exported_once() -> None:
    assert len(api.__all__) == len(set(api.__all__))
    for name in api.__all__:
        assert hasattr(api, name), name


def test_every_public_name_is_documented() -> None:
    assert undocumented("branchpoint.api", list(api.__all__), [str(ROOT)]) == []


def test_the_reference_page_renders_the_public_surface() -> None:
    page = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    assert "::: branchpoint.api\n" in page


def test_the_documentation_check_fails_on_an_undocumented_name(tmp_path: Path) -> None:
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A package."""\n', encoding="utf-8")
    (pkg / "home.py").write_text(
        '"""Home."""\n\ndef documented() -> None:\n    """Does a thing."""\n\n\ndef bare() -> None: ...\n\n'
        'LIMIT = 3\n"""The limit."""\nRAW = 4\n',
        encoding="utf-8",
    )
    (pkg / "api.py").write_text(
        '"""Surface."""\nfrom planted import home\nfrom planted.home import LIMIT, RAW, bare, documented\n\n'
        '__all__ = ["LIMIT", "RAW", "bare", "documented", "home"]\n',
        encoding="utf-8",
    )
    found = undocumented("planted.api", ["LIMIT", "RAW", "bare", "documented", "home", "gone"], [str(tmp_path)])
    assert found == [
        "RAW: planted.home.RAW has no docstring",
        "bare: planted.home.bare has no docstring",
        "home: resolves to the module planted.home, not the object",
        "gone: not found by griffe",
    ]


def private_imports(package: Path) -> list[str]:
    """`file:line module.name` for each `from branchpoint.X import _name` of a private name of
    another module, and each import of a private module from outside its own package."""
    out = []
    for path in sorted(package.rglob("*.py")):
        here = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("branchpoint")):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.module}.{alias.name}")
            parts = node.module.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    if not here.startswith(owner + "."):
                        out.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.module}")
    return out


def test_no_module_imports_another_modules_private_names() -> None:
    assert private_imports(Path(branchpoint.__file__).parent) == []


def test_the_private_import_scan_finds_a_planted_one(tmp_path: Path) -> None:
    pkg = tmp_path / "branchpoint"
    (pkg / "retrieval").mkdir(parents=True)
    (pkg / "retrieval" / "bm25.py").write_text("from branchpoint.retrieval._deps import need\n", encoding="utf-8")
    (pkg / "sim.py").write_text(
        "from branchpoint.retrieval._deps import need\nfrom branchpoint.traces import _Open, Step\n", encoding="utf-8"
    )
    assert private_imports(pkg) == [
        "branchpoint/sim.py:1 branchpoint.retrieval._deps",
        "branchpoint/sim.py:2 branchpoint.traces._Open",
    ]


@pytest.mark.parametrize("example", sorted((ROOT / "tests" / "registry" / "examples").glob("*.py")))
def test_the_plug_in_examples_need_only_the_public_surface(example: Path) -> None:
    imported = [
        node.module
        for node in ast.walk(ast.parse(example.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("branchpoint")
    ]
    assert set(imported) <= {"branchpoint.api"}, example.name
