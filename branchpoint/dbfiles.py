"""The SQLite files of a run folder, checked before use: a damaged one is one clear line.

`checkpoints.sqlite` holds the saved agent states (nothing can rebuild them); the retrieval and
judge caches only save work (delete them and they are rebuilt). `probe` reads an existing file
without writing it (no tables are made, and the last connection to close removes SQLite's `-wal`
and `-shm` side files), so a command can refuse a damaged database before its first write.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from branchpoint.errors import DamagedFileError

CHECKPOINTS_HINT = (
    "checkpoints cannot be rebuilt: restore the file from a backup, or start afresh in a new --out "
    "folder (`branchpoint runs verify RUN_DIR` lists what is affected)"
)
CACHE_HINT = "it is only a cache and can be rebuilt: delete it (with its -wal and -shm files) and run again"
#: Files up to this size get SQLite's `quick_check` (every page read); larger ones only their schema.
FULL_CHECK_MAX_BYTES = 64 * 1024 * 1024


def damaged(path: str | Path, what: str, exc: BaseException, hint: str) -> DamagedFileError:
    """The error for a database SQLite cannot read: the file, what it is, SQLite's reason, what to do."""
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DamagedFileError(f"{path}: the {what} is damaged ({reason}); {hint}")


def probe(path: str | Path, what: str, hint: str, tables: tuple[str, ...] = ()) -> None:
    """Raise DamagedFileError when an existing SQLite file cannot be read (absent: nothing to check).

    Reads the schema (a file that is not a database fails here), checks that `tables` exist when
    the schema is not empty, and on files up to FULL_CHECK_MAX_BYTES runs `PRAGMA quick_check`.
    """
    path = Path(path)
    if not path.is_file():
        return
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise damaged(path, what, exc, hint) from None
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in tables if t not in names]
        if names and missing:
            raise sqlite3.DatabaseError(f"no {missing[0]} table: not a {what}")
        if path.stat().st_size <= FULL_CHECK_MAX_BYTES:
            result = conn.execute("PRAGMA quick_check(1)").fetchone()
            if result and result[0] != "ok":
                raise sqlite3.DatabaseError(str(result[0]))
    except sqlite3.Error as exc:
        raise damaged(path, what, exc, hint) from None
    finally:
        conn.close()
