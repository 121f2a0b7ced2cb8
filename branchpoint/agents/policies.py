"""Policies: the `decide` node of the agent, registered by name.

A policy is a LangGraph node `(state, runtime) -> update` that reads the state, makes (usually)
one model call, and writes the pending action with `apply_decision`. Each policy also says how
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

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from langgraph.runtime import Runtime

from branchpoint.agents import prompts
from branchpoint.agents.budget import may_search
from branchpoint.agents.protocols import (
    Decision,
    decision_grammar,
    parse_json_decision,
    parse_tagged,
    parse_tool_call,
)
from branchpoint.agents.state import AgentContext, AgentState, Pending
from branchpoint.agents.steps import as_state, model_step, relabeled
from branchpoint.agents.transcript import model_turn
from branchpoint.errors import InputError
from branchpoint.models.call import ModelCall
from branchpoint.registry import REGISTRY
from branchpoint.tools.search import SEARCH_TOOL_SCHEMA
from branchpoint.traces import BOUNDARY_PENDING


class DecideNode(Protocol):
    """A policy's decide node: LangGraph passes the context by the parameter name `runtime`."""

    def __call__(self, state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]: ...


ForceAnswer = Callable[[AgentState, AgentContext], Decision]


@dataclass(frozen=True)
class Policy:
    """A registered policy: its decide node and how it answers when it may not search again."""

    name: str
    decide: DecideNode
    force_answer: ForceAnswer


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
    answer after its own steps."""

    def force(state: AgentState, ctx: AgentContext) -> Decision:
        update = decide(state, Runtime(context=dataclasses.replace(ctx, search=None)))
        steps = [relabeled(step, "forced_answer") for step in update.get("steps") or []]
        pending = update.get("pending") or {}
        status = update.get("status", "ok")
        transcript = list(update.get("transcript") or [])
        if status != "ok":
            return Decision("answer", "", [], status=status, steps=steps, transcript=transcript)
        if pending.get("action") != "answer":
            fallback = chat_force_answer(state, ctx)
            steps += decision_steps("forced_answer", fallback)
            return dataclasses.replace(fallback, calls=[], steps=steps, transcript=transcript)
        return Decision("answer", pending["text"], [], steps=steps, transcript=transcript)

    return force


def resolve_policy(name: str, search_paths: Sequence[str | Path] = ()) -> Policy:
    """The policy registered as `name`, or a node function named `package.module:function`
    (imported with `search_paths` and the working directory on the import path); its forced
    answer is the one it was registered with, else its own protocol's."""
    try:
        entry = REGISTRY.get("policy", name, search_paths)
    except InputError as exc:
        raise InputError(f"agent.policy: {exc}") from None
    if not callable(entry.obj):
        raise InputError(f"agent.policy: {name!r} is not a function (a policy is a decide node)")
    force = entry.meta.get("force_answer") or own_protocol_force_answer(entry.obj)
    return Policy(entry.name, entry.obj, force)


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

    A SEARCH that may run (tool offered, cap not reached) marks the `pending_query` boundary;
    otherwise the graph goes to `answer`, which forces a final answer.
    """
    update: dict[str, Any] = {"steps": decision_steps("decide", decision)}
    if decision.transcript:
        update["transcript"] = list(decision.transcript)
    if decision.status != "ok":
        return {**update, "status": decision.status, "pending": None, "boundary": None}
    runs = decision.action == "search" and may_search(state, ctx)
    pending = Pending(action=decision.action, text=decision.text)
    if decision.calls:
        pending["turn"] = model_turn(decision.calls[-1], f"call_{int(state.get('searches', 0))}")
    return {**update, "pending": pending, "boundary": BOUNDARY_PENDING if runs else None}


# --- completion style (base models): few-shot JSON decisions, grammar as the fallback ---------


def fewshot_decision(
    state: AgentState, ctx: AgentContext, allow_search: bool, *, offered: bool | None = None
) -> Decision:
    """One unconstrained few-shot call; if it does not parse, retry with a GBNF grammar.

    `offered` says whether the prompt shows the search examples (default: `allow_search`). A
    forced answer in a search condition keeps the search prompt, so the server's prompt cache
    is reused, and lets the grammar allow only an answer.
    """
    offered = allow_search if offered is None else offered
    prompt = prompts.fewshot_prompt(
        state["question"], state.get("evidence", []), offered, ctx.evidence_words, state.get("history")
    )
    limit = ctx.max_tokens if allow_search else ctx.answer_max_tokens
    calls = []
    if allow_search or not offered:
        calls.append(ctx.model.complete(prompt, stop=["\n"], max_tokens=limit))
        parsed = parse_json_decision(calls[-1].text, allow_search)
    else:
        parsed = None
    for _ in range(ctx.malformed_retries + (0 if calls else 1)):
        if parsed:
            break
        grammar = decision_grammar(allow_search)
        calls.append(ctx.model.complete(prompt, stop=["\n"], grammar=grammar, max_tokens=limit))
        parsed = parse_json_decision(calls[-1].text, allow_search)
    if not parsed:
        return Decision.failed(calls)
    return Decision(parsed[0], parsed[1], calls)


def fewshot_force_answer(state: AgentState, ctx: AgentContext) -> Decision:
    """Forced final answer for completion-style policies: the same prompt, answer-only grammar."""
    return fewshot_decision(state, ctx, allow_search=False, offered=ctx.search is not None)


@policy("constrained", force_answer=fewshot_force_answer)
def constrained(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Base models on the completion endpoint: few-shot JSON decision, grammar when it fails to parse."""
    ctx = runtime.context
    return apply_decision(state, fewshot_decision(state, ctx, allow_search=may_search(state, ctx)), ctx)


# --- chat style (instruct / reasoning models): native tool calls or tagged text --------------


def _chat_force_answer(state: AgentState, ctx: AgentContext, *, tools: bool) -> Decision:
    messages = prompts.chat_messages(
        state, tools=tools, allow_search=False, evidence_words=ctx.evidence_words, variant=ctx.prompt
    )
    messages.append({"role": "user", "content": prompts.FORCE_ANSWER})
    call = ctx.model.chat(messages, max_tokens=ctx.answer_max_tokens)
    parsed = parse_tool_call(call, allow_search=False)
    if not parsed or (call.finish_reason == "length" and not call.text.strip()):
        return Decision.failed([call])
    return Decision("answer", parsed[1], [call])


def chat_force_answer(state: AgentState, ctx: AgentContext) -> Decision:
    """Forced final answer for tool-call policies: the transcript plus 'answer now', no tool offered."""
    return _chat_force_answer(state, ctx, tools=True)


def tagged_force_answer(state: AgentState, ctx: AgentContext) -> Decision:
    """Forced final answer for the tagged policy: its own tagged transcript plus 'answer now'."""
    return _chat_force_answer(state, ctx, tools=False)


def self_evaluation(state: AgentState, ctx: AgentContext) -> Decision:
    """The `self_eval` variant's first call. ABSTAIN gives an answer that abstains (with the
    model's reason); otherwise the returned decision has empty text: the policy goes on, and the
    call's cost is kept. Either way the verdict goes into the transcript, so the call is made
    once per execution (a branch from a later state does not make it again)."""
    messages = prompts.chat_messages(state, tools=True, allow_search=False, evidence_words=ctx.evidence_words)
    messages.append({"role": "user", "content": prompts.SELF_EVAL_PROMPT})
    call = ctx.model.chat(messages, max_tokens=ctx.answer_max_tokens)
    text = call.text.strip()
    entry = [{"kind": "self_eval", "text": call.text}]
    if text.upper().startswith("ABSTAIN"):
        reason = text.split(":", 1)[1].strip() if ":" in text else ""
        return Decision("answer", f"I don't know: {reason}" if reason else "I don't know.", [call], transcript=entry)
    return Decision("answer", "", [call], transcript=entry)


def _chat_decision(state: AgentState, ctx: AgentContext, *, tools: bool, allow_search: bool) -> Decision:
    calls: list[ModelCall] = []
    transcript: list[dict[str, Any]] = []
    if ctx.prompt == "self_eval" and not state.get("transcript"):  # the first decision of the execution
        verdict = self_evaluation(state, ctx)
        if verdict.text:
            return verdict
        calls += verdict.calls
        transcript += verdict.transcript
    messages = prompts.chat_messages(
        state, tools=tools, allow_search=allow_search, evidence_words=ctx.evidence_words, variant=ctx.prompt
    )
    for _ in range(1 + ctx.malformed_retries):
        if tools:
            calls.append(
                ctx.model.chat(
                    messages, tools=[SEARCH_TOOL_SCHEMA] if allow_search else None, max_tokens=ctx.max_tokens
                )
            )
            parsed = parse_tool_call(calls[-1], allow_search)
        else:
            calls.append(ctx.model.chat(messages, max_tokens=ctx.max_tokens))
            parsed = parse_tagged(calls[-1].text, allow_search)
        if parsed and calls[-1].finish_reason != "length":
            return Decision(parsed[0], parsed[1], calls, transcript=transcript)
    failed = Decision.failed(calls)
    failed.transcript = transcript
    return failed


@policy("native", force_answer=chat_force_answer)
def native(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The model decides through native OpenAI tool calls (the search tool is offered if allowed)."""
    ctx = runtime.context
    return apply_decision(state, _chat_decision(state, ctx, tools=True, allow_search=may_search(state, ctx)), ctx)


@policy("tagged", force_answer=tagged_force_answer)
def tagged(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The model decides in tagged text, Search-R1 style: `<search>q</search>` or `<answer>a</answer>`."""
    ctx = runtime.context
    return apply_decision(state, _chat_decision(state, ctx, tools=False, allow_search=may_search(state, ctx)), ctx)


@policy("no_search", force_answer=chat_force_answer)
def no_search(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The paper's base condition: the search tool is not offered; the model answers directly."""
    ctx = runtime.context
    return apply_decision(state, _chat_decision(state, ctx, tools=True, allow_search=False), ctx)
