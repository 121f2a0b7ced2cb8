"""A loopback HTTP server that replays recorded response bodies and records every request.

Used by the client tests: replies are queued per path (`/v1/chat/completions`, `/tokenize` ...);
a path with no reply answers 404, as an endpoint the server does not have.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str) -> dict[str, Any]:
    """A recorded response body from tests/models/recorded/."""
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes = b""  # the body's bytes as received


@dataclass
class FakeServer:
    """Replies from per-path queues of (status, body); the last reply of a queue repeats."""

    base_url: str
    replies: dict[str, deque[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    delay_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: When set, replies are computed from (path, body) instead of taken from the queues.
    responder: Any = None

    def reply(self, path: str, *replies: tuple[int, dict[str, Any]]) -> None:
        self.replies[path] = deque(replies)

    def next_reply(self, path: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            queue = self.replies.get(path)
            if not queue:
                return 404, {"object": "error", "message": f"no reply for {path}", "code": 404}
            return queue.popleft() if len(queue) > 1 else queue[0]

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == path]

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def do_GET(self) -> None:  # e.g. GET /version (vLLM), GET /props (llama.cpp)
            self.do_POST()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            path = self.path.split("?", 1)[0]
            with server.lock:
                server.requests.append(Recorded(path, dict(self.headers.items()), json.loads(raw), raw))
            recorded_body = server.requests[-1].body
            status, body = server.responder(path, recorded_body) if server.responder else server.next_reply(path)
            time.sleep(server.delay_s)
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (timeout tests)
                pass

    return Handler


@contextmanager
def fake_server() -> Iterator[FakeServer]:
    """A running `FakeServer` on a free loopback port; `base_url` ends in /v1."""
    fake = FakeServer(base_url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    httpd.daemon_threads = True
    fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
