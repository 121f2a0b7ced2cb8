"""Shared fixtures: a keyword retrieval source over a few passages and scripted agent contexts."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from branchpoint.registry import KINDS, REGISTRY
from branchpoint.traces import RetrievedDoc

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="session")
def builtin_components_registered() -> None:
    """Import every kind's built-in modules once, before any test: tests that register a component
    for themselves swap in a copy of the registry's entries and put the original back, and a
    built-in that registers on its first look-up inside such a test (provider `sim`, from
    `branchpoint.sim.provider`) would otherwise be lost with the copy."""
    for kind in KINDS:
        REGISTRY.names(kind)


def process_gone(pid: int) -> bool:
    """True when no process has this pid any more (it exited and was reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    """Wait up to `timeout_s` for a process to be gone; True if it went."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.02)
    return False


PASSAGES = {
    "d-canberra": ("Canberra", "Canberra is the capital city of Australia."),
    "d-sydney": ("Sydney", "Sydney is the largest city in Australia, but not its capital."),
    "d-mona": ("Mona Lisa", "The Mona Lisa was painted by Leonardo da Vinci."),
}


class KeywordSource:
    """A tiny in-memory source ranking passages by shared words (test fixture, not shipped)."""

    def __init__(self, name: str = "mem", passages: dict[str, tuple[str, str]] | None = None) -> None:
        self.name = name
        self.passages = passages or PASSAGES
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        self.queries.append(query)
        words = set(re.findall(r"\w+", query.lower()))
        scored = []
        for doc_id, (title, text) in self.passages.items():
            overlap = len(words & set(re.findall(r"\w+", f"{title} {text}".lower())))
            scored.append((overlap, doc_id, title, text))
        scored.sort(key=lambda r: (-r[0], r[1]))
        return [RetrievedDoc(doc_id=d, score=float(s), title=t, text=x, source=self.name) for s, d, t, x in scored[:k]]


@pytest.fixture()
def keyword_source() -> KeywordSource:
    return KeywordSource()


@pytest.fixture()
def postgres_url() -> str:
    """URL of a PostgreSQL server for checkpoint tests; skips when none is configured."""
    import os

    url = os.environ.get("BRANCHPOINT_TEST_POSTGRES_URL", "").strip()
    if not url:
        pytest.skip("set BRANCHPOINT_TEST_POSTGRES_URL (scripts/start-postgres.sh prints it); CI sets it")
    return url


@pytest.fixture(scope="session")
def index_cache(tmp_path_factory) -> Path:
    """One index cache for the session, so the demo index is built once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture()
def isolated_cache(index_cache, monkeypatch) -> Path:
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(index_cache))
    return index_cache
