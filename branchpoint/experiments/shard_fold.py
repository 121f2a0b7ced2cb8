"""Folding a shard's run folder into the run folder: database rows first, then each record once.

Only the driver writes the run's own files. When a shard is done, its checkpoint and
retrieval-cache rows are copied into `RUN_DIR/checkpoints.sqlite` and
`RUN_DIR/retrieval_cache.sqlite`, then its records are appended to `RUN_DIR/executions.jsonl`,
each exactly once, and its folder is deleted (renamed, then removed), so every execution is
stored once. A shard whose fold fails keeps its folder (the error names it) and is folded again
by the next run. A killed driver loses nothing a shard recorded: the next run first folds every
shard folder it finds. With `--checkpoints postgresql://...` every shard saved into that one
database and no checkpoint rows are copied.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterable
from pathlib import Path

from branchpoint.checkpoints.store import sqlite_checkpointer
from branchpoint.errors import BranchpointError
from branchpoint.experiments.shards import SHARDS_DIR
from branchpoint.experiments.store import RunStore
from branchpoint.retrieval.cache import RetrievalCache
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    PASSAGES_FILE,
    RETRIEVAL_CACHE_FILE,
    ExecutionRecord,
    PassageResolver,
    TraceError,
    dump_record,
)

log = logging.getLogger(__name__)

CHECKPOINT_TABLES = ("checkpoints", "writes")
CACHE_TABLES = ("retrieval_cache",)


class ShardFoldError(BranchpointError):
    """A shard folder that could not be folded into the run folder (it is kept, and named)."""


def complete_records(path: Path) -> list[ExecutionRecord]:
    """The records of a trace file's complete lines (a torn last line, still being written, is left)."""
    data = path.read_bytes() if path.is_file() else b""
    records = []
    resolver = PassageResolver(path.parent / PASSAGES_FILE)  # the shard's own passage store
    for lineno, raw in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), start=1):
        if raw.strip():
            try:
                obj = resolver.resolve(json.loads(raw), f"{path} line {lineno}")
                records.append(ExecutionRecord.model_validate(obj))
            except ValueError as exc:
                raise TraceError(f"{path} line {lineno}: not a valid record ({exc})") from None
    return records


def merge_sqlite_tables(
    target: Path,
    source: Path,
    tables: Iterable[str],
    conflict: str,
    replace_threads: bool = False,
    skip_threads: Iterable[str] = (),
) -> int:
    """Copy every row of `tables` from `source` into `target` (same schema); returns rows copied.

    `conflict` is `REPLACE` (the source wins) or `IGNORE` (what `target` holds wins). With
    `replace_threads`, every `thread_id` the source holds is first deleted from the target's
    tables: a shard's database is the whole truth about its threads (an execution redone there
    was cleared there first), so rows of an abandoned attempt folded earlier do not survive.
    Threads in `skip_threads` (executions the run already recorded from elsewhere, e.g. redone by
    a run without this shard) are left as the target has them, neither deleted nor copied.
    """
    conn = sqlite3.connect(str(target), timeout=30)
    try:
        conn.execute("ATTACH DATABASE ? AS shard", (str(source),))
        conn.execute("CREATE TEMP TABLE skip_threads (thread_id TEXT PRIMARY KEY)")
        conn.executemany("INSERT OR IGNORE INTO temp.skip_threads VALUES (?)", [(str(t),) for t in skip_threads])
        copied = 0
        with conn:
            present = [t for t in tables if conn.execute(f"PRAGMA shard.table_info({t})").fetchall()]
            threaded = {
                t for t in present if "thread_id" in {row[1] for row in conn.execute(f"PRAGMA shard.table_info({t})")}
            }
            keep = "thread_id NOT IN (SELECT thread_id FROM temp.skip_threads)"
            if replace_threads:
                threads = " UNION ".join(f"SELECT thread_id FROM shard.{t}" for t in present if t in threaded)
                for table in present if threads else ():
                    conn.execute(f"DELETE FROM main.{table} WHERE thread_id IN ({threads}) AND {keep}")
            for table in present:
                columns = [row[1] for row in conn.execute(f"PRAGMA shard.table_info({table})")]
                names = ", ".join(f'"{c}"' for c in columns)
                where = f" WHERE {keep}" if table in threaded else ""
                cur = conn.execute(
                    f"INSERT OR {conflict} INTO main.{table} ({names}) SELECT {names} FROM shard.{table}{where}"
                )
                copied += max(cur.rowcount, 0)
        conn.execute("DETACH DATABASE shard")
        return copied
    finally:
        conn.close()


class ShardMerger:
    """Folds shard folders into the run folder: database rows first, then each record once.

    A record is appended unless its execution already has a final record in the run, or the very
    same record (an `incomplete` one folded before) is already there.

    `file` is the trace file shards write and the run receives (`forks.jsonl` for a fork study's
    shards), `root` the run folder's folder of those shards (`fork_shards` for a fork study's):
    a run's and a fork study's shards are never folded into each other's file.
    """

    def __init__(
        self, store: RunStore, checkpoints: str | None, file: str = EXECUTIONS_FILE, root: str = SHARDS_DIR
    ) -> None:
        self.store = store
        self.file = file
        self.root = root
        self.merge_checkpoints = checkpoints is None  # PostgreSQL: every shard saved into it already
        self._seen: set[str] = set()
        self._finished: set[str] = set()
        for rec in store.records(file):
            self._note(rec)
        self._ready: set[str] = set()

    def _note(self, rec: ExecutionRecord) -> None:
        self._seen.add(hashlib.sha256(dump_record(rec).encode()).hexdigest())
        if rec.status != "incomplete":
            self._finished.add(rec.execution_id)
        else:
            self._finished.discard(rec.execution_id)

    def finished_ids(self) -> set[str]:
        """Executions with a final record in the run (as `RunStore.finished_ids`)."""
        return set(self._finished)

    def merge_records(self, records: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
        """Append the records the run lacks, in order; returns those appended."""
        added = []
        for rec in records:
            digest = hashlib.sha256(dump_record(rec).encode()).hexdigest()
            if rec.execution_id in self._finished or digest in self._seen:
                continue
            self.store.append(rec, self.file)
            self._note(rec)
            added.append(rec)
        return added

    def _target(self, name: str) -> Path:
        """The run's own database `name`, its tables made by the code that owns them."""
        target = self.store.run_dir / name
        if name not in self._ready:
            if name == CHECKPOINTS_FILE:
                with sqlite_checkpointer(target):
                    pass
            else:
                RetrievalCache(target).close()
            self._ready.add(name)
        return target

    def merge_databases(self, shard_dir: Path) -> bool:
        """Copy a shard's checkpoint and cache rows into the run's; False if checkpoints were expected but absent."""
        found = True
        if self.merge_checkpoints:
            db = shard_dir / CHECKPOINTS_FILE
            found = db.is_file()
            if found:
                merge_sqlite_tables(
                    self._target(db.name),
                    db,
                    CHECKPOINT_TABLES,
                    "REPLACE",
                    replace_threads=True,
                    skip_threads=self._finished,
                )
        cache = shard_dir / RETRIEVAL_CACHE_FILE
        if cache.is_file():  # first writer wins, as within the cache itself
            merge_sqlite_tables(self._target(cache.name), cache, CACHE_TABLES, "IGNORE")
        return found

    def shard_dirs(self) -> list[Path]:
        """The shard folders present in the run folder (leftovers of an interrupted removal are
        removed here: their content was folded before they were renamed)."""
        root = self.store.run_dir / self.root
        if root.is_dir():
            for leftover in root.glob(".folded-*"):
                shutil.rmtree(leftover, ignore_errors=True)
        return self.shard_dirs_of(self.store, self.root)

    @staticmethod
    def shard_dirs_of(store: RunStore, folder: str = SHARDS_DIR) -> list[Path]:
        """The shard folders present in a run folder's `folder` (read-only; half-removed ones left out)."""
        root = store.run_dir / folder
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []

    def remove(self, shard_dir: Path) -> None:
        """Delete a folded shard folder (renamed first, so a half-deleted one is never refolded)."""
        if not shard_dir.is_dir():
            return
        done = shard_dir.with_name(f".folded-{shard_dir.name}-{uuid.uuid4().hex[:8]}")
        os.rename(shard_dir, done)
        shutil.rmtree(done, ignore_errors=True)
        root = shard_dir.parent
        if root.is_dir() and not any(root.iterdir()):
            root.rmdir()

    def fold(self, shard_dir: Path, records: Iterable[ExecutionRecord] = ()) -> tuple[list[ExecutionRecord], bool]:
        """Fold a shard into the run: its databases, the records given (a Ray task's result) and
        those in its folder; then delete the folder, so no execution is stored twice.

        Returns the records added, and whether the shard's checkpoints were found here (False: its
        folder is on another machine's disk). A fold that fails keeps the folder and raises
        ShardFoldError naming it; folding it again later is safe (rows and records are copied once).
        """
        try:
            found = self.merge_databases(shard_dir)
            added = self.merge_records(records)
            if shard_dir.is_dir():
                added += self.merge_records(complete_records(shard_dir / self.file))
        except (OSError, sqlite3.Error, TraceError) as exc:
            raise ShardFoldError(
                f"shard {shard_dir.name}: folding {shard_dir} into the run failed ({exc}); the shard "
                "folder is kept, and the next run folds it again (fix its cause first)"
            ) from exc
        self.remove(shard_dir)
        return added, found

    def recover(self, strict: bool = True) -> list[ExecutionRecord]:
        """Fold every shard folder present (work a killed driver did not fold); returns the records added.

        With `strict` False (a run that is failing already), a shard that cannot be folded is
        logged and kept rather than raised, so the run's own error is the one reported.
        """
        added = []
        for shard_dir in self.shard_dirs():
            try:
                added += self.fold(shard_dir)[0]
            except ShardFoldError as exc:
                if strict:
                    raise
                log.error("%s", exc)
        return added
