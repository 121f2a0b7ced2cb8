"""Policies: the `decide` node of the agent, registered by name.

A policy is a LangGraph node `(state, runtime) -> update` that reads the state, makes (usually)
one model call, and writes the pending action with `apply_decision`. The built-in policies are
`async def` nodes that await the model (`models.call.acomplete` / `achat`), so hundreds of
executions share one event loop; a plain (blocking) function works too: LangGraph runs it in
the loop's thread pool, and its forced answer runs there as well. Each policy also says how
to force a final answer when the search budget is spent; by default that is the policy's own node
run with no search tool offered, so the forced answer uses the policy's own protocol (endpoint,
prompt, parser). Register one with `@policy("name")` (kind `policy` of `branchpoint.registry`,
so plug-ins add policies too), or name any module-level function in a spec as
`package.module:function` (imported with the spec's folder and the working directory on the
import path).

Prompts are built from the state only (`transcript`, `evidence`, `history`: see
`branchpoint.agents.transcript`), never from `steps`, so a fork branch sends the request its
parent would have sent at the checkpoint.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from langgraph.runtime import Runtime

from branchpoint.agents import prompts
from branchpoint.agents.budget import may_search
from branchpoint.agents.decision_logprobs import with_decision_logprobs
from branchpoint.agents.protocols import (
    TAGGED_STOPS,
    Decision,
    close_tagged_reply,
    decision_grammar,
    parse_json_decision,
    parse_tagged,
    parse_tool_call,
)
from branchpoint.agents.state import AgentContext, AgentState, Pending
from branchpoint.agents.steps import as_state, model_step, relabeled
from branchpoint.agents.transcript import model_turn
from branchpoint.errors import InputError
from branchpoint.models.call import ModelCall, achat, acomplete
from branchpoint.registry import REGISTRY
from branchpoint.registry_kinds import Kind
from branchpoint.tools.search import SEARCH_TOOL_SCHEMA
from branchpoint.traces import BOUNDARY_PENDING


class DecideNode(Protocol):
    """A policy's decide node: LangGraph passes the context by the parameter name `runtime`. An
    `async def` node returns the update from a coroutine; a plain function returns it directly."""

    def __call__(self, state: AgentState, runtime: Runtime[AgentContext]) -> Any: ...


#: The typed handle of the registry kind: `REGISTRY.get(POLICY, name).obj` is a `DecideNode`.
POLICY: Kind[DecideNode] = Kind("policy")

#: How a policy answers when it may not search: a coroutine function or a plain function.
ForceAnswer = Callable[[AgentState, AgentContext], "Decision | Awaitable[Decision]"]

T = TypeVar("T")
_BLOCKING = threading.local()
#: Loops a forked child inherited from its parent, kept so that no finaliser closes them: they
#: share their epoll instance with the parent's loop (see `run_blocking`). A child made by
#: multiprocessing ends with `os._exit`, so they are never closed at exit either.
_INHERITED_LOOPS: list[asyncio.AbstractEventLoop] = []


def run_blocking(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` from blocking code (no event loop running in this thread), on this
    thread's own loop, kept for the next call: for callers outside the runner, such as the
    simulator's truth enumeration, that call a policy directly.

    The loop belongs to the process that made it: a child forked after a run (a `--processes`
    worker of a process that ran before, e.g. a notebook) makes its own, since the inherited one
    shares its epoll instance and self-pipe with the parent and would wait forever. The child
    keeps the inherited loop referenced and never closes it: closing it (as its finaliser does
    once nothing refers to it) removes the self-pipe from the epoll instance the parent still
    uses, and the parent's loop would then sleep through every wake-up from a thread (the run's
    record writer), which hung the parent's next run."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_blocking called on a running event loop: await the coroutine instead")
    loop = getattr(_BLOCKING, "loop", None)
    if loop is None or loop.is_closed() or getattr(_BLOCKING, "pid", None) != os.getpid():
        if loop is not None and not loop.is_closed():
            _INHERITED_LOOPS.append(loop)  # a parent's: never closed here (see above)
        loop = _BLOCKING.loop = asyncio.new_event_loop()
        _BLOCKING.pid = os.getpid()
    return loop.run_until_complete(awaitable)


def loop_running() -> bool:
    """Whether an event loop runs in this thread (a coroutine may be awaited here)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def blocking_or_awaitable(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """A decision helper written as a coroutine function, callable from both kinds of policy: on
    an event loop (an `async def` policy) the call returns the coroutine to await; from blocking
    code (a plain-function policy, which LangGraph runs in a worker thread, or the simulator's
    truth) it returns the result, awaited on that thread's own loop (`run_blocking`).
    `coroutine_function(helper)` is the coroutine function itself."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        awaitable: Awaitable[Any] = fn(*args, **kwargs)
        return awaitable if loop_running() else run_blocking(awaitable)

    call.coroutine_function = fn  # type: ignore[attr-defined]
    return call


def coroutine_function(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """The coroutine function behind `fn` (itself, or a `blocking_or_awaitable` helper's), or
    None for a plain function."""
    inner = getattr(fn, "coroutine_function", fn)
    return inner if inspect.iscoroutinefunction(inner) else None


async def in_executor(fn: Callable[..., T], *args: Any) -> T:
    """A blocking function run in the loop's thread pool with the caller's context variables
    (the execution id of request logs), as LangGraph runs a plain node of an async graph."""
    ctx = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(ctx.run, fn, *args))


@dataclass(frozen=True)
class Policy:
    """A registered policy: its decide node (`node`, async or plain) and how it answers when it
    may not search again (`answer`, async or plain). `decide` / `force_answer` call them from
    blocking code; the graph awaits `node` and `aforce_answer`."""

    name: str
    node: DecideNode
    answer: ForceAnswer

    def decide(self, state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        """The decide node's update, from blocking code (see `run_blocking`)."""
        node = coroutine_function(self.node)
        if node is not None:
            result: dict[str, Any] = run_blocking(node(state, runtime))
            return result
        update: dict[str, Any] = self.node(state, runtime)
        return update

    def force_answer(self, state: AgentState, ctx: AgentContext) -> Decision:
        """The forced answer, from blocking code (see `run_blocking`)."""
        return run_blocking(self.aforce_answer(state, ctx))

    async def aforce_answer(self, state: AgentState, ctx: AgentContext) -> Decision:
        """The forced answer on the running loop; a plain function runs in its thread pool."""
        answer = coroutine_function(self.answer)
        if answer is not None:
            decision: Decision = await answer(state, ctx)
            return decision
        result = await in_executor(self.answer, state, ctx)
        if inspect.isawaitable(result):  # a plain function that returns a coroutine
            result = await result
        return result


def policy(name: str, *, force_answer: ForceAnswer | None = None) -> Callable[[DecideNode], DecideNode]:
    """Register a decide node as the policy `name`; its forced answer defaults to the node itself
    run with no search tool offered (`own_protocol_force_answer`)."""

    def register(fn: DecideNode) -> DecideNode:
        REGISTRY.add("policy", name, fn, force_answer=force_answer)
        return fn

    return register


def own_protocol_force_answer(decide: DecideNode) -> ForceAnswer:
    """A forced answer in the policy's own protocol: its decide node, run on the same state with
    no search tool offered (so `ctx.offers_search` is False); its steps become `forced_answer`
    steps. A node that asks to search even so (it ignores `offers_search`) gets the chat forced
    answer after its own steps. An `async def` node is awaited; a plain one runs in the loop's
    thread pool (it may block on its model calls)."""

    async def force(state: AgentState, ctx: AgentContext) -> Decision:
        runtime = Runtime(context=dataclasses.replace(ctx, search=None))
        node = coroutine_function(decide)
        if node is not None:
            update = await node(state, runtime)
        else:
            update = await in_executor(decide, state, runtime)
        steps = [relabeled(step, "forced_answer") for step in update.get("steps") or []]
        status = update.get("status", "ok")
        transcript = list(update.get("transcript") or [])
        if status != "ok":
            return Decision("answer", "", [], status=status, steps=steps, transcript=transcript)
        answer = decided_answer(update)
        if answer is None:
            fallback: Decision = await chat_force_answer(state, ctx)
            steps += decision_steps("forced_answer", fallback)
            return dataclasses.replace(fallback, calls=[], steps=steps, transcript=transcript)
        return Decision("answer", answer, [], steps=steps, transcript=transcript)

    return force


def resolve_policy(name: str, search_paths: Sequence[str | Path] = ()) -> Policy:
    """The policy registered as `name`, or a node function named `package.module:function`
    (imported with `search_paths` and the working directory on the import path); its forced
    answer is the one it was registered with, else its own protocol's."""
    try:
        entry = REGISTRY.get(POLICY, name, search_paths)
    except InputError as exc:
        raise InputError(f"agent.policy: {exc}") from None
    if not callable(entry.obj):
        raise InputError(f"agent.policy: {name!r} is not a function (a policy is a decide node)")
    check_node_signature(name, entry.obj)
    force = entry.meta.get("force_answer") or own_protocol_force_answer(entry.obj)
    return Policy(entry.name, entry.obj, force)


def check_node_signature(name: str, fn: Any) -> None:
    """A policy must be a Python function (or coroutine function) of the state, and optionally
    the runtime: `def decide(state, runtime) -> dict`. Anything else (a builtin such as
    `os:getcwd`, a function of no arguments) is an InputError before any work."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", None)  # noqa: B004
    if not (inspect.isfunction(target) or inspect.ismethod(target) or isinstance(fn, functools.partial)):
        raise InputError(
            f"agent.policy: {name!r} is a {type(fn).__name__}, not a Python function of (state, runtime) "
            "returning a state update (a policy is a decide node)"
        )
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        try:
            inspect.signature(fn).bind(None)
        except TypeError:
            raise InputError(
                f"agent.policy: {name!r} does not take (state) or (state, runtime) arguments "
                "(a policy is a decide node: def decide(state, runtime) -> dict)"
            ) from None
    except ValueError:
        raise InputError(f"agent.policy: {name!r}: its arguments cannot be read (a policy is a decide node)") from None


def decided_answer(update: Mapping[str, Any]) -> str | None:
    """The answer a decide node's update gives, or None when it gives none: its `final_answer`
    (what `apply_decision` writes), or a pending answer (a node that writes `pending` itself,
    which the graph's `answer` node then finalises)."""
    if update.get("final_answer") is not None:
        return str(update["final_answer"])
    pending = update.get("pending") or {}
    return pending.get("text") if pending.get("action") == "answer" else None


def decision_steps(kind: str, decision: Decision) -> list[dict[str, Any]]:
    """The trace steps of a decision's calls: the last one carries the parsed action and text."""
    if decision.steps is not None:
        return [relabeled(step, kind) for step in decision.steps]
    ok = decision.status == "ok"
    steps = []
    for i, call in enumerate(decision.calls):
        last = ok and i == len(decision.calls) - 1
        steps.append(
            as_state(model_step(kind, call, decision.action if last else None, decision.text if last else call.text))
        )
    return steps


def forced_answer_steps(decision: Decision) -> list[dict[str, Any]]:
    """The `forced_answer` steps of a policy's forced final answer (parsed answer and raw reply)."""
    return decision_steps("forced_answer", decision)


def apply_decision(state: AgentState, decision: Decision, ctx: AgentContext) -> dict[str, Any]:
    """The state update for a decision: the new trace steps (appended), the pending action (with
    the model turn that made it, for the transcript), any transcript entries, and the boundary.

    An answer is final at once (`final_answer`, nothing pending), so the graph ends after this
    node: one superstep and one checkpoint fewer per execution than finishing it in `answer`.
    A SEARCH that may run (tool offered, cap not reached) marks the `pending_query` boundary;
    otherwise the graph goes to `answer`, which forces a final answer.
    """
    if inspect.isawaitable(decision):
        raise TypeError(
            "apply_decision got a coroutine: the decision helpers (fewshot_decision, ...) are async; "
            "make the policy `async def` and await them, or call them through run_blocking(...)"
        )
    update: dict[str, Any] = {"steps": decision_steps("decide", decision)}
    if decision.transcript:
        update["transcript"] = list(decision.transcript)
    if decision.status != "ok":
        return {**update, "status": decision.status, "pending": None, "boundary": None}
    if decision.action == "answer":  # final now: the graph ends after this node (no `answer` step)
        return {**update, "final_answer": decision.text, "pending": None, "boundary": None}
    runs = decision.action == "search" and may_search(state, ctx)
    pending = Pending(action=decision.action, text=decision.text)
    if decision.calls:
        pending["turn"] = model_turn(decision.calls[-1], f"call_{int(state.get('searches', 0))}")
    return {**update, "pending": pending, "boundary": BOUNDARY_PENDING if runs else None}


# --- completion style (base models): few-shot JSON decisions, grammar as the fallback ---------


@blocking_or_awaitable
async def fewshot_decision(
    state: AgentState, ctx: AgentContext, allow_search: bool, *, offered: bool | None = None
) -> Decision:
    """One unconstrained few-shot call; if it does not parse, retry with a GBNF grammar.

    `offered` says whether the prompt shows the search examples (default: `allow_search`). A
    forced answer in a search condition keeps the search prompt, so the server's prompt cache
    is reused, and lets the grammar allow only an answer.
    """
    offered = allow_search if offered is None else offered
    prompt = prompts.fewshot_prompt(
        state["question"],
        state.get("evidence", []),
        offered,
        ctx.evidence_words,
        state.get("history"),
        prompts.fewshot_budget_line(state, offered),
    )
    limit = ctx.max_tokens if allow_search else ctx.answer_max_tokens
    calls = []
    if allow_search or not offered:
        call = await acomplete(ctx.model, prompt, stop=["\n"], max_tokens=limit)
        calls.append(with_decision_logprobs(call, "constrained"))
        parsed = parse_json_decision(calls[-1].text, allow_search)
    else:
        parsed = None
    for _ in range(ctx.malformed_retries + (0 if calls else 1)):
        if parsed:
            break
        grammar = decision_grammar(allow_search)
        call = await acomplete(ctx.model, prompt, stop=["\n"], grammar=grammar, max_tokens=limit)
        calls.append(with_decision_logprobs(call, "constrained"))
        parsed = parse_json_decision(calls[-1].text, allow_search)
    if not parsed:
        return Decision.failed(calls)
    return Decision(parsed[0], parsed[1], calls)


@blocking_or_awaitable
async def fewshot_force_answer(state: AgentState, ctx: AgentContext) -> Decision:
    """Forced final answer for completion-style policies: the same prompt, answer-only grammar."""
    decision: Decision = await fewshot_decision(state, ctx, allow_search=False, offered=ctx.search is not None)
    return decision


@policy("constrained", force_answer=fewshot_force_answer)
async def constrained(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Base models on the completion endpoint: few-shot JSON decision, grammar when it fails to parse."""
    ctx = runtime.context
    return apply_decision(state, await fewshot_decision(state, ctx, allow_search=may_search(state, ctx)), ctx)


# --- chat style (instruct / reasoning models): native tool calls or tagged text --------------


async def _chat_force_answer(state: AgentState, ctx: AgentContext, *, tools: bool) -> Decision:
    messages = prompts.chat_messages(
        state, tools=tools, allow_search=False, evidence_words=ctx.evidence_words, variant=ctx.prompt
    )
    messages.append({"role": "user", "content": prompts.FORCE_ANSWER})
    call = await achat(ctx.model, messages, max_tokens=ctx.answer_max_tokens)
    parsed = parse_tool_call(call, allow_search=False)
    if not parsed or (call.finish_reason == "length" and not call.text.strip()):
        return Decision.failed([call])
    return Decision("answer", parsed[1], [call])


@blocking_or_awaitable
async def chat_force_answer(state: AgentState, ctx: AgentContext) -> Decision:
    """Forced final answer for tool-call policies: the transcript plus 'answer now', no tool offered."""
    return await _chat_force_answer(state, ctx, tools=True)


@blocking_or_awaitable
async def tagged_force_answer(state: AgentState, ctx: AgentContext) -> Decision:
    """Forced final answer for the tagged policy: its own tagged transcript plus 'answer now';
    under the `searchr1` protocol, the sequence continued from an opened `<answer>`."""
    if ctx.protocol == "searchr1":
        return await searchr1_force_answer(state, ctx)
    return await _chat_force_answer(state, ctx, tools=False)


async def searchr1_force_answer(state: AgentState, ctx: AgentContext) -> Decision:
    """The `searchr1` forced answer: the rollout's sequence with `<answer>` opened at its end, so
    the model writes the answer and stops at `</answer>` (Search-R1's last rollout has no search
    either: it executes none after the last turn)."""
    messages = prompts.searchr1_messages(state, forced=True)
    call = await tagged_call(ctx, messages, ctx.answer_max_tokens, stops=("</answer>",))
    answer = call.text.split("</answer>", 1)[0].strip()
    if not answer or (call.finish_reason == "length" and "</answer>" not in call.text):
        return Decision.failed([call])
    return Decision("answer", answer, [call])


async def tagged_call(
    ctx: AgentContext, messages: list[dict[str, Any]], max_tokens: int, stops: Sequence[str] = TAGGED_STOPS
) -> ModelCall:
    """One tagged-text call: it stops at the closing tags, and its text is the turn as the
    sequence keeps it (`close_tagged_reply`: cut at the first closing tag, the tag put back where
    the server left the stop string out)."""
    call = await achat(ctx.model, messages, max_tokens=max_tokens, stop=list(stops))
    return dataclasses.replace(call, text=close_tagged_reply(call.text, call.finish_reason))


@blocking_or_awaitable
async def self_evaluation(state: AgentState, ctx: AgentContext) -> Decision:
    """The `self_eval` variant's first call. ABSTAIN gives an answer that abstains (with the
    model's reason); otherwise the returned decision has empty text: the policy goes on, and the
    call's cost is kept. Either way the verdict goes into the transcript, so the call is made
    once per execution (a branch from a later state does not make it again)."""
    messages = prompts.chat_messages(state, tools=True, allow_search=False, evidence_words=ctx.evidence_words)
    messages.append({"role": "user", "content": prompts.SELF_EVAL_PROMPT})
    call = await achat(ctx.model, messages, max_tokens=ctx.answer_max_tokens)
    text = call.text.strip()
    entry = [{"kind": "self_eval", "text": call.text}]
    if text.upper().startswith("ABSTAIN"):
        reason = text.split(":", 1)[1].strip() if ":" in text else ""
        return Decision("answer", f"I don't know: {reason}" if reason else "I don't know.", [call], transcript=entry)
    return Decision("answer", "", [call], transcript=entry)


async def _chat_decision(state: AgentState, ctx: AgentContext, *, tools: bool, allow_search: bool) -> Decision:
    calls: list[ModelCall] = []
    transcript: list[dict[str, Any]] = []
    if ctx.prompt == "self_eval" and not state.get("transcript"):  # the first decision of the execution
        verdict: Decision = await self_evaluation(state, ctx)
        if verdict.text:
            return verdict
        calls += verdict.calls
        transcript += verdict.transcript
    if not tools and ctx.protocol == "searchr1":
        messages = prompts.searchr1_messages(state)
    else:
        messages = prompts.chat_messages(
            state, tools=tools, allow_search=allow_search, evidence_words=ctx.evidence_words, variant=ctx.prompt
        )
    for _ in range(1 + ctx.malformed_retries):
        if tools:
            call = await achat(
                ctx.model, messages, tools=[SEARCH_TOOL_SCHEMA] if allow_search else None, max_tokens=ctx.max_tokens
            )
            calls.append(with_decision_logprobs(call, "native"))
            parsed = parse_tool_call(calls[-1], allow_search)
            complete = calls[-1].finish_reason != "length"
        else:
            calls.append(with_decision_logprobs(await tagged_call(ctx, messages, ctx.max_tokens), "tagged"))
            parsed = parse_tagged(calls[-1].text, allow_search)
            complete = True  # a closed tag is a whole decision, even if the model wrote on to max_tokens
        if parsed and complete:
            return Decision(parsed[0], parsed[1], calls, transcript=transcript)
    failed = Decision.failed(calls)
    failed.transcript = transcript
    return failed


@policy("native", force_answer=chat_force_answer)
async def native(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The model decides through native OpenAI tool calls (the search tool is offered if allowed)."""
    ctx = runtime.context
    return apply_decision(state, await _chat_decision(state, ctx, tools=True, allow_search=may_search(state, ctx)), ctx)


@policy("tagged", force_answer=tagged_force_answer)
async def tagged(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The model decides in tagged text, Search-R1 style: `<search>q</search>` or `<answer>a</answer>`,
    stopped at the closing tag; `agent.protocol` says how the transcript is sent (`chat`: a
    message per turn; `searchr1`: Search-R1's prompt and one continued sequence)."""
    ctx = runtime.context
    return apply_decision(
        state, await _chat_decision(state, ctx, tools=False, allow_search=may_search(state, ctx)), ctx
    )


@policy("no_search", force_answer=chat_force_answer)
async def no_search(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The paper's base condition: the search tool is not offered; the model answers directly."""
    ctx = runtime.context
    return apply_decision(state, await _chat_decision(state, ctx, tools=True, allow_search=False), ctx)
