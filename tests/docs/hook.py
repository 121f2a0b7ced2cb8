"""The docs' mkdocs hook (docs/hooks/reference.py), imported by path for the tests."""

from __future__ import annotations

import importlib.util
import sys

from tests.conftest import REPO

HOOK_PATH = REPO / "docs" / "hooks" / "reference.py"


def load_hook():
    """The hook module (loaded once; dataclasses need it in sys.modules while it executes)."""
    name = "branchpoint_docs_hook"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HOOK_PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
