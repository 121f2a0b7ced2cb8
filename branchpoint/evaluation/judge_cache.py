"""A persistent cache of judge outputs, so re-evaluating a run costs no model call.

One SQLite file (default `RUN_DIR/judge_cache.sqlite`, or beside the trace file), one row per
judgment, keyed by a hash of (prompt version, judge model name, the exact inputs shown to the
judge). Changing a prompt means a new prompt version, hence new keys: old rows are never reused
for a different prompt. Only parsed labels are stored, with the judge's raw reply and, for a
reasoning model, its reasoning text (a `reasoning` column, added to older caches when opened);
an unparseable output is asked again on the next evaluation.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY,
    prompt_version TEXT NOT NULL,
    model TEXT NOT NULL,
    label TEXT NOT NULL,
    raw TEXT,
    created_at REAL NOT NULL,
    reasoning TEXT
)
"""


def judgment_key(prompt_version: str, model: str, inputs: dict[str, Any]) -> str:
    """sha256 of (prompt version, model name, inputs as sorted JSON)."""
    payload = json.dumps([prompt_version, model, inputs], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgeCache:
    """Get and put (label, raw) by key; `path=None` keeps the cache in memory (tests, dry runs).

    An existing file is checked now (a damaged one is refused before anything runs); the file is
    made, and opened, on the first get or put, so a command that refuses its input afterwards
    leaves no cache behind.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            from branchpoint.dbfiles import CACHE_HINT, probe

            probe(self.path, "judge cache", CACHE_HINT, ("judgments",))
        else:
            self._connect()

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(self.path) if self.path is not None else ":memory:")
        try:
            if self.path is not None:
                db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(judgments)")}
            if "reasoning" not in columns:  # a cache written before reasoning texts were kept
                db.execute("ALTER TABLE judgments ADD COLUMN reasoning TEXT")
            db.commit()
            db.execute("SELECT COUNT(*) FROM judgments").fetchone()
        except sqlite3.DatabaseError as exc:  # not a database, or pages SQLite cannot read
            db.close()
            from branchpoint.dbfiles import CACHE_HINT, damaged

            raise damaged(self.path or ":memory:", "judge cache", exc, CACHE_HINT) from None
        self._db = db
        return db

    def get(self, key: str) -> tuple[str, str | None] | None:
        """(label, raw reply) by key, None when not cached."""
        entry = self.get_entry(key)
        return entry[:2] if entry else None

    def get_entry(self, key: str) -> tuple[str, str | None, str | None] | None:
        """(label, raw reply, reasoning text) by key, None when not cached."""
        row = self._connect().execute("SELECT label, raw, reasoning FROM judgments WHERE key = ?", (key,)).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def put(
        self, key: str, prompt_version: str, model: str, label: str, raw: str | None, reasoning: str | None = None
    ) -> None:
        """Store a judgment's label, the judge's raw reply and its reasoning text (if any)."""
        db = self._connect()
        db.execute(
            "INSERT OR REPLACE INTO judgments (key, prompt_version, model, label, raw, created_at, reasoning) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, prompt_version, model, label, raw, time.time(), reasoning),
        )
        db.commit()

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM judgments").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
