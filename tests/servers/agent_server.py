"""A request-logging OpenAI-compatible server whose replies are a deterministic function of the
request, for the fork invariant tests.

It searches whenever it may and answers when it may not, so a parent execution passes every
boundary kind: chat requests that offer the `search` tool get a tool call (with visible content
and reasoning text), tagged-text requests (a first message that mentions `<search>`: the tagged
system prompt, or Search-R1's prompt) get a `<think>…</think><search>…</search>` turn and text
after it (a server that ignores `stop`), a sequence that ends with an opened `<answer>` its answer, completion requests without an answer-only grammar get
a search decision; "answer now" and no-tool requests get an answer. Every request body is logged
in arrival order, so a test can compare a branch's first request with its parent's.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from branchpoint.agents.prompts import FORCE_ANSWER, SELF_EVAL_PROMPT


def _results_in(messages: list[dict[str, Any]]) -> int:
    """Search results shown: tool messages, `<information>` user turns, and the `<information>`
    blocks of an assistant sequence (the `searchr1` protocol's)."""
    return sum(
        1
        for m in messages
        if m.get("role") == "tool"
        or (m.get("role") == "user" and str(m.get("content", "")).startswith("<information>"))
    ) + sum(str(m.get("content") or "").count("<information>") for m in messages if m.get("role") == "assistant")


def chat_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for a chat request."""
    messages = body["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    n = _results_in(messages)
    last = messages[-1]
    if last["role"] == "user" and last["content"] == SELF_EVAL_PROMPT:
        return {"role": "assistant", "content": "ANSWERABLE"}
    if last["role"] == "user" and last["content"] == FORCE_ANSWER:
        return {"role": "assistant", "content": f"Answer after {n} searches", "reasoning": f"answering {n}"}
    if last["role"] == "assistant" and str(last["content"]).endswith("<answer>"):  # searchr1's forced answer
        return {"role": "assistant", "content": f"Answer after {n} searches</answer> and more"}
    query = f"{question} #{n}"
    if body.get("tools"):
        call_id = "call-" + hashlib.sha256(query.encode()).hexdigest()[:10]
        return {
            "role": "assistant",
            "content": f"Let me search ({n}).",
            "reasoning": f"need more {n}",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "search", "arguments": json.dumps({"query": query})},
                }
            ],
        }
    if "<search>" in messages[0]["content"]:
        return {"role": "assistant", "content": f"<think>plan {n}</think><search>{query}</search> then I wait."}
    return {"role": "assistant", "content": f"Answer after {n} searches"}


def completion_text(body: dict[str, Any]) -> str:
    """The completion for a few-shot JSON decision prompt (continued after `{"action": "`)."""
    prompt = body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]
    block = prompt.rsplit("Question: ", 1)[-1]
    question = block.splitlines()[0]
    n = len(re.findall(r"\[\d+\] ", block))
    grammar = body.get("grammar")
    if grammar and "search" not in grammar:
        return f'answer", "text": "Answer from {n} passages"}}'
    return f'search", "text": "{question} {n}"}}'


@dataclass
class AgentServer:
    """The running server: its base URL and every request body (path, body), in order."""

    base_url: str = ""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self, path: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [b for p, b in self.requests if path is None or p == path]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()


def _usage(body: dict[str, Any], text: str) -> dict[str, Any]:
    prompt = len(json.dumps(body)) // 4
    completion = max(1, len(text) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _handler(server: AgentServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.split("?", 1)[0]
            with server.lock:
                server.requests.append((path, body))
            if path.endswith("/chat/completions"):
                message = chat_reply(body)
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                reply = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": _usage(body, str(message.get("content"))),
                }
            elif path.endswith("/completions"):
                text = completion_text(body)
                reply = {
                    "id": "cmpl-1",
                    "object": "text_completion",
                    "created": 1,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
                    "usage": _usage(body, text),
                }
            elif path.endswith("/tokenize"):
                reply = {"count": len(str(body.get("prompt", "")).split()), "tokens": []}
            else:
                reply = {"object": "error", "message": f"no such path {path}"}
            data = json.dumps(reply).encode()
            self.send_response(200 if ("object" in reply and reply["object"] != "error") or "count" in reply else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def agent_server() -> Iterator[AgentServer]:
    """A running `AgentServer` on a free loopback port; `base_url` ends in /v1."""
    server = AgentServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    server.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
