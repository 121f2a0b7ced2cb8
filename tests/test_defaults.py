"""Shared defaults are defined once (`branchpoint.defaults`): no module writes the default judge's
name or the fork sampling as its own literal default, and the places that take them agree."""

from __future__ import annotations

import ast
from pathlib import Path

import branchpoint
from branchpoint import defaults

PACKAGE = Path(branchpoint.__file__).parent
#: parameter or field name -> the literal that would be a second copy of a shared default
COPIES: dict[str, object] = {
    "judge": defaults.DEFAULT_JUDGE,
    "temperature": defaults.FORK_TEMPERATURE,
    "top_p": defaults.FORK_TOP_P,
    "lam": defaults.DEFAULT_LAMBDA,
    "mu": defaults.DEFAULT_MU,
}


def _literal_defaults(tree: ast.AST) -> list[tuple[str, object, int]]:
    """(name, literal, line) for every parameter default, annotated field default and
    `typer.Option(default, ...)` / `Field(default, ...)` given as a literal."""
    found: list[tuple[str, object, int]] = []

    def value_of(node: ast.expr | None) -> ast.expr | None:
        if (
            isinstance(node, ast.Call)
            and node.args
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in (
                "Option",
                "Field",
            )
        ):
            return node.args[0]
        return node

    def note(name: str, node: ast.expr | None) -> None:
        node = value_of(node)
        if isinstance(node, ast.Constant):
            found.append((name, node.value, node.lineno))

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
                note(arg.arg, default)
            for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                note(arg.arg, kw_default)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            note(node.target.id, node.value)
    return found


def copies_of_shared_defaults(package: Path) -> list[str]:
    """`file:line name=literal` for each default that repeats a value of `branchpoint.defaults`."""
    out = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "defaults.py" and path.parent == package:
            continue
        for name, value, line in _literal_defaults(ast.parse(path.read_text(encoding="utf-8"))):
            if name in COPIES and value == COPIES[name] and not isinstance(value, bool):
                out.append(f"{path.relative_to(package.parent)}:{line} {name}={value!r}")
    return out


def test_no_module_repeats_a_shared_default() -> None:
    assert copies_of_shared_defaults(PACKAGE) == []


def test_the_scan_finds_a_planted_copy(tmp_path: Path) -> None:
    planted = tmp_path / "pkg"
    planted.mkdir()
    (planted / "mod.py").write_text(
        'import typer\n\ndef f(judge: str = "rule") -> None: ...\n\n'
        "class C:\n    temperature: float = 0.6\n\n"
        'def g(top_p: float = typer.Option(0.95, "--top-p")) -> None: ...\n',
        encoding="utf-8",
    )
    assert [c.split(" ", 1)[1] for c in copies_of_shared_defaults(planted)] == [
        "judge='rule'",
        "top_p=0.95",
        "temperature=0.6",
    ]


def test_the_places_that_take_a_shared_default_agree() -> None:
    from branchpoint.evaluation.judges import build_judge
    from branchpoint.evaluation.value.config import ValueConfig
    from branchpoint.experiments.spec import EvaluationSpec, ForkPlan

    assert EvaluationSpec().judge == ValueConfig().judge == defaults.DEFAULT_JUDGE
    assert build_judge(defaults.DEFAULT_JUDGE).name == defaults.RULE_JUDGE
    plan = ForkPlan()
    assert (plan.temperature, plan.top_p, plan.judge) == (
        defaults.FORK_TEMPERATURE,
        defaults.FORK_TOP_P,
        defaults.DEFAULT_JUDGE,
    )
