"""A full disk said as such: `no space left on DEVICE (path)`, never a traceback or "damaged".

A write that meets ENOSPC (or a quota, EDQUOT), and SQLite's "database or disk is full", become
a `NoSpaceError` that names the device (the mount's source and mount point, from
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


def is_no_space(exc: BaseException) -> bool:
    """True for a write refused because the disk is full: ENOSPC / EDQUOT, or SQLite's SQLITE_FULL."""
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return True
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        return code == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return False


@contextmanager
def reporting_no_space(path: str | Path) -> Iterator[None]:
    """Turn a disk-full error raised in the block into `no_space` (the file it names, else `path`)."""
    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:
        if not is_no_space(exc):
            raise
        raise no_space(getattr(exc, "filename", None) or path) from None
