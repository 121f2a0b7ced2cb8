"""The provenance block: the command, its components, the code's version and git revision, the
environment, and what it must never hold (secrets)."""

from __future__ import annotations

import importlib
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import branchpoint
from branchpoint.code_origin import checkout_root, git_revision, read_git_head
from branchpoint.provenance import ComponentInfo, collect, command_line, command_scope, component_info
from branchpoint.registry import REGISTRY, Entry


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A git checkout holding a package `pkg` with one commit."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("x = 1\n", encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return root


def test_the_block_names_the_command_and_masks_secrets_of_its_command_line() -> None:
    argv = [
        "branchpoint",
        "evaluate",
        "runs/x",
        "--judge-base-url",
        "http://bp:hunter2secret@127.0.0.1:8000/v1",
        "--api-key",
        "sk-abcdefghijklmnop",
    ]
    with command_scope("branchpoint evaluate", argv):
        block = collect("evaluate")
    text = block.model_dump_json()
    assert block.command == "branchpoint evaluate"
    assert "hunter2secret" not in text and "sk-abcdefghijklmnop" not in text
    assert command_line(block).startswith("branchpoint evaluate runs/x --judge-base-url")
    assert block.branchpoint_version == branchpoint.__version__
    assert (block.python, block.python_implementation) == (platform.python_version(), platform.python_implementation())
    assert block.packages["pydantic"] == importlib.metadata.version("pydantic")
    assert block.packages["langgraph"] == importlib.metadata.version("langgraph")
    assert "not-a-package" not in block.packages


def test_outside_a_command_the_block_names_the_function_and_sys_argv() -> None:
    block = collect("evaluate")
    assert block.command == "evaluate" and block.argv == sys.argv


def test_components_are_those_the_command_used() -> None:
    REGISTRY.get("policy", "native")  # used before the command: not its component
    with command_scope("branchpoint evaluate", ["branchpoint", "evaluate"]):
        REGISTRY.get("judge", "rule")
        block = collect("evaluate")
    listed = {(c.kind, c.name): c for c in block.components}
    assert ("policy", "native") not in listed
    rule = listed[("judge", "rule")]
    assert (rule.module, rule.package, rule.version) == ("branchpoint.evaluation.judges", "branchpoint", "0.1.0")


def test_git_revision_and_dirty_flag_of_a_checkout(checkout: Path) -> None:
    head = git(checkout, "rev-parse", "HEAD")
    assert checkout_root(str(checkout / "pkg" / "__init__.py")) == checkout.resolve()
    assert git_revision(checkout) == (head, False)
    (checkout / "pkg" / "__init__.py").write_text("x = 2\n", encoding="utf-8")
    assert git_revision(checkout) == (head, True)


def test_without_git_the_revision_is_read_from_the_git_files(checkout: Path, monkeypatch) -> None:
    head = git(checkout, "rev-parse", "HEAD")
    git(checkout, "pack-refs", "--all")  # the branch's ref only in packed-refs
    worktree = checkout.parent / "wt"
    git(checkout, "worktree", "add", "-q", "-b", "other", str(worktree))
    monkeypatch.setenv("PATH", str(checkout / "no-git-here"))
    assert git_revision(checkout) == (head, None)  # no git: the commit still, dirty unknown
    assert read_git_head(worktree) == head  # a worktree's `.git` file, refs in the common folder


def test_outside_a_checkout_there_is_no_revision(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    assert checkout_root(str(tmp_path / "pkg" / "__init__.py")) is None


def test_our_own_checkout_is_named_by_its_head() -> None:
    root = checkout_root()
    if root is None:
        pytest.skip("branchpoint is installed from a wheel here")
    assert git_revision()[0] == git(root, "rev-parse", "HEAD")


def judge_component(folder: Path, module_name: str, monkeypatch) -> ComponentInfo:
    """The component entry of a judge defined in FOLDER/MODULE_NAME.py (imported for the call only)."""
    (folder / f"{module_name}.py").write_text("def judge(record):\n    return []\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    module = importlib.import_module(module_name)
    try:
        return component_info(Entry("judge", f"{module_name}:judge", module.judge, f"{module_name}:judge"))
    finally:
        del sys.modules[module_name]


def test_a_component_of_an_installed_distribution_names_its_package_and_version(tmp_path: Path, monkeypatch) -> None:
    info = tmp_path / "prov_demo_plugin-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: prov-demo-plugin\nVersion: 0.3\n", encoding="utf-8")
    found = judge_component(tmp_path, "prov_demo_plugin", monkeypatch)
    assert (found.module, found.package, found.version) == ("prov_demo_plugin", "prov-demo-plugin", "0.3")
    assert found.path is None


def test_a_component_of_your_own_module_names_its_file(tmp_path: Path, monkeypatch) -> None:
    found = judge_component(tmp_path, "my_prov_judges", monkeypatch)
    assert (found.module, found.package, found.version) == ("my_prov_judges", None, None)
    assert found.path == str(tmp_path / "my_prov_judges.py")
