"""Persistent exact-query retrieval cache, so repeated executions share evidence exactly.

Forked executions from one checkpoint (branch × repeat) must see the same passages for the
same query; otherwise the difference between actions mixes in retrieval noise. A
`RetrievalCache` is one SQLite file keyed by (source name, exact query text, k, params):

* **Exact query text**: no normalisation at all. `"Paris?"`, `"paris"` and `"Paris? "` are
  three different keys; what the agent typed is what is looked up.
* **params**: a string the caller gives that fingerprints everything else that changes the
  answer (corpus fingerprint, encoder, index kind...). `source_params` derives it for a
  `DenseSource`; a source may also declare its own with a `cache_params` string attribute.
* **First writer wins**: `put` never replaces a stored result (unless `replace=True`) and
  returns what is stored, so two processes that missed the same key at once still hand out the
  same documents. Within one process a per-key lock makes exactly one inner search per key.
* **Damaged rows** (JSON that does not parse into documents) count as a miss: a warning is
  logged, the row is dropped, and the next `put` writes a fresh result.

Concurrency: one connection per `RetrievalCache` (`check_same_thread=False`) guarded by a lock,
so any number of threads may share one instance; WAL mode and a busy timeout let several
processes share one file (on a local disk: SQLite's WAL does not work over network file systems).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.retrieval.source import RetrievalSource
from branchpoint.traces import RetrievedDoc

log = logging.getLogger(__name__)

#: How long (ms) a connection waits for another process's write lock before failing.
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS retrieval_cache (
    source     TEXT    NOT NULL,
    query      TEXT    NOT NULL,
    k          INTEGER NOT NULL,
    params     TEXT    NOT NULL,
    result     TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    PRIMARY KEY (source, query, k, params)
)
"""
_KEY = "source = ? AND query = ? AND k = ? AND params = ?"

Key = tuple[str, str, int, str]


@dataclass(frozen=True)
class CacheStats:
    """Rows in the file (all processes), and hits / misses of this `RetrievalCache` instance."""

    entries: int
    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        """hits / (hits + misses); 0.0 before any lookup."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


def _dump(docs: list[RetrievedDoc]) -> str:
    """The stored JSON of a result list (every field, extras included, order kept)."""
    return json.dumps([d.model_dump(mode="json") for d in docs], ensure_ascii=False)


def _load(text: str) -> list[RetrievedDoc]:
    """Documents from stored JSON; ValueError if it is not a list of documents."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError(f"expected a JSON list, got {type(data).__name__}")
    try:
        return [RetrievedDoc.model_validate(item) for item in data]
    except ValidationError as exc:
        raise ValueError(str(exc)) from None


class _KeyLocks:
    """One lock per key, created on demand and dropped when nobody holds or waits on it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Key, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: Key) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (None, 0))
            if lock is None:
                lock = threading.Lock()
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                _, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


def _setup(conn: sqlite3.Connection) -> None:
    """Switch to WAL and create the table, retrying while another process does the same.

    SQLite does not always call the busy handler for a journal-mode change, so several
    processes opening a new file at once can see "database is locked"; retry until the
    busy timeout has passed.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(_SCHEMA)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class RetrievalCache:
    """Search results stored by (source, exact query, k, params) in one SQLite file.

    Thread-safe (share one instance across threads) and process-safe (open the same path in
    each process). Use as a context manager, or call `close()`.
    """

    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) the cache database at `path`."""
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._key_locks = _KeyLocks()
        self._hits = 0
        self._misses = 0
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _setup(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            from branchpoint.dbfiles import CACHE_HINT, damaged

            raise damaged(self.path, "retrieval cache", exc, CACHE_HINT) from None
        except sqlite3.Error:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    def __repr__(self) -> str:
        return f"RetrievalCache({str(self.path)!r})"

    def __enter__(self) -> RetrievalCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise RuntimeError."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _db(self) -> sqlite3.Connection:
        """The open connection; call with `self._lock` held."""
        if self._conn is None:
            raise RuntimeError(f"retrieval cache {self.path} is closed")
        return self._conn

    def _read(self, key: Key) -> list[RetrievedDoc] | None:
        """The stored documents for `key`, or None if absent or damaged (dropped); lock held."""
        row = self._db().execute(f"SELECT result FROM retrieval_cache WHERE {_KEY}", key).fetchone()
        if row is None:
            return None
        try:
            return _load(row[0])
        except ValueError as exc:
            log.warning(
                "retrieval cache %s: damaged entry for source %r, query %r, k=%d (treated as a miss and rewritten): %s",
                self.path,
                key[0],
                key[1],
                key[2],
                exc,
            )
            # Only drop the row we read, not a good one another process wrote since.
            self._db().execute(f"DELETE FROM retrieval_cache WHERE {_KEY} AND result = ?", (*key, row[0]))
            return None

    def get(self, source: str, query: str, k: int, params: str = "") -> list[RetrievedDoc] | None:
        """Stored documents (new objects each call, same order and values), or None on a miss."""
        key: Key = (source, query, int(k), params)
        with self._lock:
            docs = self._read(key)
            if docs is None:
                self._misses += 1
            else:
                self._hits += 1
            return docs

    def put(
        self, source: str, query: str, k: int, params: str, docs: list[RetrievedDoc], *, replace: bool = False
    ) -> list[RetrievedDoc]:
        """Store `docs` under the key unless a result is already there; return what is stored.

        First writer wins, so concurrent writers of one key all end up returning the same
        documents. `replace=True` overwrites instead.
        """
        key: Key = (source, query, int(k), params)
        payload = _dump(docs)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self._lock:
            self._db().execute(
                f"{verb} INTO retrieval_cache (source, query, k, params, result, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (*key, payload, created),
            )
            stored = self._read(key)
            if stored is None:  # a damaged row was in the way and has just been dropped
                self._db().execute(
                    "INSERT OR IGNORE INTO retrieval_cache "
                    "(source, query, k, params, result, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (*key, payload, created),
                )
                stored = self._read(key)
            return stored if stored is not None else _load(payload)

    def fetch(
        self, source: str, query: str, k: int, params: str, search: Callable[[], list[RetrievedDoc]]
    ) -> tuple[list[RetrievedDoc], bool]:
        """(documents, hit): the stored result, else `search()` stored first-writer-wins.

        Calls for one key are serialised within this process, so `search` runs at most once
        per key here however many threads ask at the same time.
        """
        key: Key = (source, query, int(k), params)
        with self._key_locks.hold(key):
            docs = self.get(*key)
            if docs is not None:
                return docs, True
            return self.put(*key, search()), False

    def stats(self) -> CacheStats:
        """Entries in the file, and this instance's hits and misses."""
        with self._lock:
            (entries,) = self._db().execute("SELECT COUNT(*) FROM retrieval_cache").fetchone()
            return CacheStats(entries=entries, hits=self._hits, misses=self._misses)

    def clear(self) -> None:
        """Delete every stored result (all sources) and reset this instance's counters."""
        with self._lock:
            self._db().execute("DELETE FROM retrieval_cache")
            self._hits = self._misses = 0


def source_params(source: Any) -> str:
    """A fingerprint of what, besides the query and k, decides a source's results; "" if unknown.

    A source's own `cache_params` string wins; a `DenseSource` (anything holding
    `index.manifest`) gives its index kind, corpus fingerprint, encoder name and dimension;
    a `CachedSource` is unwrapped.
    """
    own = getattr(source, "cache_params", None)
    if isinstance(own, str):
        return own
    if isinstance(source, CachedSource):
        return source_params(source.inner)
    manifest = getattr(getattr(source, "index", None), "manifest", None)
    if manifest is None:
        return ""
    parts = {
        "kind": getattr(manifest, "kind", None),
        "corpus": getattr(manifest, "corpus_fingerprint", None),
        "encoder": getattr(manifest, "encoder", None),
        "dim": getattr(manifest, "dim", None),
    }
    return ";".join(f"{name}={value}" for name, value in parts.items() if value is not None)


class CachedSource:
    """A RetrievalSource that answers from a RetrievalCache, searching `inner` only on a miss.

    Same `name` as `inner`. `last_cache_hit` is True / False after each `search` (None before
    the first, or after one that raised), kept per thread, so a tool that reads it right after
    its own call sees its own outcome even when threads share this source.
    """

    def __init__(self, inner: RetrievalSource, cache: RetrievalCache, params: str | None = None) -> None:
        """Wrap `inner`; `params` defaults to `source_params(inner)` ("" for none)."""
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.params = source_params(inner) if params is None else params
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"CachedSource({self.inner!r}, {self.cache!r}, params={self.params!r})"

    @property
    def last_cache_hit(self) -> bool | None:
        """Whether this thread's latest `search` was served from the cache."""
        return getattr(self._local, "hit", None)

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """The cached documents for (name, query, k, params), else the inner source's, stored."""
        self._local.hit = None
        docs, hit = self.cache.fetch(self.name, query, k, self.params, lambda: self.inner.search(query, k))
        self._local.hit = hit
        return docs
