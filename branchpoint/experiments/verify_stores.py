"""`runs verify`'s checks of a run's databases, which it opens read-only.

The checkpoint database (`checkpoints` problems): each sampled execution's saved boundaries
against the `checkpoint_ids` of its record, a thread started more than once, a fork's parent
checkpoint gone, a saved state that cannot be read. The retrieval cache (`retrieval_cache`):
that it opens, and that sampled entries decode (damaged ones are warnings: the cache treats them
as misses). `read_only_checkpointer` opens a checkpoint database without writing to it, not
even table set-up, so verifying leaves the folder as found.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.errors import BranchpointError
from branchpoint.experiments.verify_records import TraceEntry, Verification, finished_in
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, REPLAYS_FILE, RETRIEVAL_CACHE_FILE, RetrievedDoc


def _reader(path: Path) -> sqlite3.Connection:
    """A connection that only reads an existing database.

    Not SQLite's `mode=ro`: a read-only connection to a WAL database leaves `-wal` and `-shm`
    files behind, while this one, the last to close, removes them, so the folder is left as found.
    """
    if not path.is_file():
        raise sqlite3.DatabaseError(f"{path}: file not found")
    return sqlite3.connect(path.resolve().as_uri(), uri=True, check_same_thread=False)


@contextmanager
def read_only_checkpointer(target: str | Path) -> Iterator[Any]:
    """A checkpoint saver that does not write (no table set-up); a URL opens PostgreSQL."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from branchpoint.checkpoints.postgres import is_postgres_url
    from branchpoint.checkpoints.serde import safe_serde
    from branchpoint.checkpoints.store import open_checkpointer

    if is_postgres_url(str(target)):
        with open_checkpointer(target) as saver:
            yield saver
        return
    conn = _reader(Path(target))
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"checkpoints", "writes"} <= tables:
            raise sqlite3.DatabaseError("no checkpoints table: not a checkpoint database")
        saver = SqliteSaver(conn, serde=safe_serde())
        saver.is_setup = True  # the tables exist; setup would try to write
        yield saver
    finally:
        conn.close()


def _thread(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _sample(ids: list[str], n: int, seed: int) -> list[str]:
    ids = sorted(ids)
    return ids if n <= 0 or n >= len(ids) else random.Random(seed).sample(ids, n)


def check_checkpoints(
    saver: Any,
    executions: dict[str, TraceEntry],
    forks: dict[str, TraceEntry],
    sample: int,
    seed: int,
    report: Verification,
    replays: dict[str, TraceEntry] | None = None,
) -> None:
    """The `checkpoints` problems of up to `sample` finished executions of each trace file (drawn
    with `seed`; 0 or fewer: all): saved boundaries against the record's `checkpoint_ids`, a
    thread started more than once, a fork's parent checkpoint gone, an unreadable state."""
    from branchpoint.checkpoints import list_boundaries
    from branchpoint.checkpoints.values import state_reader

    boundaries: dict[str, set[str]] = {}
    reader = state_reader(saver)

    def listed(eid: str) -> set[str]:
        if eid not in boundaries:
            boundaries[eid] = {b.checkpoint_id for b in list_boundaries(saver, eid, reader)}
        return boundaries[eid]

    checked = 0
    for name, entries in ((EXECUTIONS_FILE, executions), (FORKS_FILE, forks), (REPLAYS_FILE, replays or {})):
        for eid in _sample(list(finished_in(entries)), sample, seed):
            entry = entries[eid]
            where = f"{name} line {entry.line}"
            checked += 1
            try:
                _check_execution(saver, eid, entry, where, {**executions, **forks}, listed, report)
            except UNREADABLE_STATE as exc:  # e.g. a row whose serializer this LangGraph does not know
                report.problem(
                    "checkpoints",
                    where,
                    f"execution {eid[:12]}: a saved state cannot be read ({type(exc).__name__}: {exc})",
                )
    report.counts["checkpoints_checked"] = checked


#: What reading a damaged or foreign saved state raises (an unknown serializer type, bad bytes).
UNREADABLE_STATE = (NotImplementedError, ValueError, TypeError, KeyError, sqlite3.Error)


def _check_execution(
    saver: Any,
    eid: str,
    entry: TraceEntry,
    where: str,
    parents: dict[str, TraceEntry],
    listed: Any,
    report: Verification,
) -> None:
    """The checkpoint checks of one sampled execution (see `check_checkpoints`); `parents`: the
    executions and branches a record's parent may be (forks of forks)."""
    ids = listed(eid)
    if not ids and entry.checkpoint_ids is None and entry.parent is None:  # `initial` is always saved
        report.problem("checkpoints", where, f"execution {eid[:12]}: no saved states in the checkpoint database")
        return
    starts = sum(1 for _ in saver.list(_thread(eid), filter={"source": "input"}))
    if starts > 1:
        report.problem(
            "checkpoints",
            where,
            f"execution {eid[:12]}: its thread was started {starts} times: an abandoned attempt's saved "
            "states are still there, and forks would start from them",
        )
    if entry.checkpoint_ids is not None:
        lost = set(entry.checkpoint_ids) - ids
        extra = ids - set(entry.checkpoint_ids)
        if lost:
            report.problem(
                "checkpoints",
                where,
                f"execution {eid[:12]}: {len(lost)} of the {len(entry.checkpoint_ids)} checkpoints its record "
                "lists are not in the database" + (" (no saved states at all)" if not ids else ""),
            )
        if extra:
            report.problem(
                "checkpoints",
                where,
                f"execution {eid[:12]}: {len(extra)} saved boundaries that its record does not list",
            )
    if entry.parent is not None and entry.parent[0] in parents and entry.parent[1] not in listed(entry.parent[0]):
        report.problem(
            "checkpoints",
            where,
            f"execution {eid[:12]}: parent checkpoint {entry.parent[1]} of {entry.parent[0][:12]} does not exist",
        )


def check_retrieval_cache(path: Path, sample: int, report: Verification) -> None:
    """The retrieval cache at `path` opens (else a `retrieval_cache` problem) and its first
    `sample` entries (0 or fewer: all) decode (else a warning each: the cache treats them as
    misses); a missing cache is no problem."""
    from branchpoint.retrieval.cache import RetrievalCache

    if not path.is_file():
        report.counts["cache_entries"] = 0
        return
    try:
        with RetrievalCache(path) as cache:
            report.counts["cache_entries"] = cache.stats().entries
        conn = _reader(path)
        try:
            query = "SELECT source, query, k, result FROM retrieval_cache ORDER BY rowid"
            rows = conn.execute(query + (f" LIMIT {int(sample)}" if sample > 0 else ""))
            checked = 0
            for source, text, k, result in rows:
                checked += 1
                try:
                    docs = json.loads(result)
                    if not isinstance(docs, list):
                        raise ValueError(f"expected a JSON list, got {type(docs).__name__}")
                    for doc in docs:
                        RetrievedDoc.model_validate(doc)
                except (ValueError, ValidationError) as exc:
                    report.warn(
                        "retrieval_cache",
                        f"{RETRIEVAL_CACHE_FILE} source {source!r} query {text!r} k={k}",
                        f"damaged entry (treated as a miss and rewritten): {str(exc).splitlines()[0]}",
                    )
            report.counts["cache_checked"] = checked
        finally:
            conn.close()
    except (sqlite3.Error, OSError, RuntimeError, BranchpointError) as exc:
        report.problem("retrieval_cache", RETRIEVAL_CACHE_FILE, f"cannot read the retrieval cache: {exc}")
