"""A full disk said as such: `no space left on DEVICE (path)`, never a traceback or "damaged".

A write that meets ENOSPC (or a quota, EDQUOT), SQLite's "database or disk is full", and its
"disk I/O error" on a file system with no space left, become a `NoSpaceError` that names the device (the mount's source and mount point, from
/proc/self/mountinfo) and the file being written; the run store cuts a failed append back first,
so what was recorded before stays intact and a rerun after freeing space does the rest.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from branchpoint.errors import NoSpaceError

#: The errno values that mean "the file system has no room for this write".
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
MOUNTINFO = Path("/proc/self/mountinfo")


def _existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (the file being written may not yet)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def device_of(path: str | Path, mountinfo: Path = MOUNTINFO) -> str:
    """The device a path lives on, as `SOURCE at MOUNT POINT` (e.g. `/dev/vda1 at /work`, `tmpfs
    at /tmp/x`); the mount point alone where the mount table cannot be read."""
    real = _existing(Path(path).absolute()).resolve()
    try:
        dev = os.stat(real).st_dev
    except OSError:
        return str(real)
    wanted = f"{os.major(dev)}:{os.minor(dev)}"
    best: tuple[int, str] | None = None
    try:
        lines = mountinfo.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or fields[2] != wanted or "-" not in fields[6:]:
            continue
        mount = fields[4].replace("\\040", " ")
        source = fields[fields.index("-", 6) + 2]
        if (str(real) + "/").startswith(mount.rstrip("/") + "/") and (best is None or len(mount) > best[0]):
            best = (len(mount), f"{source} at {mount}")
    return best[1] if best else f"the file system of {real}"


def no_space(path: str | Path) -> NoSpaceError:
    """The error for a write to `path` that found the disk full."""
    return NoSpaceError(
        f"no space left on {device_of(path)} ({path}): free some space, then run the same command again "
        "(what was recorded before is intact)"
    )


#: Free bytes below which a file system counts as full (SQLite's "disk I/O error" there is one).
NEARLY_FULL_BYTES = 256 * 1024


def free_bytes(path: str | Path) -> int | None:
    """Bytes an unprivileged writer may still use on the file system of `path` (None: unknown)."""
    try:
        st = os.statvfs(_existing(Path(path).absolute()))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def is_no_space(exc: BaseException, path: str | Path | None = None) -> bool:
    """True for a write refused because the disk is full: ENOSPC / EDQUOT, SQLite's SQLITE_FULL,
    or, given the `path` written, SQLite's "disk I/O error" (growing its -shm or -wal file on a
    full tmpfs fails so) while that file system has (almost) no free space left."""
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return True
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL or "disk is full" in str(exc):
            return True
        io_error = (code is not None and code & 0xFF == sqlite3.SQLITE_IOERR) or "disk I/O error" in str(exc)
        if io_error and path is not None:
            free = free_bytes(path)
            return free is not None and free < NEARLY_FULL_BYTES
    return False


@contextmanager
def reporting_no_space(path: str | Path) -> Iterator[None]:
    """Turn a disk-full error raised in the block into `no_space` (the file it names, else `path`)."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if not is_no_space(exc, getattr(exc, "filename", None) or path):
            raise
        raise no_space(getattr(exc, "filename", None) or path) from None
