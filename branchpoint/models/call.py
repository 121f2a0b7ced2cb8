"""The result of one model call and the client interface every backend implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from branchpoint.traces import Usage


class TransportError(RuntimeError):
    """The server could not be reached or kept failing (after retries): the execution is incomplete."""


@dataclass
class ModelCall:
    """What one model call returned, with its cost: usage as reported, latency, finish reason."""

    text: str
    usage: Usage
    latency_s: float
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None


class ModelClient(Protocol):
    """A model behind either endpoint style; implemented by the OpenAI-compatible and scripted clients."""

    name: str

    def with_seed(self, seed: int | None) -> ModelClient:
        """The same model and server with another sampling seed (repeated forked executions)."""
        ...

    def with_sampling(
        self, *, temperature: float | None = None, top_p: float | None = None, seed: int | None = None
    ) -> ModelClient:
        """The same model and server sampling with these settings (None keeps the current one):
        fork branches and replays are independent draws, each with its own recorded seed."""
        ...

    def complete(
        self,
        prompt: str,
        *,
        stop: list[str] | None = None,
        grammar: str | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """Text completion (base models); `grammar` (GBNF) constrains the output where supported."""
        ...

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """Chat completion; `tools` are OpenAI function-tool schemas offered to the model."""
        ...
