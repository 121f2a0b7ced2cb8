"""Where the running code comes from: the git checkout branchpoint is imported from (commit and
dirty flag), the installed distribution that holds a module, and installed package versions.

Fast and never failing: one `git status` with a short timeout (the `.git` files when git is
absent), distributions found by name before any scan of every installed one. Base layer:
imports nothing of branchpoint's but the package itself.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import branchpoint

#: Seconds git may take to say the revision (a slow network file system must not stall a command).
GIT_TIMEOUT_S = 3.0


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """The installed versions of `names` (those not installed are left out)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def checkout_root(package_file: str | None = None) -> Path | None:
    """The git checkout branchpoint is imported from (the folder above the package holds `.git`,
    a folder or a worktree's file), or None when it is installed from a wheel."""
    root = Path(package_file or branchpoint.__file__).resolve().parent.parent
    return root if (root / ".git").exists() else None


def git_revision(root: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout branchpoint is imported from; (None, None) outside one.

    One `git status` call (no index lock taken, `GIT_TIMEOUT_S` at most); without git, the
    commit is read from the `.git` files and dirty is None (unknown)."""
    root = root or checkout_root()
    if root is None:
        return None, None
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env=env,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return read_git_head(root), None
    lines = out.splitlines()
    oid = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), None)
    if oid is None or oid == "(initial)":
        return None, None
    return oid, any(not line.startswith("#") for line in lines)


def read_git_head(root: Path) -> str | None:
    """The commit HEAD names, read from the checkout's `.git` files (a worktree's too); None when
    they cannot be read."""
    try:
        git = root / ".git"
        if git.is_file():  # a worktree: "gitdir: <path>", refs in its common folder
            git = (root / git.read_text(encoding="utf-8").split(":", 1)[1].strip()).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head.split(":", 1)[1].strip()
        for folder in (git, common):
            if (folder / ref).is_file():
                return (folder / ref).read_text(encoding="utf-8").strip() or None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except (OSError, IndexError):
        return None
    return None


def distribution_of(module: str) -> metadata.Distribution | None:
    """The installed distribution that holds `module`: the one named like its top-level package
    (the usual case, found at once), else, for a module inside site-packages, the one whose
    files list it (a scan of every installed distribution); None for a module of none."""
    top = module.split(".", 1)[0]
    for name in dict.fromkeys((top, top.replace("_", "-"))):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        tops = (dist.read_text("top_level.txt") or "").split()
        if not tops or top in tops:
            return dist
    loaded = sys.modules.get(module) or sys.modules.get(top)
    where = Path(getattr(loaded, "__file__", None) or "")
    if not {"site-packages", "dist-packages"} & set(where.parts):
        return None  # your own module (beside the spec, the working directory, tests/)
    names = metadata.packages_distributions().get(top) or []
    for name in names:
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    return None
