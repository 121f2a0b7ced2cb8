"""The requests a run sent, as sent, for the viewer: `requests.jsonl` (`--log-requests`) indexed
by execution id, and each execution's requests matched to its model steps.

Each line of `requests.jsonl` is `{"time", "execution_id", "endpoint", "body"}` with the JSON body
as it went to the server (`branchpoint.models.request_log`). A record's model calls are its steps
that carry a model `usage` (decisions, retries, forced answers), in order; the runner logs one
request per call, in the same order, so the k-th request of an execution is the k-th model step's.
When the counts differ (a run logged only in part, a foreign trace) the requests are shown apart,
unplaced. Lines are read again from their byte offsets when an execution is opened, so a long
log is scanned once and held as offsets only; lines appended later (a running run) are added.

`requests.rebuilt.jsonl` (`branchpoint requests rebuild`) has the same lines, each with a
`rebuilt` field ({"from": "checkpoint", "checkpoint_id", "node", "verified"}): the requests built
again from the run's checkpoints by the run's own code. It is read the same way, for executions
that have no lines in requests.jsonl, and its requests are labelled as rebuilt.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchpoint.evaluation.viewer.files import iter_lines
from branchpoint.traces import MAX_LINE_BYTES, REQUESTS_FILE, ExecutionRecord, Step

#: Body fields that are the prompt or the tools; every other field is a sampling / request setting.
PROMPT_FIELDS = ("messages", "prompt", "tools", "model")


def is_model_step(step: Step) -> bool:
    """A step that is one model call (it carries the call's usage), not a search."""
    return step.kind != "search" and step.usage is not None


def split_body(body: Any) -> dict[str, Any]:
    """A request body as the page shows it: messages or prompt, tools, and the other fields
    (sampling and limits as sent)."""
    if not isinstance(body, dict):
        return {"settings": {}, "body": body}
    return {
        "model": body.get("model"),
        "messages": body.get("messages"),
        "prompt": body.get("prompt"),
        "tools": body.get("tools"),
        "settings": {k: v for k, v in body.items() if k not in PROMPT_FIELDS},
    }


def step_reply(step: Step) -> dict[str, Any]:
    """A model step's reply as received: content (`raw`), reasoning, tool calls, finish reason."""
    data = step.model_dump(mode="json")
    return {
        "content": step.raw if step.raw is not None else step.text,
        "reasoning": data.get("reasoning") or data.get("reasoning_content"),
        "tool_calls": data.get("tool_calls") or [],
        "finish_reason": step.finish_reason,
    }


@dataclass
class RequestIndex:
    """Byte offsets of each execution's lines in RUN_DIR/requests.jsonl (or `file`, e.g.
    requests.rebuilt.jsonl), read on first use."""

    run_dir: Path
    file: str = REQUESTS_FILE
    offsets: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # id -> [(offset, line)]
    read_to: tuple[int, int] = (0, 1)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def path(self) -> Path:
        return self.run_dir / self.file

    def available(self) -> bool:
        return self.path.is_file()

    def _update(self) -> None:
        """Index the whole lines written since the last look."""
        if not self.path.is_file() or self.path.stat().st_size <= self.read_to[0]:
            return
        for lineno, offset, raw, _ in iter_lines(self.path, *self.read_to, whole_only=True):
            if raw is None:
                continue
            self.read_to = (offset + len(raw), lineno + 1)
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(obj, dict) and obj.get("execution_id"):
                self.offsets.setdefault(str(obj["execution_id"]), []).append((offset, lineno))

    def requests_of(self, execution_id: str) -> list[dict[str, Any]]:
        """The logged requests of one execution, in order: {line, time, endpoint, body}, and
        `rebuilt` for a rebuilt line."""
        with self.lock:
            self._update()
            where = list(self.offsets.get(execution_id, []))
        out = []
        with self.path.open("rb") as fh:
            for offset, lineno in where:
                fh.seek(offset)
                obj = json.loads(fh.readline(MAX_LINE_BYTES + 1))
                out.append(
                    {
                        "line": lineno,
                        "time": obj.get("time"),
                        "endpoint": obj.get("endpoint"),
                        "body": obj.get("body"),
                        **({"rebuilt": obj["rebuilt"]} if obj.get("rebuilt") else {}),
                    }
                )
        return out


def attach_requests(
    record: ExecutionRecord, steps: list[dict[str, Any]], logged: list[dict[str, Any]], source: str
) -> tuple[list[dict[str, Any]], str | None]:
    """Put request k on model step k (`steps` are the page's step dicts, by index) with its reply;
    returns the requests left unplaced and a note when the counts differ. `source` names the file
    they come from."""
    model_steps = [i for i, s in enumerate(record.steps) if is_model_step(s)]
    for i in model_steps:
        steps[i]["reply"] = step_reply(record.steps[i])
    if not logged:
        return [], None
    if len(logged) != len(model_steps):
        note = (
            f"{len(logged)} requests in {source}, but the record has {len(model_steps)} model calls: "
            "the requests are listed apart, in the order they were sent"
        )
        return [{**r, **split_body(r["body"]), "source": source} for r in logged], note
    for i, r in zip(model_steps, logged):
        steps[i]["request"] = {**r, **split_body(r["body"]), "source": source}
    return [], None
