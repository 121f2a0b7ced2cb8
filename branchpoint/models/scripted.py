"""A scripted, deterministic model for unit tests: replies come from a list or a function."""

from __future__ import annotations

import copy
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

    `responder` computes the reply from the request: the prompt, and (when it takes the keyword
    `request=`) the call's options — stop, grammar, tools, max_tokens and the sampling settings
    temperature, top_p, seed — so replies are a function of the request, whatever the order in
    which concurrent executions call. `replies` are returned in order (cycling when `cycle` is
    set) per client view: `with_seed` / `with_sampling` give a view with its own position (the
    runner and the fork engine take one per execution and per branch), so concurrent executions
    each get the script from its start and two identical fork studies give identical records.
    `fail_first` raises `TransportError` for the first N calls (over all views), to exercise the
    runner's handling of transport faults.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | None = None,
        *,
        responder: Callable[..., Reply] | None = None,  # fn(prompt) or fn(prompt, request=...)
        cycle: bool = False,
        fail_first: int = 0,
        name: str = "scripted",
    ) -> None:
        if (replies is None) == (responder is None):
            raise ValueError("ScriptedModel needs exactly one of `replies` or `responder`")
        self.name = name
        self._replies = list(replies or [])
        self._responder = responder
        self._responder_wants_request = responder is not None and ("request" in inspect.signature(responder).parameters)
        self._cycle = cycle
        self._fail_first = fail_first
        self.prompts: list[str] = []
        self.requests: list[dict[str, Any]] = []  # per answered call: stop, grammar, tools, max_tokens, sampling
        self.calls = 0
        self._lock = threading.Lock()  # forks run branches concurrently on one model
        self._root: ScriptedModel = self
        self._position = 0  # the next list reply of this view
        self.sampling: dict[str, Any] = {"temperature": None, "top_p": None, "seed": None}
        self.request_log: Any = None

    def _view(self, **changes: Any) -> ScriptedModel:
        view = copy.copy(self)
        view._position = 0
        for key, value in changes.items():
            setattr(view, key, value)
        return view

    def with_seed(self, seed: int | None) -> ScriptedModel:
        """A view that sends `seed` with its requests, with its own position in `replies`."""
        return self.with_sampling(seed=seed)

    def with_sampling(
        self, *, temperature: float | None = None, top_p: float | None = None, seed: int | None = None
    ) -> ScriptedModel:
        """A view with these sampling settings in its requests (None keeps the current one) and its
        own position in `replies`; prompts, requests and call counts are kept on the original."""
        new = dict(self.sampling)
        new.update({k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("seed", seed)) if v is not None})
        return self._view(sampling=new)

    def with_request_log(self, request_log: Any) -> ScriptedModel:
        """A view that logs every request it is given to `request_log` (a `RequestLog`)."""
        return self._view(request_log=request_log)

    def _next(self, prompt: str, request: dict[str, Any]) -> dict[str, Any]:
        request = {**request, **self.sampling}
        with self._root._lock:
            reply = self._root._answer(prompt, request, self._position)
            self._position += 1
        return reply

    def _answer(self, prompt: str, request: dict[str, Any], position: int) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self._fail_first:
            raise TransportError(f"scripted transport fault {self.calls}/{self._fail_first}")
        self.prompts.append(prompt)
        self.requests.append(request)
        if self._responder is not None:
            reply = (
                self._responder(prompt, request=request) if self._responder_wants_request else self._responder(prompt)
            )
        else:
            idx = position
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
        if self.request_log is not None:
            self.request_log.write("completions", {"prompt": prompt, **request, **self.sampling})
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
        stop: list[str] | None = None,
    ) -> ModelCall:
        """Return the next scripted reply; the recorded prompt is the messages joined by role. A
        reply is cut at the first `stop` string, which is left out (as OpenAI and llama.cpp do)."""
        prompt = "\n".join(f"{m['role']}: {m.get('content') or ''}" for m in messages)
        request: dict[str, Any] = {"tools": tools, "max_tokens": max_tokens}
        if stop:
            request["stop"] = stop
        if self.request_log is not None:
            self.request_log.write("chat", {"messages": messages, **request, **self.sampling})
        call = self._call(prompt, max_tokens, request)
        if not tools:
            call.tool_calls = []
        cut = [i for i in (call.text.find(s) for s in stop or [] if s) if i >= 0]
        if cut:
            call.text, call.finish_reason = call.text[: min(cut)], "stop"
        return call

    async def acomplete(
        self,
        prompt: str,
        *,
        stop: list[str] | None = None,
        grammar: str | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """`complete` as a coroutine (the reply is computed at once: nothing to wait for)."""
        return self.complete(prompt, stop=stop, grammar=grammar, max_tokens=max_tokens)

    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> ModelCall:
        """`chat` as a coroutine (the reply is computed at once: nothing to wait for)."""
        return self.chat(messages, tools=tools, max_tokens=max_tokens, stop=stop)
