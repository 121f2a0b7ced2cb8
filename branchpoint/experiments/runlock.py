"""The run folder's lock: one writer per run folder.

Every command that writes a run folder (`run`, `fork`, `replay`, `runs repair`) holds
`run_lock(run_dir)`, an exclusive `flock` on `RUN_DIR/.lock` for the life of the process (the OS
releases it when the process dies, SIGKILL included). A second writer is refused with the
holder's pid and host. Processes that a holder starts (the local executor's workers, forked
with the lock's descriptor) run under its lock and write only their own shard folders.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from branchpoint.errors import InputError

LOCK_FILE = ".lock"
#: How often a writer starts over when a releasing holder removes the folder under it.
_LOCK_ATTEMPTS = 100


class RunDirBusyError(InputError):
    """Another process holds the run folder's lock (one writer per run folder)."""


class RunLock:
    """The exclusive lock of one run folder, held while this object is open (see `run_lock`).

    `committed` is set by the holder once it has written something: a folder that the lock
    itself created and that stayed uncommitted is removed again on release, so a command that
    fails before its first write leaves no trace.
    """

    def __init__(self, run_dir: Path, fd: int, created: list[Path], created_file: bool) -> None:
        self.run_dir = run_dir
        self.path = run_dir / LOCK_FILE
        self._fd: int | None = fd
        self._created = created
        self._created_file = created_file
        self.committed = False

    def release(self) -> None:
        """Empty the lock file (no holder) and unlock; undo what the lock created if nothing was written."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
            if not self.committed and self._created_file:
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # closing the descriptor releases the flock
        if not self.committed:
            _remove_empty(self._created)  # only those still empty


def lock_holder(run_dir: str | Path) -> str:
    """Who holds (or last held) a run folder's lock, as `pid N on host H`, from the lock file."""
    try:
        text = (Path(run_dir) / LOCK_FILE).read_text(encoding="utf-8").split()
    except OSError:
        text = []
    if len(text) >= 2 and text[0].isdigit():
        return f"pid {text[0]} on host {text[1]}"
    return "another process (pid unknown)"


def _missing_parents(path: Path) -> list[Path]:
    """The folders from the first missing ancestor of `path` down to `path`."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    return list(reversed(missing))


def acquire_run_lock(run_dir: str | Path, command: str = "run") -> RunLock:
    """Take the run folder's exclusive lock (creating the folder if needed); RunDirBusyError if
    another process holds it. Prefer the `run_lock` context manager.

    A holder that releases a folder it created and never wrote removes the folder (and its lock
    file) again: a writer that opened the lock file just then finds the file gone after its
    `flock`, or the folder gone before its `open`, and starts over (making the folder anew).
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a directory (expected a run folder, or a path where one can be made)")
    path = run_dir / LOCK_FILE
    created: list[Path] = []
    for _ in range(_LOCK_ATTEMPTS):
        created += [f for f in _missing_parents(run_dir) if f not in created]
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            created_file = not path.exists()
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # a releasing holder removed the folder between mkdir and open
            continue
        except OSError as exc:
            raise InputError(f"{run_dir}: cannot create or lock the run folder ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            _remove_empty(created)  # made just now for a writer that is not us
            raise RunDirBusyError(
                f"{run_dir}: in use by {lock_holder(run_dir)} (one writer per run folder: wait for it to "
                f"finish, or stop it, then run `{command}` again)"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            try:
                os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
            except OSError:  # a full disk: the flock holds all the same; only the holder's name is lost
                pass
            created.sort(key=lambda f: len(f.parts))
            return RunLock(run_dir, fd, created, created_file)
        os.close(fd)  # a releasing holder removed the file between our open and flock: again
    raise InputError(f"{run_dir}: could not lock the run folder (it was removed {_LOCK_ATTEMPTS} times meanwhile)")


def _remove_empty(created: list[Path]) -> None:
    """Remove the folders of `created` (top first) that are still empty, deepest first."""
    for folder in sorted(created, key=lambda f: len(f.parts), reverse=True):
        try:
            folder.rmdir()
        except OSError:
            break


@contextmanager
def run_lock(run_dir: str | Path, command: str = "run") -> Iterator[RunLock]:
    """Hold a run folder's exclusive lock for the block: one writer per run folder.

    `run`, `fork` and `replay` take it before their first write; a second process is refused
    (RunDirBusyError, exit code 2) naming the holder's pid and host. Set `lock.committed = True`
    once the folder holds something worth keeping; if the folder was created here and nothing
    was committed, it is removed again on exit.
    """
    lock = acquire_run_lock(run_dir, command)
    try:
        yield lock
    finally:
        lock.release()
