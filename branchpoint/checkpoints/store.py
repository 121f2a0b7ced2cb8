"""Checkpointer factory: one SQLite database per run (WAL mode, one saver per file) by default,
PostgreSQL (`postgresql://` URL) at scale.

The runner's graphs run on an event loop and save through the async interface (`aput`, ...).
For SQLite that is `SqliteCheckpointer`: LangGraph's `SqliteSaver` whose async methods make the
same calls in the loop's thread. A save is a few statements and a commit into a WAL file with
`synchronous=NORMAL` (no fsync per commit), tens of microseconds, where LangGraph's
`AsyncSqliteSaver` (aiosqlite) hands every statement to its own thread and back: measured 3.0
against 1.4 ms of CPU per execution of four checkpoints (BENCHMARKS.md, "CPU per model call").
PostgreSQL gets LangGraph's `AsyncPostgresSaver` (`open_async_checkpointer`): its saves wait on
the network, which the loop must not.

A run saves through `batched_saves`: the SQLite saver then commits only when told to, so the
saves of every execution that finished meanwhile go into one transaction, committed by the
run's record writer just before it appends their records (a state a record lists is on disk
before the record is; `experiments.execution.execute`), instead of one commit per save.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from branchpoint.checkpoints.postgres import (
    async_postgres_checkpointer,
    is_postgres_url,
    mask_url,
    postgres_checkpointer,
)
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


class SqliteCheckpointer(SqliteSaver):
    """`SqliteSaver` with its async methods made in the calling (loop) thread: the same
    statements, under the saver's lock, as the blocking methods (see the module docstring).

    Inside `batched()` a save is not committed by itself: it stays in the connection's open
    transaction (visible to this saver's own reads at once, to other connections only once
    committed) until `commit()`, so many saves cost one commit."""

    def __init__(self, conn: sqlite3.Connection, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(conn, serde=serde)
        self._batching = False

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """`SqliteSaver.cursor`, whose commit after a write waits for `commit()` while batching."""
        with self.lock:
            self.setup()
            cur = self.conn.cursor()
            try:
                yield cur
            finally:
                if transaction and not self._batching:
                    self.conn.commit()
                cur.close()

    def commit(self) -> None:
        """Commit the saves made since the last commit (one transaction), from any thread."""
        with self.lock:
            if self.conn.in_transaction:
                self.conn.commit()

    @contextmanager
    def batched(self) -> Iterator[Callable[[], None]]:
        """Saves are committed only by the `commit` yielded (and once more at the end, so every
        save made inside is committed when this exits, however it exits)."""
        with self.lock:
            if self._batching:
                raise RuntimeError("SqliteCheckpointer.batched() is already active on this saver")
            self._batching = True
        try:
            yield self.commit
        finally:
            with self.lock:
                self._batching = False
            self.commit()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for tup in self.list(config, filter=filter, before=before, limit=limit):
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        return self.get_delta_channel_history(config=config, channels=channels)


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
            saver = SqliteCheckpointer(conn, serde=safe_serde())
            saver.setup()
        except sqlite3.DatabaseError as exc:  # not a database, or pages SQLite cannot read
            raise damaged(path, "checkpoint database", exc, CHECKPOINTS_HINT) from None
        yield saver
    finally:
        conn.close()


@contextmanager
def open_checkpointer(target: str | Path, *, pool_size: int = 8) -> Iterator[BaseCheckpointSaver[str]]:
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


@asynccontextmanager
async def open_async_checkpointer(target: str | Path, *, pool_size: int = 8) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """The checkpointer for `target` for graphs run on the current event loop: an
    `AsyncPostgresSaver` for a PostgreSQL URL, else the SQLite file's `SqliteCheckpointer`."""
    check_target(target, "checkpoint store")
    if is_postgres_url(target):
        async with async_postgres_checkpointer(str(target).strip(), pool_size=pool_size) as saver:
            yield saver
    else:
        with sqlite_checkpointer(target) as sqlite_saver:
            yield sqlite_saver


@contextmanager
def batched_saves(saver: BaseCheckpointSaver[str] | None) -> Iterator[Callable[[], None]]:
    """Group a run's checkpoint saves into one transaction per batch: yields `commit`, which
    makes every save so far durable, for the writer to call before it appends the records that
    list those states. A SQLite saver commits nothing else until this exits (then it commits
    what is left); any other saver (PostgreSQL) commits each save itself, and `commit` does
    nothing."""
    if isinstance(saver, SqliteCheckpointer):
        with saver.batched() as commit:
            yield commit
    else:
        yield _no_commit


def _no_commit() -> None:
    """Nothing to commit: the saver commits each save itself."""


async def adelete_threads(saver: BaseCheckpointSaver[str] | None, thread_ids: list[str], chunk: int = 500) -> None:
    """`delete_threads` for a saver used from the event loop (an async PostgreSQL saver deletes
    through its own interface; SQLite in one transaction per chunk, as `delete_threads`)."""
    if saver is None or not thread_ids:
        return
    if isinstance(saver, SqliteSaver):
        delete_threads(saver, thread_ids, chunk)
        return
    for thread_id in thread_ids:
        await saver.adelete_thread(thread_id)


def delete_threads(saver: BaseCheckpointSaver[str] | None, thread_ids: list[str], chunk: int = 500) -> None:
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
