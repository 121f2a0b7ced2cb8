"""A scripted, deterministic model for unit tests: replies come from a list or a function."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

from branchpoint.models.call import ModelCall, TransportError
from branchpoint.traces import Usage

#: A scripted reply: plain text, or {"text": ..., "tool_calls": [{"name", "args"}], "finish_reason"}.
Reply = str | dict[str, Any]


def _count_tokens(text: str) -> int:
    """Whitespace token count: a stand-in tokenizer so scripted usage is non-zero and stable."""
    return len(text.split())


class ScriptedModel:
    """A `ModelClient` whose replies are scripted; records every prompt it was given.

    `replies` are returned in order (cycling when `cycle` is set); `responder` computes the
    reply from the prompt instead (and also gets the call's options as `request=` — stop,
    grammar, tools, max_tokens — when it takes that keyword). `fail_first` raises `TransportError` for the first N calls,
    to exercise the runner's handling of transport faults.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | None = None,
        *,
        responder: Callable[[str], Reply] | None = None,
        cycle: bool = False,
        fail_first: int = 0,
        name: str = "scripted",
    ) -> None:
        if (replies is None) == (responder is None):
            raise ValueError("ScriptedModel needs exactly one of `replies` or `responder`")
        self.name = name
        self._replies = list(replies or [])
        self._responder = responder
        self._responder_wants_request = responder is not None and (
            "request" in inspect.signature(responder).parameters
        )
        self._cycle = cycle
        self._fail_first = fail_first
        self.prompts: list[str] = []
        self.requests: list[dict[str, Any]] = []  # per answered call: stop, grammar, tools, max_tokens
        self.calls = 0
        self._lock = threading.Lock()  # forks run branches concurrently on one model

    def with_seed(self, seed: int | None) -> ScriptedModel:
        """The scripted model ignores seeds: the same object (its script is the randomness)."""
        return self

    def _next(self, prompt: str, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._next_locked(prompt, request)

    def _next_locked(self, prompt: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self._fail_first:
            raise TransportError(f"scripted transport fault {self.calls}/{self._fail_first}")
        self.prompts.append(prompt)
        self.requests.append(request)
        if self._responder is not None:
            reply = self._responder(prompt, request=request) if self._responder_wants_request else self._responder(prompt)
        else:
            idx = len(self.prompts) - 1
            if idx >= len(self._replies):
                if not self._cycle or not self._replies:
                    raise RuntimeError(f"ScriptedModel: script exhausted after {len(self._replies)} replies")
                idx %= len(self._replies)
            reply = self._replies[idx]
        return {"text": reply} if isinstance(reply, str) else dict(reply)

    def _call(self, prompt: str, max_tokens: int | None, request: dict[str, Any]) -> ModelCall:
        reply = self._next(prompt, request)
        text = str(reply.get("text", ""))
        finish = reply.get("finish_reason", "stop")
        if max_tokens is not None and _count_tokens(text) > max_tokens:
            text = " ".join(text.split()[:max_tokens])
            finish = "length"
        return ModelCall(
            text=text,
            usage=Usage(input_tokens=_count_tokens(prompt), output_tokens=_count_tokens(text)),
            latency_s=0.0,
            finish_reason=finish,
            tool_calls=list(reply.get("tool_calls", [])),
            reasoning=reply.get("reasoning"),
        )

    def complete(
        self,
        prompt: str,
        *,
        stop: list[str] | None = None,
        grammar: str | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """Return the next scripted reply for a completion prompt (cut at the first stop string)."""
        request = {"stop": stop, "grammar": grammar, "max_tokens": max_tokens}
        call = self._call(prompt, max_tokens, request)
        for s in stop or []:
            if s in call.text:
                call.text = call.text.split(s, 1)[0]
        return call

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """Return the next scripted reply; the recorded prompt is the messages joined by role."""
        prompt = "\n".join(f"{m['role']}: {m.get('content') or ''}" for m in messages)
        request = {"tools": tools, "max_tokens": max_tokens}
        call = self._call(prompt, max_tokens, request)
        if not tools:
            call.tool_calls = []
        return call
