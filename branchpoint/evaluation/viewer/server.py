"""The viewer's local server: one page and a small JSON API over a run's index, on 127.0.0.1.

Routes: `/` (the page), `/static/viewer.js` and `/static/viewer.css` (`page`), and under `/api/`
(`api`): `runs` (every run shown), `run` (folder, judge, weights, headline metrics and value
scores), `rows?since=N&limit=M` (table rows from position N, at most M, with indexing progress
and unreadable lines; lines a running run appended since the last call are read first),
`execution/{id}` (one execution's timeline, each model step with its request and reply) and
`tree/{id}` (its saved states and their branches); each takes `run=K` (default 0) when several
runs are shown (`state.ViewerState`). `create_app` puts them together behind two guards. It binds
the loopback interface only: a run's traces hold questions, answers and passages. And since a
page of any site can make the browser ask 127.0.0.1, it answers only requests whose `Host` is a
loopback name (DNS rebinding is refused) and, unless started without one, that carry its
per-start token (`?token=` in the URL it prints, then a cookie; see `branchpoint.loopback`).
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from branchpoint.errors import BranchpointError
from branchpoint.evaluation.viewer import api, page
from branchpoint.evaluation.viewer.state import ViewerState
from branchpoint.loopback import LOOPBACK_NAMES, HostCheck, TokenCheck, new_token

HOST = "127.0.0.1"


def create_app(state: ViewerState, *, token: str | None = None) -> Starlette:
    """The Starlette app of `state`'s runs: the page and API routes (`page`, `api`) behind the
    guards, loopback `Host` names only and, with `token`, only requests that carry it (see the
    module docstring). The handlers find `state` as `app.state.viewer`."""
    app = Starlette(
        routes=[
            Route("/", page.home),
            Route("/index.html", page.home),
            Route("/static/{name}", page.static_file),
            Route("/api/run", api.run_summary),
            Route("/api/runs", api.run_list),
            Route("/api/rows", api.rows),
            Route("/api/execution/{id}", api.execution),
            Route("/api/tree/{id}", api.fork_tree),
        ],
        middleware=[
            Middleware(HostCheck, allowed=LOOPBACK_NAMES),
            *([Middleware(TokenCheck, token=token)] if token else []),
        ],
    )
    app.state.viewer = state
    return app


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:port (0: a free port); a clear error when it is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BranchpointError(
                f"port {port} on {HOST} is in use (another viewer or server?); pick another with --port, "
                "or --port 0 for a free one"
            ) from None
        raise BranchpointError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    return sock


def url_of(sock: socket.socket, token: str | None = None) -> str:
    """The page's URL on a bound socket, with `?token=` when the server has one."""
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}/" + (f"?token={token}" if token else "")


def make_server(state: ViewerState, log_level: str = "warning", token: str | None = None) -> Any:
    """A uvicorn server for the app (run it with `.run(sockets=[bind(port)])`)."""
    import uvicorn

    config = uvicorn.Config(create_app(state, token=token), lifespan="off", log_level=log_level, server_header=False)
    return uvicorn.Server(config)


@contextmanager
def running(state: ViewerState, port: int = 0, startup_timeout_s: float = 30.0, token: bool = True) -> Iterator[str]:
    """Serve in a background thread (tests, benchmarks, notebooks); yields the page's URL (with a
    new token in it, unless `token` is False)."""
    sock = bind(port)
    secret = new_token() if token else None
    server = make_server(state, token=secret)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="branchpoint-viewer")
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise BranchpointError(f"viewer on {url_of(sock)} did not start")
            time.sleep(0.01)
        yield url_of(sock, secret)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
