"""Checkpointer factory: one SQLite database per run (WAL mode), one saver per file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver


@contextmanager
def sqlite_checkpointer(path: str | Path) -> Iterator[SqliteSaver]:
    """A SqliteSaver on `path` in WAL mode; share this one saver for all threads of a run.

    Several connections on one file give "database is locked" under load (a known upstream
    issue), so a run opens exactly one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()
