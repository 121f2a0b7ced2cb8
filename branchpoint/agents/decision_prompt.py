"""The prompt a built-in policy's `decide` node sends at a saved state, built without a model call.

Training data needs the prefix of a state in the model's own format: the chat messages (and the
tools offered) a chat policy sends, or the completion prompt of the few-shot `constrained`
policy. Prompts are a pure function of the checkpointed state (DESIGN, "The agent state
machine"), so the prompt is rebuilt here from the state with the same builders the policies call
(`prompts.chat_messages`, `prompts.searchr1_messages`, `prompts.fewshot_prompt`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from branchpoint.agents import prompts
from branchpoint.tools.search import SEARCH_TOOL_SCHEMA

#: The built-in policies whose prompt is rebuilt as they send it.
KNOWN_POLICIES = ("constrained", "native", "tagged", "no_search")


@dataclass(frozen=True)
class DecisionPrompt:
    """What a policy sends to decide at a state: `format` `chat` (`messages`, `tools`) or
    `completion` (`text`); `policy` is the built-in policy whose prompt builder made it."""

    format: Literal["chat", "completion"]
    policy: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None


def decision_prompt(
    state: Mapping[str, Any],
    *,
    policy: str,
    allow_search: bool,
    evidence_words: int,
    variant: str = "abstention",
    protocol: str = "chat",
) -> DecisionPrompt:
    """The request the `decide` node of `policy` sends at `state` when the search tool is
    `allow_search` (offered and under the cap): the same builders, in the same way, as the
    policies in `policies.py`. A policy of the user's own (`module:function`) builds its own
    prompt, which is not known here: it gets the native tool-call transcript (`policy` says so)."""
    if policy == "constrained":
        text = prompts.fewshot_prompt(
            state["question"], list(state.get("evidence") or []), allow_search, evidence_words, state.get("history")
        )
        return DecisionPrompt("completion", policy, text=text)
    if policy == "tagged":
        if protocol == "searchr1":
            return DecisionPrompt("chat", policy, messages=prompts.searchr1_messages(state))
        messages = prompts.chat_messages(
            state, tools=False, allow_search=allow_search, evidence_words=evidence_words, variant=variant
        )
        return DecisionPrompt("chat", policy, messages=messages)
    used = policy if policy in KNOWN_POLICIES else "native"
    offered = allow_search and used != "no_search"
    messages = prompts.chat_messages(
        state, tools=True, allow_search=offered, evidence_words=evidence_words, variant=variant
    )
    return DecisionPrompt("chat", used, messages=messages, tools=[SEARCH_TOOL_SCHEMA] if offered else [])
