"""A loopback OpenAI-compatible server that replays recorded chat-completion bodies (judge tests).

The same small pattern as tests/models/test_openai_compat.py: replies are queued per path (the
last one repeats), every request body is recorded, unknown paths answer 404.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT = "/v1/chat/completions"


def chat_body(content: str, prompt_tokens: int = 180, completion_tokens: int = 24) -> dict[str, Any]:
    """A chat-completion body shaped like vLLM's (a judge reply)."""
    return {
        "id": "chatcmpl-judge-1",
        "object": "chat.completion",
        "created": 1764480100,
        "model": "judge-m",
        "choices": [
            {"index": 0,
             "message": {"role": "assistant", "content": content, "refusal": None, "annotations": None,
                         "audio": None, "function_call": None, "tool_calls": [], "reasoning": None},
             "logprobs": None, "finish_reason": "stop", "stop_reason": None}
        ],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                  "completion_tokens": completion_tokens, "prompt_tokens_details": None},
        "prompt_logprobs": None,
    }  # fmt: skip


@dataclass
class FakeOpenAI:
    base_url: str = ""
    replies: dict[str, deque[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, path: str, *replies: tuple[int, dict[str, Any]]) -> None:
        self.replies[path] = deque(replies)

    def next_reply(self, path: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            queue = self.replies.get(path)
            if not queue:
                return 404, {"object": "error", "message": f"no reply for {path}", "code": 404}
            return queue.popleft() if len(queue) > 1 else queue[0]

    def bodies(self, path: str = CHAT) -> list[dict[str, Any]]:
        return [body for p, body in self.requests if p == path]


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            path = self.path.split("?", 1)[0]
            with server.lock:
                server.requests.append((path, json.loads(raw)))
            status, body = server.next_reply(path)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST

    return Handler


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    """Start the server on 127.0.0.1 (a free port); stop it on exit."""
    fake = FakeOpenAI()
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
