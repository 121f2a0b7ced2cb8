"""The viewer's local server: one page and a small JSON API over a run's index, on 127.0.0.1.

Routes: `/` (the page), `/static/viewer.js` and `/static/viewer.css`, and under `/api/`:
`runs` (every run shown), `run` (folder, judge, weights, headline metrics and value scores),
`rows?since=N&limit=M` (table rows from position N, at most M, with indexing progress and
unreadable lines; lines a running run appended since the last call are read first),
`execution/{id}` (one execution's timeline, each model step with its request and reply) and
`tree/{id}` (its saved states and their branches); each takes `run=K` (default 0) when several
runs are shown. It binds the
loopback interface only: a run's traces hold questions, answers and passages. And since a page
of any site can make the browser ask 127.0.0.1, it answers only requests whose `Host` is a
loopback name (DNS rebinding is refused) and, unless started without one, that carry its
per-start token (`?token=` in the URL it prints, then a cookie; see `branchpoint.loopback`).
"""

from __future__ import annotations

import errno
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from branchpoint.errors import BranchpointError, InputError
from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.evaluation.viewer.views import execution_view, json_safe, state_forecasts, tree_view
from branchpoint.loopback import LOOPBACK_NAMES, HostCheck, TokenCheck, new_token

STATIC = Path(__file__).with_name("static")
HOST = "127.0.0.1"
_MEDIA = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


def page_html(mode: str, data_prefix: str = "") -> str:
    """The page template with its mode filled in: `server` (it asks /api/…) or `static` (it loads
    data/*.js files an export wrote beside it)."""
    config = json.dumps({"mode": mode, "data": data_prefix})
    return (STATIC / "index.html").read_text(encoding="utf-8").replace("{{CONFIG}}", config)


class ViewerState:
    """The runs the API answers from (the first, `index`, and any `more` shown beside it), their
    forecasts (forecasts files are read on first use)."""

    def __init__(
        self,
        index: RunIndex,
        extra_forecasts: list[Path] | None = None,
        *,
        more: list[RunIndex] | None = None,
    ) -> None:
        for path in extra_forecasts or []:
            if not Path(path).is_file():
                raise InputError(f"--forecasts {path}: file not found (expected a forecasts .jsonl, as for `value`)")
        self.index = index
        self.runs: list[RunIndex] = [index, *(more or [])]
        self.extra = extra_forecasts or []
        self._forecasts: dict[int, tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]] = {}

    def forecasts(self, run: int = 0) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]:
        if run not in self._forecasts:
            self._forecasts[run] = state_forecasts(self.runs[run], self.extra)
        return self._forecasts[run]

    def start(self) -> ViewerState:
        """Start every run's index in the background."""
        for index in self.runs:
            if index._thread is None and not index.progress.done:
                index.start()
        return self


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(json_safe(data), status_code=status, headers={"Cache-Control": "no-store"})


def create_app(state: ViewerState, *, token: str | None = None) -> Starlette:
    """The Starlette app of one run: loopback `Host` names only, and with `token`, only requests
    that carry it (see the module docstring)."""

    def pick(request: Request) -> tuple[int, RunIndex]:
        """The run a request names (`?run=K`, default 0); ValueError when there is none such."""
        raw = request.query_params.get("run", "0")
        if not raw.isdigit() or int(raw) >= len(state.runs):
            raise ValueError(f"run: expected 0 to {len(state.runs) - 1}")
        return int(raw), state.runs[int(raw)]

    async def home(request: Request) -> Response:
        return HTMLResponse(page_html("server"))

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        path = STATIC / name
        if name not in ("viewer.js", "viewer.css") or not path.is_file():
            return Response("not found", status_code=404)
        return Response(path.read_bytes(), media_type=_MEDIA[path.suffix])

    def summary(k: int) -> dict[str, Any]:
        out = state.runs[k].summary()
        out["forecast_problems"] = state.forecasts(k)[1]
        out["run"] = k
        return out

    async def run(request: Request) -> Response:
        try:
            k, _ = pick(request)
        except ValueError as exc:
            return _json({"error": str(exc)}, 400)
        return _json({**summary(k), "runs": len(state.runs)})

    async def runs(request: Request) -> Response:
        return _json({"runs": [summary(k) for k in range(len(state.runs))]})

    async def rows(request: Request) -> Response:
        try:
            _, index = pick(request)
            since = max(0, int(request.query_params.get("since", "0")))
            limit = request.query_params.get("limit")
            size = None if limit is None else max(1, int(limit))
        except ValueError as exc:
            return _json({"error": f"{exc}" if "run" in str(exc) else "since, limit: expected whole numbers"}, 400)
        index.refresh()  # a running run: the lines written since the last look
        return _json(index.rows(since, size))

    async def execution(request: Request) -> Response:
        try:
            _, index = pick(request)
        except ValueError as exc:
            return _json({"error": str(exc)}, 400)
        try:
            return _json(execution_view(index, request.path_params["id"]))
        except KeyError:
            return _json({"error": f"no execution {request.path_params['id']} in {index.run_dir}"}, 404)

    async def tree(request: Request) -> Response:
        try:
            k, index = pick(request)
        except ValueError as exc:
            return _json({"error": str(exc)}, 400)
        try:
            return _json(tree_view(index, request.path_params["id"], state.forecasts(k)[0]))
        except KeyError:
            return _json({"error": f"no execution {request.path_params['id']} in {index.run_dir}"}, 404)

    return Starlette(
        routes=[
            Route("/", home),
            Route("/index.html", home),
            Route("/static/{name}", static),
            Route("/api/run", run),
            Route("/api/runs", runs),
            Route("/api/rows", rows),
            Route("/api/execution/{id}", execution),
            Route("/api/tree/{id}", tree),
        ],
        middleware=[
            Middleware(HostCheck, allowed=LOOPBACK_NAMES),
            *([Middleware(TokenCheck, token=token)] if token else []),
        ],
    )


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
