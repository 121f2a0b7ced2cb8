"""A persistent cache of judge outputs, so re-evaluating a run costs no model call.

One SQLite file (default `RUN_DIR/judge_cache.sqlite`, or beside the trace file), one row per
judgment, keyed by a hash of (prompt version, judge model name, the exact inputs shown to the
judge). Changing a prompt means a new prompt version, hence new keys: old rows are never reused
for a different prompt. Only parsed labels are stored; an unparseable output is asked again on
the next evaluation.
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
    created_at REAL NOT NULL
)
"""


def judgment_key(prompt_version: str, model: str, inputs: dict[str, Any]) -> str:
    """sha256 of (prompt version, model name, inputs as sorted JSON)."""
    payload = json.dumps([prompt_version, model, inputs], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgeCache:
    """Get and put (label, raw) by key; `path=None` keeps the cache in memory (tests, dry runs)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path) if self.path is not None else ":memory:")
        try:
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
            self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()
        except sqlite3.DatabaseError as exc:  # not a database, or pages SQLite cannot read
            self._db.close()
            from branchpoint.dbfiles import CACHE_HINT, damaged

            raise damaged(self.path or ":memory:", "judge cache", exc, CACHE_HINT) from None

    def get(self, key: str) -> tuple[str, str | None] | None:
        row = self._db.execute("SELECT label, raw FROM judgments WHERE key = ?", (key,)).fetchone()
        return (row[0], row[1]) if row else None

    def put(self, key: str, prompt_version: str, model: str, label: str, raw: str | None) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO judgments VALUES (?, ?, ?, ?, ?, ?)",
            (key, prompt_version, model, label, raw, time.time()),
        )
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
