"""Checkpointer factory: one SQLite database per run (WAL mode, one saver per file) by default,
PostgreSQL (`postgresql://` URL) at scale."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from branchpoint.checkpoints.postgres import is_postgres_url, mask_url, postgres_checkpointer
from branchpoint.checkpoints.serde import safe_serde
from branchpoint.dbfiles import CHECKPOINTS_HINT, damaged, probe
from branchpoint.errors import InputError

#: What a checkpoint store may be, as said to people.
ACCEPTED_TARGETS = "a .sqlite file path or a postgres:// / postgresql:// URL"


def check_target(target: str | Path, option: str = "--checkpoints") -> str:
    """The checkpoint store `target` if it is a `.sqlite` path or a PostgreSQL URL; else InputError.

    Anything else (`mysql://x`, a mistyped `postgresq://user:pw@host`, `states.db`) would be
    taken as a SQLite path: states outside the run folder, a password in a folder name.
    """
    text = str(target).strip()
    if is_postgres_url(text):
        return text
    if "://" in text or not text.lower().endswith(".sqlite"):
        shown = mask_url(text) if "://" in text else text
        raise InputError(f"{option} {shown!r}: expected {ACCEPTED_TARGETS}")
    return str(target)


@contextmanager
def sqlite_checkpointer(path: str | Path) -> Iterator[SqliteSaver]:
    """A SqliteSaver on `path` in WAL mode; share this one saver for all threads of a run.

    Several connections on one file give "database is locked" under load (a known upstream
    issue), so a run opens exactly one. It is shared by every thread of the process
    (`check_same_thread=False`); `SqliteSaver` serialises its calls with its own lock, and
    concurrent `graph.invoke` from a thread pool into this one saver is tested.
    """
    path = Path(path)
    probe(path, "checkpoint database", CHECKPOINTS_HINT, ("checkpoints", "writes"))
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            saver = SqliteSaver(conn, serde=safe_serde())
            saver.setup()
        except sqlite3.DatabaseError as exc:  # not a database, or pages SQLite cannot read
            raise damaged(path, "checkpoint database", exc, CHECKPOINTS_HINT) from None
        yield saver
    finally:
        conn.close()


@contextmanager
def open_checkpointer(target: str | Path, *, pool_size: int = 8) -> Iterator[BaseCheckpointSaver]:
    """The checkpointer for `target`: a `postgresql://` (or `postgres://`) URL opens a pooled
    `PostgresSaver`; else a `.sqlite` file path (anything else: InputError, see `check_target`).
    Share the one saver for the whole run."""
    check_target(target, "checkpoint store")
    if is_postgres_url(target):
        with postgres_checkpointer(str(target).strip(), pool_size=pool_size) as saver:
            yield saver
    else:
        with sqlite_checkpointer(target) as saver:
            yield saver


def delete_threads(saver: BaseCheckpointSaver | None, thread_ids: list[str], chunk: int = 500) -> None:
    """Delete every checkpoint and write of these threads: with a SQLite saver, one transaction
    per `chunk` ids instead of one commit per thread (the runner clears a whole run at start)."""
    if saver is None or not thread_ids:
        return
    if not isinstance(saver, SqliteSaver):
        for thread_id in thread_ids:
            saver.delete_thread(thread_id)
        return
    for start in range(0, len(thread_ids), chunk):
        rows = [(str(t),) for t in thread_ids[start : start + chunk]]
        with saver.cursor() as cur:
            cur.executemany("DELETE FROM checkpoints WHERE thread_id = ?", rows)
            cur.executemany("DELETE FROM writes WHERE thread_id = ?", rows)
