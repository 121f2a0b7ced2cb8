"""Fixtures shared by the model tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.models.http_fakes import FakeServer, fake_server


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A loopback server replaying recorded bodies (see tests/models/http_fakes.py)."""
    with fake_server() as fake:
        yield fake
