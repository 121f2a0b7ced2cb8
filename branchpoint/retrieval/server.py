"""A Search-R1-compatible HTTP retrieval server over a saved index (starlette on uvicorn).

What it serves: an index directory that `branchpoint index build` wrote (dense or bm25), or a
FlashRAG / Search-R1 faiss index file (`e5_Flat.index`) with its corpus jsonl as they are (row i
of the index is line i of the corpus; nothing is re-encoded), checked for row count and
dimension (`served_index.load_served_index`).

Protocol (the one Search-R1's `search_r1/search/retrieval_server.py` speaks, so its agents, and
any client written for it, can use our indexes):

    POST /retrieve  {"queries": ["...", ...], "topk": 3, "return_scores": true}
      -> {"result": [[{"document": {"id", "contents"}, "score": 0.71}, ...], ...]}
    POST /retrieve  {"queries": [...], "topk": 3}            (return_scores absent or false)
      -> {"result": [[{"id", "contents"}, ...], ...]}          (bare documents, as upstream)
    GET  /health    -> {"status": "ok", "passages", "encoder", "dim", "corpus_fingerprint", limits}

One result list per query, in request order, best first; `contents` is the corpus row's
`contents` exactly as given (FlashRAG's `"Title"\\ntext`, or an unquoted title line); rows of
the `{"id", "title", "text"}` shape are served with contents `"Title"\\ntext`. Dense scores
are inner products (cosine for unit vectors), bm25 scores BM25.

Batch sizes: Search-R1's own traffic is hundreds of queries per request (its
`retrieval_request.py` sends 400, its agent one per rollout), so a request may carry up to
`max_queries` (4096 by default, ten times that) queries and `max_results` (queries x topk,
50,000) passages; the server encodes and searches them `search_batch` (256) at a time, so
encoder and faiss memory stay bounded whatever the request size.

Where we differ from upstream, on purpose (upstream validates with pydantic's lax mode):
- `topk` absent or null means the server's default (3, like upstream's `--topk 3`); upstream also
  treats 0 as "default", we answer 400 for 0, negatives, non-integers and values over --max-topk.
- Bad requests get HTTP 4xx with `{"error": reason}`: 400 (malformed JSON, missing `queries`,
  wrong types, too many queries, topk out of range), 413 (body over --max-body-bytes),
  404 / 405 (unknown path or method); upstream answers 422 with pydantic's `detail` list.

Where we answer as upstream, though a stricter server might refuse: Search-R1's agent sends
`{"queries": []}` in every turn where no rollout searched (`generation.py`, `execute_predictions`
collects the queries of the rollouts that searched) and `""` for `<search></search>` (the tag's
body, stripped). Upstream answers both with 200: `[]` gives `{"result": []}` (its batch loop runs
no batch), and `""` is searched like any query (a dense index encodes the empty text, with the
encoder's query prefix, and returns its top-k; BM25 has no term to match and returns `[]` for it,
as pyserini finds no hit). So do we: a 400 there made Search-R1's client die with
`KeyError: 'result'`.
- Unknown request fields are ignored (as upstream).

Why starlette + uvicorn rather than the standard library's `ThreadingHTTPServer`: the stdlib
server is documented as not meant for production (HTTP/1.0 by default, an unbounded thread per
connection, minimal parsing checks), while this server may be bound to a cluster network and
hammered by many concurrent agents. uvicorn (h11) gives keep-alive, robust parsing and clean
shutdown; starlette is a thin routing layer (no FastAPI: we validate by hand so every error is one
readable reason). Both are small, well-kept, and what Search-R1's own server runs on.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from branchpoint.errors import BranchpointError, InputError
from branchpoint.loopback import LOOPBACK_NAMES, HostCheck
from branchpoint.models.server import ManagedServer, url_host
from branchpoint.retrieval._deps import require
from branchpoint.retrieval.corpus import Passage

log = logging.getLogger(__name__)

#: Passages per query when a request gives no `topk` (Search-R1 launches its server with --topk 3).
DEFAULT_TOPK = 3
#: Searches (encode + FAISS) running at once; other requests wait their turn. One: the encoder
#: and FAISS already use every core they are given, concurrent FAISS searches oversubscribe
#: OpenMP, and GPU indexes are not safe to search from several threads. Throughput comes from
#: batching: send many queries per request.
SEARCH_THREADS = 1


@dataclass(frozen=True)
class ServerLimits:
    """Bounds on one request: queries per request, passages per query, and body size."""

    max_queries: int = 4096
    max_topk: int = 50
    max_body_bytes: int = 16_000_000
    default_topk: int = DEFAULT_TOPK
    #: Most passages one request may ask for (queries x topk): bounds the response's memory.
    max_results: int = 50_000
    #: Queries encoded and searched at once inside a request (bounds encoder and faiss memory).
    search_batch: int = 256

    def __post_init__(self) -> None:
        for name in ("max_queries", "max_topk", "max_body_bytes", "default_topk", "max_results", "search_batch"):
            if getattr(self, name) < 1:
                raise InputError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.default_topk > self.max_topk:
            raise InputError(f"default_topk ({self.default_topk}) exceeds max_topk ({self.max_topk})")


class RequestError(Exception):
    """A request the server refuses: the HTTP status and a reason for the client."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class RetrieveRequest:
    """A validated `/retrieve` request."""

    queries: list[str]
    topk: int
    return_scores: bool


def parse_retrieve_request(body: bytes, limits: ServerLimits) -> RetrieveRequest:
    """Validate a `/retrieve` body; RequestError(400, reason) names the first problem found."""
    try:
        payload = json.loads(body.decode("utf-8"))  # RFC 8259: JSON between systems is UTF-8
    except UnicodeDecodeError:
        raise RequestError(400, "request body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RequestError(
            400,
            f"request body is not valid JSON ({exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno})",
        ) from None
    except RecursionError:  # e.g. [[[[...]]]] nested deeper than the parser's stack
        raise RequestError(400, "request body is nested too deeply to parse (expected a flat JSON object)") from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise RequestError(400, f"request body is not valid JSON ({str(exc).splitlines()[0]})") from None
    expected = '(expected {"queries": [str, ...], "topk": int, "return_scores": bool})'
    if not isinstance(payload, dict):
        raise RequestError(400, f"request body must be a JSON object, got {_json_type(payload)} {expected}")
    if "queries" not in payload:
        raise RequestError(400, f'field "queries" missing {expected}')
    queries = payload["queries"]
    if not isinstance(queries, list):
        raise RequestError(400, f'field "queries" must be a list of strings, got {_json_type(queries)}')
    if len(queries) > limits.max_queries:
        raise RequestError(
            400,
            f'field "queries" has {len(queries)} queries, more than the limit of '
            f"{limits.max_queries} per request (--max-queries); split the batch",
        )
    for i, query in enumerate(queries):
        if not isinstance(query, str):
            raise RequestError(400, f'field "queries[{i}]" must be a string, got {_json_type(query)}')
    topk = payload.get("topk")
    if topk is None:
        topk = limits.default_topk
    elif isinstance(topk, bool) or not isinstance(topk, int):
        raise RequestError(400, f'field "topk" must be an integer, got {_json_type(topk)}')
    elif topk < 1:
        raise RequestError(400, f'field "topk" must be at least 1, got {topk}')
    elif topk > limits.max_topk:
        raise RequestError(400, f'field "topk" is {topk}, more than the limit of {limits.max_topk} (--max-topk)')
    if len(queries) * topk > limits.max_results:
        raise RequestError(
            400,
            f"{len(queries)} queries x topk {topk} = {len(queries) * topk} passages, "
            f"more than the limit of {limits.max_results} per request (--max-results); "
            "split the batch",
        )
    return_scores = payload.get("return_scores", False)
    if return_scores is None:
        return_scores = False
    if not isinstance(return_scores, bool):
        raise RequestError(400, f'field "return_scores" must be true or false, got {_json_type(return_scores)}')
    return RetrieveRequest(queries=queries, topk=topk, return_scores=return_scores)


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


class RetrievalService:
    """The server's work without HTTP: validated requests in, Search-R1 result lists out."""

    def __init__(self, index: Any, limits: ServerLimits | None = None) -> None:
        """`index`: a DenseIndex or BM25Index (anything with `search(queries, k)` and `manifest`)."""
        self.index = index
        self.limits = limits or ServerLimits()

    def retrieve(self, request: RetrieveRequest) -> dict[str, Any]:
        """Search the queries `search_batch` at a time; documents as the corpus gives them, scored or bare.
        No queries, no search: `{"result": []}` (as upstream); an empty query is searched as given."""
        step = self.limits.search_batch
        hits = []
        for start in range(0, len(request.queries), step):
            hits.extend(self.index.search(request.queries[start : start + step], request.topk))
        result: list[list[dict[str, Any]]] = []
        for per_query in hits:
            docs = [(served_document(p), score) for p, score in per_query]
            if request.return_scores:
                result.append([{"document": doc, "score": score} for doc, score in docs])
            else:
                result.append([doc for doc, _ in docs])
        return {"result": result}

    def health(self) -> dict[str, Any]:
        """What is being served, and the request limits."""
        manifest = self.index.manifest
        return {
            "status": "ok",
            "passages": len(self.index),
            "kind": manifest.kind,
            "encoder": manifest.encoder,
            "dim": manifest.dim,
            "corpus_fingerprint": manifest.corpus_fingerprint,
            "limits": asdict(self.limits),
        }


def served_document(passage: Passage) -> dict[str, Any]:
    """A passage as Search-R1 clients read it: `{"id", "contents"}`, contents as the corpus gave
    them (rows of the `{"id", "title", "text"}` shape: `"Title"\\ntext`)."""
    return {"id": passage.doc_id, "contents": passage.contents}


def create_app(service: RetrievalService, *, allowed_hosts: Collection[str] = LOOPBACK_NAMES) -> Any:
    """The starlette application: `POST /retrieve`, `GET /health`, JSON errors everywhere; only
    requests whose `Host` is one of `allowed_hosts` (the loopback names by default; see
    `allowed_hosts_for`) are answered, others get 403 (a page doing DNS rebinding)."""
    require("starlette", "starlette", "the retrieval server")
    import anyio
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    limiter = anyio.CapacityLimiter(SEARCH_THREADS)
    limits = service.limits

    def error(status: int, reason: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": reason}, status_code=status, headers=dict(headers or {}) or None)

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                raise RequestError(400, f"Content-Length header is not a number: {declared!r}") from None
            if size > limits.max_body_bytes:
                raise RequestError(
                    413,
                    f"request body of {size} bytes exceeds the limit of "
                    f"{limits.max_body_bytes} bytes (--max-body-bytes)",
                )
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise RequestError(
                    413, f"request body exceeds the limit of {limits.max_body_bytes} bytes (--max-body-bytes)"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    async def retrieve(request: Request) -> JSONResponse:
        try:
            parsed = parse_retrieve_request(await read_body(request), limits)
        except RequestError as exc:
            # Closing the connection after a refusal keeps an unread body from desynchronising it.
            return error(exc.status, exc.reason, headers={"Connection": "close"})
        result = await anyio.to_thread.run_sync(service.retrieve, parsed, limiter=limiter)
        return JSONResponse(result)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(service.health())

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        reason = exc.detail
        if exc.status_code == 404:
            reason = f"no such endpoint: {request.url.path} (endpoints: POST /retrieve, GET /health)"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            reason = f"method {request.method} not allowed on {request.url.path} (allowed: {allowed})"
        return error(exc.status_code, reason, headers=exc.headers)

    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("retrieval server: %s %s failed", request.method, request.url.path)
        return error(500, f"internal error: {type(exc).__name__}: {exc}")

    return Starlette(
        routes=[Route("/retrieve", retrieve, methods=["POST"]), Route("/health", health, methods=["GET"])],
        exception_handlers={HTTPException: http_error, Exception: server_error},
        middleware=[Middleware(HostCheck, allowed=allowed_hosts)],
    )


def allowed_hosts_for(host: str, extra: Collection[str] = ()) -> list[str]:
    """The `Host` names a server bound to `host` answers to: the loopback names, `host` itself
    when it is a specific address, and `extra` (`--allow-host`; `*` lets any name in)."""
    names = [*LOOPBACK_NAMES, *extra]
    if host not in ("0.0.0.0", "::", "") and not is_loopback(host):
        names.append(host)
    return names


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); port 0 picks a free one. Errors name the address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(f"--host {host}: cannot resolve ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise BranchpointError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback name or address (only this machine can connect)."""
    if host == "localhost":
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_of(sock: socket.socket) -> str:
    """http://host:port of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn_server(app: Any, log_level: str) -> Any:
    uvicorn = require("uvicorn", "uvicorn", "the retrieval server")
    config = uvicorn.Config(app, lifespan="off", log_level=log_level, timeout_keep_alive=30, server_header=False)
    return uvicorn.Server(config)


def serve(
    service: RetrievalService,
    sock: socket.socket,
    log_level: str = "info",
    allowed_hosts: Collection[str] = LOOPBACK_NAMES,
) -> None:
    """Serve on an already bound socket until interrupted (Ctrl-C / SIGTERM)."""
    _uvicorn_server(create_app(service, allowed_hosts=allowed_hosts), log_level).run(sockets=[sock])


@contextmanager
def running_server(
    service: RetrievalService,
    host: str = "127.0.0.1",
    port: int = 0,
    log_level: str = "warning",
    startup_timeout_s: float = 30.0,
) -> Iterator[str]:
    """Serve in a background thread (tests, notebooks); yields the base URL, stops on exit."""
    sock = bind_socket(host, port)
    server = _uvicorn_server(create_app(service, allowed_hosts=allowed_hosts_for(host)), log_level)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="branchpoint-retrieval-server"
    )
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise BranchpointError(f"retrieval server on {url_of(sock)} did not start")
            time.sleep(0.01)
        yield url_of(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


class RetrievalServerProcess(ManagedServer):
    """`branchpoint retrieval serve` as a managed child process (it dies with this process):
    `with RetrievalServerProcess(index_dir) as s: SearchR1Source("wiki", s.url)`."""

    label = "retrieval server"
    log_prefix = "branchpoint-retrieval-"
    health_path = "/health"

    def __init__(
        self,
        index: str | Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 120.0,
        log_path: Path | None = None,
    ) -> None:
        super().__init__(host, port, startup_timeout_s, log_path)
        self.index = Path(index)

    def prepare(self) -> None:
        """Refuse a folder that holds no saved index before starting anything."""
        if not (self.index / "manifest.json").is_file():
            raise InputError(
                f"{self.index}: not a saved index directory (expected index.faiss, passages.jsonl and manifest.json)"
            )

    @property
    def url(self) -> str:
        """The server's root URL (`POST {url}/retrieve`)."""
        return f"http://{url_host(self.host)}:{self.port}"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "branchpoint.cli",
            "retrieval",
            "serve",
            "--index",
            str(self.index),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
