"""Child processes that die with their parent, however the parent dies.

A server we start (llama.cpp, `vllm serve`, the retrieval server, the simulator) runs in its own
session so that Ctrl-C in a terminal reaches us, not it; a clean exit of ours stops it
(`ManagedServer.stop`). SIGTERM's default action and SIGKILL run no Python code, so on Linux the
child also asks the kernel for a signal when its parent dies (`prctl(PR_SET_PDEATHSIG)`), set in
the child between fork and exec. The kernel sends it when the *thread* that started the child
exits, so start children from a thread that lives as long as they should (the main thread,
as every command does).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(sig: int = signal.SIGKILL, parent_pid: int | None = None) -> bool:
    """In a child: receive `sig` when the parent dies; if it already died, exit now.

    Returns False where the platform has no parent-death signal (the child then outlives a
    parent killed by SIGKILL).
    """
    prctl = _prctl()
    if prctl is None:
        return False
    prctl(PR_SET_PDEATHSIG, int(sig))
    if parent_pid is not None and os.getppid() != parent_pid:  # the parent died before prctl
        os._exit(1)
    return True


def pdeathsig_preexec(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` for `subprocess.Popen` that makes the child die with this process.

    Everything it needs is looked up now, in the parent, so the child between fork and exec
    only makes two system calls (no imports, no locks). None where unsupported.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()
    signum = int(sig)
    getppid, exit_now = os.getppid, os._exit

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signum)
        if getppid() != parent:
            exit_now(1)

    return preexec
