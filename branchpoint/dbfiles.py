"""The SQLite files of a run folder, checked before use: a damaged one is one clear line.

`checkpoints.sqlite` holds the saved agent states (nothing can rebuild them); the retrieval and
judge caches only save work (delete them and they are rebuilt). `probe` reads an existing file
without writing it (no tables are made, and the last connection to close removes SQLite's `-wal`
and `-shm` side files), so a command can refuse a damaged database before its first write.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from branchpoint.diskspace import is_no_space, no_space
from branchpoint.errors import BranchpointError, DamagedFileError, InputError
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    JUDGE_CACHE_FILE,
    JUDGED_FILE,
    METRICS_FILE,
    QUARANTINE_FILE,
    RETRIEVAL_CACHE_FILE,
    RUN_TRACE_FILES,
    SPEC_FILE,
)

CHECKPOINTS_HINT = (
    "checkpoints cannot be rebuilt: restore the file from a backup, or start afresh in a new --out "
    "folder (`branchpoint runs verify RUN_DIR` lists what is affected)"
)
CACHE_HINT = "it is only a cache and can be rebuilt: delete it (with its -wal and -shm files) and run again"
#: Files up to this size get SQLite's `quick_check` (every page read); larger ones only their schema.
FULL_CHECK_MAX_BYTES = 64 * 1024 * 1024


def damaged(path: str | Path, what: str, exc: BaseException, hint: str) -> BranchpointError:
    """The error for a database SQLite cannot read: the file, what it is, SQLite's reason, what to
    do; or, when the reason is a full disk, `diskspace.no_space` (nothing is damaged then)."""
    if is_no_space(exc, path):
        return no_space(path)
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


def has_rows(path: str | Path, table: str, what: str, hint: str) -> bool | None:
    """Whether an SQLite file's `table` holds a row: None when the file is absent, False when it
    is empty (0 bytes) or has no such table or no row. Reads only (no table is made); a file
    SQLite cannot read is `damaged` (the `what` of the run, and what to do: `hint`)."""
    path = Path(path)
    if not path.is_file():
        return None
    if path.stat().st_size == 0:
        return False
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True, timeout=30)
        try:
            query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            if conn.execute(query, (table,)).fetchone() is None:
                return False
            return conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise damaged(path, what, exc, hint) from None


#: The files of a run folder that commands open or replace by name.
RUN_FILES: tuple[str, ...] = (
    SPEC_FILE,
    *RUN_TRACE_FILES,
    CHECKPOINTS_FILE,
    RETRIEVAL_CACHE_FILE,
    JUDGE_CACHE_FILE,
    JUDGED_FILE,
    METRICS_FILE,
    QUARANTINE_FILE,
)


def check_run_files(run_dir: str | Path, names: tuple[str, ...] = RUN_FILES) -> None:
    """InputError naming the first of a run folder's files (`names`) that exists but is not a
    regular file (a directory at `checkpoints.sqlite`, say): refused before anything is written."""
    for name in names:
        path = Path(run_dir) / name
        if path.exists() and not path.is_file():
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise InputError(f"{path}: {kind}, where the run keeps its {name} file (move it away, then run again)")
