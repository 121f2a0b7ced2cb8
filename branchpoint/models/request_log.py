"""`--log-requests`: every request body a model client sends, one JSON line each, in the run dir.

A researcher reads `RUN_DIR/requests.jsonl` to see exactly what an execution or a fork branch
sent. Each line is `{"time", "execution_id", "endpoint", "body"}`: the JSON body as it went to
the server (OpenAI-compatible clients log it from the HTTP request itself; the scripted model
logs the request it was given). Headers are never logged, so API keys never reach the file.
`execution_id` is the execution or branch the calling thread is running (`current_execution`).
"""

from __future__ import annotations

import json
import threading
import time
from contextvars import ContextVar
from pathlib import Path
from typing import Any

#: The execution (or branch) id whose agent is calling the model in this thread / task.
current_execution: ContextVar[str | None] = ContextVar("branchpoint_current_execution", default=None)


class RequestLog:
    """Appends request bodies to a JSONL file (append mode: reruns and forks add to it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh = self.path.open("a", encoding="utf-8")

    def write(self, endpoint: str, body: Any) -> None:
        """Append one request (flushed at once, so a killed run keeps what it sent)."""
        line = json.dumps(
            {"time": time.time(), "execution_id": current_execution.get(), "endpoint": endpoint, "body": body},
            ensure_ascii=False,
            default=str,
        )
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._fh.close()


def read_requests(path: str | Path) -> list[dict[str, Any]]:
    """The logged requests of a `requests.jsonl`, in order."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
