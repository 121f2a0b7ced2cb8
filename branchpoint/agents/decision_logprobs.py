"""The decision token of a reply and what its log probabilities say about searching.

A decide call that came back with token log probabilities (`model.logprobs: N`) gets a compact
record on its trace step (`Step.logprobs`, `traces.DecisionLogprobs`): the token at which the
reply chose between searching and answering, its log probability, the top alternatives there,
and what they sum to per action. Where that token is, per protocol:

- `constrained` (few-shot completion after `{"action": "`): the first token at which the
  continuation can only be `search` or only `answer` (`se` is still both; `search` is one);
- `tagged` (`<search>…</search>` / `<answer>…</answer>`): the same for the opening tags, after any
  `<think>…</think>` block and leading white space (`<` is both; `<se` or `<search` is one);
- `native` (OpenAI tool calls): the first token of the reply after any `<think>…</think>` block
  and leading white space; an alternative that opens a tool call (`TOOL_CALL_OPENERS`: Hermes /
  Qwen's `<tool_call>`, Mistral's `[TOOL_CALLS]`, Llama's `<|python_tag|>`, …) counts as search,
  any other non-blank one as answer.

The record: `protocol`, `position` (index of the decision token among the reply's tokens),
`token` and `logprob` (the one generated), `top` (the alternatives as returned, plus the
generated token when the server left it out), `p_search` and `p_answer` (the probability mass of
the alternatives that open each action: lower bounds, since only the top N are seen), `top_mass`
(the mass of all of them) and `entropy` (Shannon entropy in bits of the alternatives
renormalised to sum to 1). No record when the reply opens neither action (a malformed reply, a
cut-off one) or came without log probabilities.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from branchpoint.models.call import ModelCall
from branchpoint.models.logprobs import TokenLogprob

#: What opens each action in the text-decision protocols (after the prefix the prompt ends with).
OPENERS: dict[str, dict[str, tuple[str, ...]]] = {
    "constrained": {"search": ("search",), "answer": ("answer",)},
    "tagged": {"search": ("<search>",), "answer": ("<answer>",)},
}
#: The first tokens a tool call opens with, per model family's tool-call format.
TOOL_CALL_OPENERS: tuple[str, ...] = (
    "<tool_call>",  # Hermes / Qwen
    "[TOOL_CALLS]",  # Mistral
    "<|python_tag|>",  # Llama 3.x
    "<|tool_call_begin|>",
    "<|tool_calls_section_begin|>",  # Kimi
    "<｜tool▁calls▁begin｜>",  # DeepSeek
    "<function",  # Llama 3.x / Functionary
    "<|tool_call|>",  # Phi, Granite
)
THINK_END = "</think>"


def _start(tokens: Sequence[TokenLogprob]) -> int:
    """Index of the first token after a `<think>…</think>` block (0 when there is none)."""
    text = ""
    for i, t in enumerate(tokens):
        text += t.token
        if THINK_END in text:
            return i + 1
    return 0


def _classes(prefix: str, openers: dict[str, tuple[str, ...]]) -> set[str]:
    """The actions whose opener `prefix` (left-stripped) is consistent with (a prefix of it, or it of one)."""
    s = prefix.lstrip()
    return {a for a, ops in openers.items() for o in ops if o.startswith(s) or s.startswith(o)}


def _native_class(token: str) -> str | None:
    s = token.strip()
    if not s:
        return None
    return "search" if any(o.startswith(s) or s.startswith(o) for o in TOOL_CALL_OPENERS) else "answer"


def _record(protocol: str, tokens: Sequence[TokenLogprob], i: int, classify: Any) -> dict[str, Any]:
    chosen = tokens[i]
    top = list(chosen.top)
    if chosen.token not in {t for t, _ in top}:
        top.append((chosen.token, chosen.logprob))
    probs = [(t, math.exp(lp)) for t, lp in top]
    mass: dict[str, float] = {"search": 0.0, "answer": 0.0}
    for t, p in probs:
        c = classify(t)
        if c in mass:
            mass[c] += p
    total = sum(p for _, p in probs)
    entropy = -sum((p / total) * math.log2(p / total) for _, p in probs if p > 0) if total > 0 else 0.0
    return {
        "protocol": protocol,
        "position": i,
        "token": chosen.token,
        "logprob": chosen.logprob,
        "top": [{"token": t, "logprob": lp} for t, lp in top],
        "p_search": mass["search"],
        "p_answer": mass["answer"],
        "top_mass": total,
        "entropy": max(entropy, 0.0),
    }


def decision_record(tokens: Sequence[TokenLogprob] | None, protocol: str) -> dict[str, Any] | None:
    """The compact decision record of a reply's tokens under `protocol` (module doc); None when
    the reply has no log probabilities or opens no action."""
    if not tokens:
        return None
    start = _start(tokens) if protocol in ("tagged", "native") else 0
    if protocol == "native":
        for i in range(start, len(tokens)):
            if tokens[i].token.strip():
                return _record(protocol, tokens, i, _native_class)
        return None
    openers = OPENERS[protocol]
    text = ""
    for i in range(start, len(tokens)):
        before = _classes(text, openers)
        after = _classes(text + tokens[i].token, openers)
        if len(before) > 1 and len(after) == 1:
            prefix = text

            def classify(token: str, prefix: str = prefix) -> str | None:
                found = _classes(prefix + token, openers)
                return next(iter(found)) if len(found) == 1 else None

            return _record(protocol, tokens, i, classify)
        if not after:
            return None
        text += tokens[i].token
    return None


def with_decision_logprobs(call: ModelCall, protocol: str) -> ModelCall:
    """`call` with its decision record (`decision_record`) where its reply has log probabilities."""
    record = decision_record(call.logprobs, protocol)
    return call if record is None else dataclasses.replace(call, decision_logprobs=record)
