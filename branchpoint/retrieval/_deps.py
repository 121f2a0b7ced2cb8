"""Optional heavy imports (faiss, onnxruntime, tokenizers) with one clear line when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from branchpoint.errors import BranchpointError


class MissingPackageError(BranchpointError, ImportError):
    """A package retrieval needs is not installed; the message says what to pip install."""


def require(module: str, package: str, purpose: str) -> ModuleType:
    """Import `module`, or raise MissingPackageError naming the PyPI `package` to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingPackageError(
            f"{purpose} needs the Python package {package!r} (import {module!r} failed: {exc}); "
            f"install it with: pip install {package}"
        ) from None
