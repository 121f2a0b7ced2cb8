"""The result of one model call and the client interface every backend implements.

Every client has both call styles: `complete` / `chat` (blocking, for code outside the agent:
LLM judges, negative-evidence generation) and `acomplete` / `achat` (coroutines, what the agent's
policies await on the runner's event loop). The module functions `acomplete` / `achat` call a
client's coroutine when it has one and its blocking method otherwise, so a client written
against the older, blocking-only protocol (a user's, a test double) still serves an agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from branchpoint.models.logprobs import TokenLogprob
from branchpoint.traces import Usage


class TransportError(RuntimeError):
    """The server could not be reached or kept failing (after retries): the execution is incomplete."""


@dataclass
class ModelCall:
    """What one model call returned, with its cost: usage as reported, latency, finish reason,
    and whether the response cache answered it.

    `logprobs`: the generated tokens with their log probabilities, when the request asked for
    them (`model.logprobs`) and the server returned them; a policy reads its decision from them
    into `decision_logprobs` (the compact record its decide step keeps, see
    `branchpoint.agents.decision_logprobs`); the token list itself is not stored."""

    text: str
    usage: Usage
    latency_s: float
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None
    #: True when the response cache answered the call (no request sent), False when it looked
    #: and sent it; None when no cache was asked (off, or a request sampled without a seed).
    cache_hit: bool | None = None
    logprobs: list[TokenLogprob] | None = None
    decision_logprobs: dict[str, Any] | None = None


class BlockingModelClient(Protocol):
    """The blocking calls of a model client: what code outside the agent needs (judges, corpus
    generation) and what a client written before the coroutines were added has; the agent's
    helpers (`acomplete`, `achat` below) accept such a client too."""

    name: str

    def with_seed(self, seed: int | None) -> BlockingModelClient:
        """The same model and server with another sampling seed (repeated forked executions)."""
        ...

    def with_sampling(
        self, *, temperature: float | None = None, top_p: float | None = None, seed: int | None = None
    ) -> BlockingModelClient:
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
        stop: list[str] | None = None,
    ) -> ModelCall:
        """Chat completion; `tools` are OpenAI function-tool schemas offered to the model; `stop`
        strings end the reply (kept in its text where the server can keep them, see the clients).
        A final `assistant` message is continued where the server can continue one."""
        ...


class ModelClient(BlockingModelClient, Protocol):
    """A model behind either endpoint style, with blocking and async calls; implemented by the
    OpenAI-compatible, LangChain and scripted clients."""

    def with_seed(self, seed: int | None) -> ModelClient:
        """The same model and server with another sampling seed (repeated forked executions)."""
        ...

    def with_sampling(
        self, *, temperature: float | None = None, top_p: float | None = None, seed: int | None = None
    ) -> ModelClient:
        """The same model and server sampling with these settings (None keeps the current one)."""
        ...

    async def acomplete(
        self,
        prompt: str,
        *,
        stop: list[str] | None = None,
        grammar: str | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """`complete` as a coroutine: the same request, awaited on the caller's event loop."""
        ...

    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> ModelCall:
        """`chat` as a coroutine: the same request, awaited on the caller's event loop."""
        ...


async def acomplete(client: Any, prompt: str, **kwargs: Any) -> ModelCall:
    """`client.acomplete(prompt, ...)` where the client has it, else its blocking `complete` (a
    client without coroutines: it runs on the loop, as it would have run in a worker thread)."""
    call = getattr(client, "acomplete", None)
    if call is None:
        result: ModelCall = client.complete(prompt, **kwargs)
        return result
    awaited: ModelCall = await call(prompt, **kwargs)
    return awaited


async def achat(client: Any, messages: list[dict[str, Any]], **kwargs: Any) -> ModelCall:
    """`client.achat(messages, ...)` where the client has it, else its blocking `chat`."""
    call = getattr(client, "achat", None)
    if call is None:
        result: ModelCall = client.chat(messages, **kwargs)
        return result
    awaited: ModelCall = await call(messages, **kwargs)
    return awaited
