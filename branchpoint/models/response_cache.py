"""The response cache (`--cache DIR`, `model.response_cache`): a model request that was sent
before is answered from a shared SQLite file instead of the server.

Key: SHA-256 of the canonical JSON (sorted keys) of the endpoint, the request body as sent (the
HTTP body itself, seed included) and the model's fingerprint (`model_identity`: server kind,
model name, server version where known). A fork branch or a repeat sends its own seed, so it
never finds another's reply; a rerun into a new folder, a re-judge or an extended fork study
sends the very bodies it sent before and gets their replies back without a request. A server of
another version, or a simulated server with other settings, has another fingerprint: a miss.

Only requests whose reply the request determines are served or stored: those with a `seed`, or
at `temperature` 0. A request sampled (temperature > 0, or none sent: the server's default)
without a seed is an independent draw each time it is sent; answering it from the cache would
collapse those draws into one. Such a request is sent as it would be without the cache and not
stored (its call records no `cache_hit`); the cache logs a warning once. Streamed requests pass
too. A reply is stored only when it is HTTP 200 and a well-formed completion (`replies`), with
the client's API key redacted; errors and malformed replies are never stored.

Where: one place for every OpenAI-compatible request, the HTTP transport under the `openai`
package's clients (`CachingTransport`, `AsyncCachingTransport`), so chat and completion calls,
blocking and async, on vLLM, llama.cpp, the embedded default, the simulated server and LangChain
models sending through branchpoint's HTTP clients, all go through it, after the request hooks
(`--log-requests`, request fingerprints and the sampling as sent see every body, hits included).
A call learns whether it was answered from the cache through `observe_cache()` (a context
variable the transport writes to): `ModelCall.cache_hit`, the step's `cache_hit` in the trace.

Concurrency: WAL and a busy timeout, so several processes (`--processes`, Ray on one machine)
share one file; the first writer of a key wins (`INSERT OR IGNORE`). A local disk only: SQLite's
WAL does not work over network file systems.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from branchpoint.models.replies import MalformedReply, check_chat, check_completion
from branchpoint.redact import redact

log = logging.getLogger(__name__)

#: The SQLite file in a `--cache DIR` folder.
RESPONSES_FILE = "responses.sqlite"
#: How long (ms) a connection waits for another process's write lock before failing.
BUSY_TIMEOUT_MS = 30_000
#: URL path endings of the requests the cache answers (chat first: it also ends in /completions).
ENDPOINTS = (("/chat/completions", "chat"), ("/completions", "completions"))
#: Response headers not kept with a stored body (it is stored decoded, and its length is its own).
_DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key          TEXT PRIMARY KEY,
    endpoint     TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    content_type TEXT,
    body         BLOB NOT NULL,
    created_at   REAL NOT NULL
)
"""


def endpoint_of(path: str) -> str | None:
    """`chat` or `completions` for a model request's URL path; None for any other request."""
    for suffix, name in ENDPOINTS:
        if path.endswith(suffix):
            return name
    return None


def request_key(endpoint: str, body: Any, fingerprint: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of (fingerprint, endpoint, body as sent)."""
    payload = json.dumps(
        {"fingerprint": fingerprint, "endpoint": endpoint, "body": body},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def determined(body: Any) -> bool:
    """Whether the request determines its reply: it sends a seed, or temperature 0 (see the module
    docstring); a streamed request, or one that asks for several choices unseeded, is not served."""
    if not isinstance(body, dict) or body.get("stream"):
        return False
    if body.get("seed") is not None:
        return True
    temperature = body.get("temperature")
    return isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature == 0


def cache_file(folder: str | Path) -> Path:
    """The SQLite file of a `--cache DIR` folder."""
    return Path(folder).expanduser() / RESPONSES_FILE


class ResponseCache:
    """Stored replies by key in `DIR/responses.sqlite`; one connection, shared by threads under a
    lock, opened on first use (a command that refuses its input first leaves no file behind)."""

    def __init__(self, folder: str | Path) -> None:
        self.path = cache_file(folder)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._warned = False
        from branchpoint.dbfiles import CACHE_HINT, probe

        probe(self.path, "response cache", CACHE_HINT, ("responses",))

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            try:
                db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(_SCHEMA)
                db.commit()
            except sqlite3.DatabaseError as exc:
                db.close()
                from branchpoint.dbfiles import CACHE_HINT, damaged

                raise damaged(self.path, "response cache", exc, CACHE_HINT) from None
            self._db = db
            weakref.finalize(self, db.close)
        return self._db

    def get(self, key: str) -> tuple[str | None, bytes] | None:
        """(content type, body) stored under `key`, or None."""
        with self._lock:
            row = self._connect().execute("SELECT content_type, body FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], bytes(row[1]))

    def put(self, key: str, endpoint: str, fingerprint: str, content_type: str | None, body: bytes) -> None:
        """Store a reply under `key` unless one is stored already (the first writer wins)."""
        with self._lock:
            db = self._connect()
            db.execute(
                "INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
                (key, endpoint, fingerprint, content_type, body, time.time()),
            )
            db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def warn_undetermined(self, body: dict[str, Any]) -> None:
        """Say once that requests sampled without a seed are sent, not cached."""
        with self._lock:
            if self._warned:
                return
            self._warned = True
        log.warning(
            "response cache %s: requests sampled at temperature %s without a seed are sent and not cached "
            "(each is an independent draw; a cached reply would make them one); set model.seed to cache them",
            self.path,
            body.get("temperature", "(server default)"),
        )

    def close(self) -> None:
        """Close the connection (a later get or put opens it again)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


# --- whether a call was answered from the cache ----------------------------------------------


@dataclass
class CacheLookup:
    """What the transport did with the requests of one model call: `hit` is the outcome of the
    last request it was asked (a retried call: its last attempt); None when none was looked up."""

    hit: bool | None = None


_lookup: ContextVar[CacheLookup | None] = ContextVar("branchpoint_response_cache_lookup", default=None)


@contextmanager
def observe_cache() -> Iterator[CacheLookup]:
    """Around one model call: the transport records into the yielded `CacheLookup` whether the
    cache answered it (the call's thread or task, where the HTTP request is sent)."""
    lookup = CacheLookup()
    token = _lookup.set(lookup)
    try:
        yield lookup
    finally:
        _lookup.reset(token)


def _note(hit: bool) -> None:
    lookup = _lookup.get()
    if lookup is not None:
        lookup.hit = hit


# --- the binding of a cache to one model, and the transports ---------------------------------


class CacheBinding:
    """A `ResponseCache` for one model: the model's fingerprint (computed once, on the first
    request that can be cached, by `fingerprint_of`; a server that cannot be asked leaves it
    unknown and that request is sent, not cached) and the secrets redacted from stored replies."""

    def __init__(
        self, cache: ResponseCache, fingerprint_of: Callable[[], dict[str, Any] | None], secrets: list[str]
    ) -> None:
        self.cache = cache
        self._fingerprint_of = fingerprint_of
        self._fingerprint: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.secrets = [s for s in secrets if s]

    def fingerprint(self) -> dict[str, Any] | None:
        """The model's fingerprint (asked once; None while the server cannot be asked)."""
        with self._lock:
            if self._fingerprint is None:
                self._fingerprint = self._fingerprint_of()
            return self._fingerprint

    def known(self) -> dict[str, Any] | None:
        """The fingerprint if it has been computed (never asks the server)."""
        return self._fingerprint

    def body_of(self, request: httpx2.Request) -> tuple[str, Any] | None:
        """(endpoint, body) of a request the cache may answer (a model request that determines its
        reply); None for one it passes on."""
        endpoint = endpoint_of(request.url.path)
        if request.method != "POST" or endpoint is None:
            return None
        try:
            body = json.loads(request.content or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError, httpx2.RequestNotRead):
            return None
        if not determined(body):
            if isinstance(body, dict) and not body.get("stream"):
                self.cache.warn_undetermined(body)
            return None
        return endpoint, body

    def hit(self, request: httpx2.Request, key: str) -> httpx2.Response | None:
        """The stored reply of `key` as a response to `request`, or None."""
        stored = self.cache.get(key)
        if stored is None:
            return None
        content_type, body = stored
        headers = {"content-type": content_type} if content_type else {}
        return httpx2.Response(200, headers=headers, content=body, request=request)

    def store(self, key: str, endpoint: str, fingerprint: dict[str, Any], response: httpx2.Response) -> None:
        """Store a reply that is HTTP 200 and a well-formed completion (redacted); others not."""
        if response.status_code != 200:
            return
        text = redact(response.content.decode("utf-8", errors="replace"), self.secrets)
        try:
            reply = json.loads(text)
            (check_chat if endpoint == "chat" else check_completion)(reply)
        except (json.JSONDecodeError, MalformedReply):
            return
        digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:16]
        self.cache.put(key, endpoint, digest, response.headers.get("content-type"), text.encode("utf-8"))


def _replayable(response: httpx2.Response, request: httpx2.Request) -> httpx2.Response:
    """A read response as a new one over its decoded bytes (the inner one's stream is spent)."""
    headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROPPED_HEADERS]
    return httpx2.Response(response.status_code, headers=headers, content=response.content, request=request)


class CachingTransport(httpx2.BaseTransport):
    """An httpx transport that answers model requests from a `CacheBinding` and sends the
    others, and the misses, through `inner`."""

    def __init__(self, inner: httpx2.BaseTransport, binding: CacheBinding) -> None:
        self.inner = inner
        self.binding = binding

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Serve a stored reply, or send and store it (see the module docstring)."""
        planned = self.binding.body_of(request)
        fingerprint = self.binding.fingerprint() if planned is not None else None
        if planned is None or fingerprint is None:
            return self.inner.handle_request(request)
        endpoint, body = planned
        key = request_key(endpoint, body, fingerprint)
        stored = self.binding.hit(request, key)
        if stored is not None:
            _note(True)
            return stored
        _note(False)
        response = self.inner.handle_request(request)
        try:
            response.read()
        finally:
            response.close()
        self.binding.store(key, endpoint, fingerprint, response)
        return _replayable(response, request)

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()


class AsyncCachingTransport(httpx2.AsyncBaseTransport):
    """`CachingTransport` for async clients: the SQLite reads and writes, and asking the server
    for its fingerprint, run off the event loop."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, binding: CacheBinding) -> None:
        self.inner = inner
        self.binding = binding

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Serve a stored reply, or send and store it (see the module docstring)."""
        planned = self.binding.body_of(request)
        fingerprint = None
        if planned is not None:  # asked once, off the loop (a GET or three to the server)
            fingerprint = self.binding.known() or await asyncio.to_thread(self.binding.fingerprint)
        if planned is None or fingerprint is None:
            return await self.inner.handle_async_request(request)
        endpoint, body = planned
        key = request_key(endpoint, body, fingerprint)
        stored = await asyncio.to_thread(self.binding.hit, request, key)
        if stored is not None:
            _note(True)
            return stored
        _note(False)
        response = await self.inner.handle_async_request(request)
        try:
            await response.aread()
        finally:
            await response.aclose()
        await asyncio.to_thread(self.binding.store, key, endpoint, fingerprint, response)
        return _replayable(response, request)

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self.inner.aclose()
