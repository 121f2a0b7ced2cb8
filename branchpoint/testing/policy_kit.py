"""Conformance of a policy: run in the agent graph as the runner runs it, on a scripted model."""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

from langgraph.runtime import Runtime

from branchpoint.agents import AgentContext, AgentState, Decision, Policy, build_graph, initial_state, recursion_limit
from branchpoint.agents.policies import own_protocol_force_answer, resolve_policy
from branchpoint.errors import InputError
from branchpoint.models import ScriptedModel
from branchpoint.models.scripted import Reply
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.testing.demo import demo_passages, demo_question
from branchpoint.tools import SearchTool
from branchpoint.traces import RetrievedDoc, Status

#: What the kit's model answers after a search, and what it searches for.
ANSWER, QUERY = "Canberra", "capital of Australia"


class KeywordSource:
    """The demo corpus searched by shared words (no encoder): what the kit's policies search."""

    def __init__(self, name: str = "demo") -> None:
        self.name = name
        self.passages = demo_passages()

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """The k passages sharing most words with `query`, best first (ties: corpus order)."""
        words = set(re.findall(r"\w+", query.lower()))
        scored = [(len(words & set(re.findall(r"\w+", p.contents.lower()))), i) for i, p in enumerate(self.passages)]
        best = sorted(scored, key=lambda s: (-s[0], s[1]))[:k]
        return [
            RetrievedDoc(
                doc_id=self.passages[i].doc_id,
                score=float(s),
                text=self.passages[i].text,
                title=self.passages[i].title or None,
                source=self.name,
            )
            for s, i in best
        ]


def protocol_reply(prompt: Any, request: dict[str, Any]) -> Reply:
    """A reply in the protocol the request asks for (tool calls, the constrained JSON grammar,
    search / answer tags, plain text): search first, answer once the evidence names the answer."""
    searched = ANSWER in str(prompt)
    if request.get("tools"):
        if searched:
            return {"text": ANSWER}
        return {"text": "", "tool_calls": [{"name": "search", "args": {"query": QUERY}}]}
    if request.get("grammar"):
        return f'answer", "text": "{ANSWER}"}}' if searched else f'search", "text": "{QUERY}"}}'
    if request.get("stop"):
        return f"<answer>{ANSWER}</answer>" if searched else f"<search>{QUERY}</search>"
    return ANSWER


def kit_model() -> ScriptedModel:
    """The kit's default model: `protocol_reply` to every request."""
    return ScriptedModel(responder=protocol_reply)


def _fail(name: str, problem: str) -> AssertionError:
    return AssertionError(f'policy "{name}": {problem}')


def as_policy(policy: str | Policy | Callable[..., Any], search_paths: Sequence[str | Path] = ()) -> Policy:
    """A policy name (or `package.module:function`), a `Policy`, or a decide node, as the
    `Policy` the graph runs; one that does not fit the policy contract is an AssertionError."""
    if isinstance(policy, Policy):
        return policy
    try:
        if isinstance(policy, str):
            return resolve_policy(policy, search_paths)
        name = getattr(policy, "__name__", type(policy).__name__)
        REGISTRY.check_component("policy", name, policy, {}, f"{getattr(policy, '__module__', '?')}:{name}")
    except (RegistryError, InputError) as exc:
        raise AssertionError(str(exc)) from None
    return Policy(name, policy, own_protocol_force_answer(policy))


def _context(model: Any, search: bool, cap: int) -> AgentContext:
    tool = SearchTool({"demo": KeywordSource()}, "demo", top_k=2) if search else None
    return AgentContext(model=model, search=tool, search_cap=cap)


def check_policy(
    policy: str | Policy | Callable[..., Any],
    *,
    model: Callable[[], Any] = kit_model,
    search_cap: int = 2,
    search_paths: Sequence[str | Path] = (),
) -> dict[str, Any]:
    """Exercise a policy as the runner does and raise AssertionError on a violation.

    `policy` is a registered name or `package.module:function`, a `Policy`, or a decide node.
    `model` makes the model it talks to (default: a scripted model that answers in whichever
    protocol the request asks for, `protocol_reply`; pass your own for another protocol). Checked:

    - the graph runs the demo question to its end within the search cap, with a status of the
      trace contract, and an `ok` execution has a final answer;
    - the decide node returns a state update (a mapping of state channels) and leaves the
      state it is given unchanged (a node returns its update; it does not write the state);
    - it sends the same requests for the same state (prompts come from the state only, so a
      fork branch sends what its parent sent at the checkpoint);
    - its forced answer, with no search tool offered, is an answer.

    Returns the final state of the graph run.
    """
    pol = as_policy(policy, search_paths)
    name, question = pol.name, demo_question()
    start = initial_state(question.id, question.question, "demo")
    try:
        out: dict[str, Any] = asyncio.run(
            build_graph(pol).ainvoke(
                start, {"recursion_limit": recursion_limit(search_cap)}, context=_context(model(), True, search_cap)
            )
        )
    except Exception as exc:  # a policy must say what broke
        raise _fail(name, f"the graph raised {type(exc).__name__}: {exc}") from exc
    status = out.get("status", "ok")
    if status not in get_args(Status):
        raise _fail(name, f'status "{status}" (expected one of {", ".join(get_args(Status))})')
    if out.get("searches", 0) > search_cap:
        raise _fail(name, f"searched {out.get('searches')} times with a search cap of {search_cap}")
    if status == "ok" and not isinstance(out.get("final_answer"), str):
        raise _fail(name, f"an ok execution ended without a final answer (final_answer {out.get('final_answer')!r})")

    requests = []
    for _ in range(2):
        client = model()
        state = copy.deepcopy(start)
        update = pol.decide(state, Runtime(context=_context(client, True, search_cap)))
        if state != start:
            raise _fail(name, "the decide node changed the state it was given (return an update instead)")
        if not isinstance(update, dict):
            raise _fail(name, f"the decide node returned {type(update).__name__}, not a state update (a dict)")
        unknown = sorted(set(update) - set(AgentState.__annotations__))
        if unknown:
            raise _fail(name, f"the decide node's update has keys that are no state channel: {', '.join(unknown)}")
        requests.append([str(p) for p in getattr(client, "prompts", [])])
    if requests[0] != requests[1]:
        raise _fail(name, "the same state gave other requests (build prompts from the state only)")

    forced = pol.force_answer(copy.deepcopy(start), _context(model(), False, search_cap))
    if not isinstance(forced, Decision) or forced.action != "answer":
        got = forced.action if isinstance(forced, Decision) else type(forced).__name__
        raise _fail(name, f"its forced answer (no search tool offered) is {got!r}, not an answer Decision")
    return out
