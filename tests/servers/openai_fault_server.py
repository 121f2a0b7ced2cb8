"""A local OpenAI-compatible server for fault-injection tests and throughput benchmarks.

It answers `/v1/models`, `/v1/completions` and `/v1/chat/completions` with valid replies after a
fixed latency, and, on a seeded share of requests, answers HTTP 500, drops the connection
without a reply, answers truncated JSON, answers HTTP 200 with a body that is no completion (a
gateway's `{"error": ...}`, no `choices`: `--malformed-rate`), or stalls past the client's
timeout. `--echo-key-in-reply`: healthy replies quote the request's Authorization header in the
model's text (the search query and the answer), as a careless gateway or model might. Run it as a script
(`python tests/servers/openai_fault_server.py --port 0 ...`; it prints `PORT <n>` when ready) or
in-process with `FaultServer(...).start()`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FaultConfig:
    """Shares of requests that fail in each way, and the latency of every request."""

    def __init__(
        self,
        latency_s: float = 0.0,
        error_rate: float = 0.0,
        drop_rate: float = 0.0,
        truncate_rate: float = 0.0,
        stall_rate: float = 0.0,
        stall_s: float = 5.0,
        seed: int = 0,
        echo_auth: bool = False,
        unauthorized_rate: float = 0.0,
        search_once: bool = False,
        hold_file: str | None = None,
        malformed_rate: float = 0.0,
        echo_key_in_reply: bool = False,
        chat_text: str = "I don't know.",
    ) -> None:
        self.latency_s = latency_s
        self.error_rate = error_rate
        self.drop_rate = drop_rate
        self.truncate_rate = truncate_rate
        self.stall_rate = stall_rate
        self.stall_s = stall_s
        # A careless gateway: error bodies quote the request's Authorization header, and a share
        # of requests is refused with HTTP 401 (quoting it too).
        self.echo_auth = echo_auth
        self.unauthorized_rate = unauthorized_rate
        self.search_once = search_once  # completions: search once, then answer (`search_once_text`)
        self.hold_file = hold_file  # while this file exists, POST requests wait (tests pace a run)
        self.malformed_rate = malformed_rate  # HTTP 200 with {"error": ...} and no choices
        self.echo_key_in_reply = echo_key_in_reply
        self.chat_text = chat_text  # the chat endpoint's reply text
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {
            "ok": 0,
            "error": 0,
            "drop": 0,
            "truncate": 0,
            "stall": 0,
            "unauthorized": 0,
            "malformed": 0,
        }
        self.authorization: set[str] = set()  # every Authorization header seen (API-key tests)

    def draw(self) -> str:
        """The fate of the next request."""
        with self._lock:
            r = self._rng.random()
            for fate, rate in (
                ("error", self.error_rate),
                ("drop", self.drop_rate),
                ("truncate", self.truncate_rate),
                ("stall", self.stall_rate),
                ("unauthorized", self.unauthorized_rate),
                ("malformed", self.malformed_rate),
            ):
                if r < rate:
                    self.counts[fate] += 1
                    return fate
                r -= rate
            self.counts["ok"] += 1
            return "ok"


def search_once_text(body: dict[str, Any], echo: str = "") -> str:
    """The constrained policy's completion for a deterministic agent: search once for the
    question when it may, then answer with the first passage's title (or "I do not know");
    `echo` is put after the query and the answer (a key quoted back)."""
    block = str(body.get("prompt", "")).rsplit("Question: ", 1)[-1]
    question = block.splitlines()[0] if block else ""
    grammar = body.get("grammar")
    answer_only = bool(grammar and "search" not in grammar)
    tail = f" {echo}" if echo else ""
    if "Evidence: (none)" in block and not answer_only:
        return f'search", "text": {json.dumps(question + tail)}}}'
    match = re.search(r'\[1\] "([^"]+)"', block)
    return f'answer", "text": {json.dumps((match.group(1) if match else "I do not know") + tail)}}}'


def _reply(
    path: str, body: dict[str, Any], search_once: bool = False, echo: str = "", chat_text: str = "I don't know."
) -> dict[str, Any]:
    usage = {"prompt_tokens": len(json.dumps(body).split()), "completion_tokens": 7, "total_tokens": 0}
    if path.endswith("/completions") and "chat" not in path:
        text = search_once_text(body, echo) if search_once else 'answer", "text": "I do not know"}'
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
            "usage": usage,
        }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": chat_text + (f" {echo}" if echo else "")},
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


def make_handler(config: FaultConfig) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm on, the body waits for
        # the client's delayed ACK (~40 ms per request), which real servers (uvicorn) avoid.
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, payload: bytes) -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                self.close_connection = True

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            config.authorization.add(self.headers.get("Authorization") or "")
            body = json.loads(self.rfile.read(length) or b"{}")
            while config.hold_file and os.path.exists(config.hold_file):
                time.sleep(0.02)
            time.sleep(config.latency_s)
            fate = config.draw()
            auth = self.headers.get("Authorization") or ""
            echo = auth if config.echo_key_in_reply else ""

            def reply() -> bytes:
                return json.dumps(_reply(self.path, body, config.search_once, echo, config.chat_text)).encode()

            if fate == "error":
                quoted = f" (request headers: Authorization: {auth})" if config.echo_auth else ""
                self._send(500, json.dumps({"error": {"message": f"injected failure{quoted}"}}).encode())
            elif fate == "unauthorized":
                self._send(
                    401,
                    json.dumps(
                        {
                            "error": {
                                "message": f"invalid credentials: Authorization: {auth}",
                                "type": "invalid_request_error",
                            }
                        }
                    ).encode(),
                )
            elif fate == "malformed":  # a gateway's 200: an error object, no choices
                self._send(200, json.dumps({"error": {"message": "upstream overloaded", "code": 503}}).encode())
            elif fate == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            elif fate == "truncate":
                payload = reply()
                self._send(200, payload[: len(payload) // 2])
            elif fate == "stall":
                time.sleep(config.stall_s)
                self._send(200, reply())
            else:
                self._send(200, reply())

    return Handler


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops the connects of a burst of 64 clients, which then
    # wait for a 1 s SYN retransmit; servers such as uvicorn listen with a backlog of 2048.
    request_queue_size = 1024


class FaultServer:
    """The server in a background thread: `with FaultServer(FaultConfig(...)) as s: s.base_url`."""

    def __init__(self, config: FaultConfig | None = None, port: int = 0) -> None:
        self.config = config or FaultConfig()
        self.httpd = _Server(("127.0.0.1", port), make_handler(self.config))
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServerProcess:
    """The server as a child process, so it can be killed (SIGKILL) and restarted on its port:
    `with ServerProcess("--latency-s", "0.05") as s: ...; s.kill(); s.restart()`."""

    def __init__(self, *args: str, port: int = 0) -> None:
        self.args = list(args)
        self.port = port
        self.proc: subprocess.Popen[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, attempts: int = 50) -> ServerProcess:
        for _ in range(attempts):  # the old port may take a moment to become free again
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--port", str(self.port), *self.args],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if line.startswith("PORT "):
                self.port = int(line.split()[1])
                return self
            self.proc.wait()
            time.sleep(0.1)
        raise RuntimeError(f"fault server could not bind port {self.port}")

    def kill(self) -> None:
        """SIGKILL: no goodbye to open connections."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def restart(self) -> ServerProcess:
        self.kill()
        return self.start()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    for name in (
        "latency-s",
        "error-rate",
        "drop-rate",
        "truncate-rate",
        "stall-rate",
        "unauthorized-rate",
        "malformed-rate",
    ):
        parser.add_argument(f"--{name}", type=float, default=0.0)
    parser.add_argument("--stall-s", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--echo-auth", action="store_true", help="Error bodies quote the Authorization header.")
    parser.add_argument("--search-once", action="store_true", help="Completions search once, then answer.")
    parser.add_argument("--hold-file", default=None, help="While this file exists, requests wait.")
    parser.add_argument("--echo-key-in-reply", action="store_true", help="Replies quote the Authorization header.")
    parser.add_argument("--chat-text", default="I don't know.", help="The chat endpoint's reply text.")
    a = parser.parse_args()
    config = FaultConfig(
        a.latency_s,
        a.error_rate,
        a.drop_rate,
        a.truncate_rate,
        a.stall_rate,
        a.stall_s,
        a.seed,
        echo_auth=a.echo_auth,
        unauthorized_rate=a.unauthorized_rate,
        search_once=a.search_once,
        hold_file=a.hold_file,
        malformed_rate=a.malformed_rate,
        echo_key_in_reply=a.echo_key_in_reply,
        chat_text=a.chat_text,
    )
    server = FaultServer(config, a.port)
    print(f"PORT {server.httpd.server_address[1]}", flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
