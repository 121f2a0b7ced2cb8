"""The sync and async PostgreSQL checkpointers refuse bad input with the same messages (no server needed)."""

from __future__ import annotations

import asyncio
import sys
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

import pytest

from branchpoint.checkpoints.postgres import async_postgres_checkpointer, postgres_checkpointer
from branchpoint.errors import InputError


def open_sync(url: str, **kwargs: Any) -> None:
    cm: AbstractContextManager[Any] = postgres_checkpointer(url, **kwargs)
    with cm:
        pass


def open_async(url: str, **kwargs: Any) -> None:
    async def main() -> None:
        cm: AbstractAsyncContextManager[Any] = async_postgres_checkpointer(url, **kwargs)
        async with cm:
            pass

    asyncio.run(main())


OPENERS = pytest.mark.parametrize("opener", [open_sync, open_async], ids=["sync", "async"])


def error_of(opener: Any, url: str, **kwargs: Any) -> str:
    with pytest.raises(InputError) as err:
        opener(url, **kwargs)
    return str(err.value)


@OPENERS
def test_an_unreachable_server_is_named_masked(opener):
    message = error_of(opener, "postgresql://x:hunter2@127.0.0.1:1/none", connect_timeout=1)
    assert message.startswith("cannot reach the PostgreSQL checkpoint store postgresql://x:***@127.0.0.1:1/none: ")
    assert "hunter2" not in message and "\n" not in message


@OPENERS
def test_a_pool_of_no_connection_is_refused_before_connecting(opener):
    message = error_of(opener, "postgresql://x@127.0.0.1:1/none", pool_size=0)
    assert message == "checkpoints pool_size: must be at least 1, got 0"


@OPENERS
def test_a_missing_package_says_what_to_install(opener, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)  # `import psycopg_pool` now fails
    message = error_of(opener, "postgresql://x@127.0.0.1:1/none")
    assert message.startswith("PostgreSQL checkpoints need packages that are not installed (psycopg_pool): pip install")
    assert "langgraph-checkpoint-postgres" in message
