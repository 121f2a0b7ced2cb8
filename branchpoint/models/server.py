"""A model server run as a child process: start it, wait until `/v1/models` answers, stop it.

`ManagedServer` holds what every server we launch shares (the embedded llama.cpp server,
`vllm serve`, the retrieval server, the simulator): its own process group and session (so
Ctrl-C in a terminal reaches us, not it, and stopping it stops its workers too), a parent-death
signal (it dies with us however we die, SIGKILL included: `branchpoint.processes`), a log file,
a health wait that gives up early with the log tail when the process dies, and a stop that sends
SIGTERM to the group, then SIGKILL after a grace period. Subclasses say how to check the install
and build the command.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

import httpx

from branchpoint.errors import ModelServerError
from branchpoint.processes import pdeathsig_preexec

#: Bind addresses that mean "every interface": a client on this machine connects to loopback.
ALL_INTERFACES = ("0.0.0.0", "::", "")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """True when a server could bind `host`:`port` now (SO_REUSEADDR, as servers bind)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def url_host(host: str) -> str:
    """The host to put in a URL for a server bound to `host` (loopback for 0.0.0.0, IPv6 bracketed)."""
    if host in ALL_INTERFACES:
        host = "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ManagedServer:
    """An OpenAI-compatible server child process; subclasses define `command()`.

    `with Server(...) as s: s.base_url` starts it, blocks until `GET /v1/models` answers 200,
    and stops it on exit (also at interpreter exit, should the owner forget).
    """

    #: Name used in messages ("llama.cpp server", "vLLM server").
    label = "model server"
    #: Prefix of the temporary log file when no log path is given.
    log_prefix = "branchpoint-server-"
    #: Seconds between health polls.
    poll_s = 0.25
    #: Seconds between SIGTERM and SIGKILL when stopping.
    stop_grace_s = 10.0
    #: Path (after the base URL's host and port) that answers 200 once the server is ready.
    health_path = "/v1/models"
    #: What the kernel sends the server when this process dies without stopping it (SIGTERM,
    #: SIGKILL): SIGKILL, which nothing can ignore. A server that must stop its own workers may
    #: ask for SIGTERM instead.
    parent_death_signal = signal.SIGKILL

    def __init__(self, host: str, port: int | None, startup_timeout_s: float, log_path: Path | None = None) -> None:
        self.host = host
        self.requested_port = port
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # --- what subclasses provide ---------------------------------------------------------------

    def check_installed(self) -> None:
        """Raise `ModelServerError` saying how to install the server when it is missing."""

    def prepare(self) -> None:
        """Resolve files the command needs (called after the install check, before the port)."""

    def command(self) -> list[str]:
        """The command line that starts the server on `self.host`:`self.port`."""
        raise NotImplementedError

    # --- the process ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`http://127.0.0.1:PORT/v1`)."""
        if self.port is None:
            raise ModelServerError(f"{self.label} is not started")
        return f"http://{url_host(self.host)}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (also its process-group id)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> str:
        """Start the server and block until it answers `/v1/models`; returns the base URL."""
        self.check_installed()
        self.prepare()
        bind_host = "0.0.0.0" if self.host in ALL_INTERFACES else self.host
        if self.requested_port and not port_is_free(bind_host, self.requested_port):
            # Else the health check could find whatever already listens there and call it ours.
            raise ModelServerError(
                f"{self.label}: port {self.requested_port} on {self.host} is already in use "
                "(another server running?): choose another port"
            )
        self.port = self.requested_port or free_port(bind_host)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=self.log_prefix, suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        # Appended, never truncated: a fork or rerun starts its own server and keeps the log of
        # the run's earlier ones (each start is marked).
        with self.log_path.open("ab") as log:
            started = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"\n=== branchpoint: {self.label} started {started} (pid of parent {os.getpid()}) ===\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=pdeathsig_preexec(self.parent_death_signal),  # dies with us, even by SIGKILL
            )
        atexit.register(self.stop)
        self._wait_healthy()
        return self.base_url

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the server's log ("" when there is none)."""
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"http://{url_host(self.host)}:{self.port}{self.health_path}"
        # One client for every poll; plain HTTP needs no TLS context (slow to build).
        with httpx.Client(timeout=2.0, verify=False) as http:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    code = self._proc.returncode
                    self._proc = None
                    raise ModelServerError(
                        f"{self.label} exited with code {code} before it was ready "
                        f"(log {self.log_path}):\n{self.log_tail()}"
                    )
                try:
                    if http.get(url).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(self.poll_s)
        self.stop()
        raise ModelServerError(
            f"{self.label} did not answer {url} within {self.startup_timeout_s:.0f} s "
            f"(log {self.log_path}):\n{self.log_tail()}"
        )

    def wait(self) -> int:
        """Block until the server exits on its own; returns its exit code."""
        if self._proc is None:
            raise ModelServerError(f"{self.label} is not started")
        return self._proc.wait()

    def stop(self) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL after the grace period); idempotent.

        The whole group is signalled and waited for, so workers the server spawned (vLLM's
        tensor-parallel processes) do not outlive it.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return
        running = proc.poll() is None  # poll() first: it reaps an exited leader
        if not running and not _group_alive(proc.pid):
            return
        deadline = time.monotonic() + self.stop_grace_s
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=self.stop_grace_s)
        except subprocess.TimeoutExpired:
            pass
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None or _group_alive(proc.pid):
            _signal_group(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
