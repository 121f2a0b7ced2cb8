"""What a trainer's completion decided: its first action (search or answer) and its final answer.

Trainers hand a reward function the model's output in one of two shapes: text (verl's
`solution_str`, TRL's standard format) or a list of chat messages (TRL's conversational format,
where a tool-calling rollout holds assistant turns with `tool_calls`, tool results, and a final
assistant turn). The text is read in each of branchpoint's protocols: Search-R1 tags
(`<search>`, `<answer>`, `<think>`), the few-shot JSON decision (`{"action": ..., "text": ...}`,
whole or continued after its `{"action": "` prefix), or a plain answer (a native tool-call
policy's final content).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from branchpoint.agents.protocols import JSON_DECISION_PREFIX, DecisionKind, parse_json_decision, parse_tagged

Completion = str | Sequence[Mapping[str, Any]]

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _json_decision(text: str) -> tuple[str, str] | None:
    """A few-shot JSON decision, whole (`{"action": ...}`) or continued after its prefix."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped[: stripped.find("}") + 1] or stripped)
        except json.JSONDecodeError:
            return None
        if isinstance(obj, dict) and obj.get("action") in ("search", "answer") and isinstance(obj.get("text"), str):
            return obj["action"], obj["text"].strip()
        return None
    if stripped.startswith(('search"', 'answer"')):
        return parse_json_decision(stripped)
    return None


def _assistant_turns(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [m for m in messages if m.get("role") == "assistant"]


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def text_first_action(text: str) -> DecisionKind | None:
    """The first decision a text completion makes: the first `<search>` / `<answer>` tag outside
    `<think>`, else a JSON decision's action, else `answer` for any other non-empty text."""
    tagged = parse_tagged(text)
    if tagged is not None:
        return tagged[0]
    decision = _json_decision(text)
    if decision is not None:
        return "search" if decision[0] == "search" else "answer"
    visible = _THINK.sub("", text).strip()
    if not visible or "<search>" in visible or "<answer>" in visible:  # an unclosed tag decides nothing
        return None
    return "answer"


def text_answer(text: str) -> str | None:
    """The final answer of a text completion (None: it gives none): the last `<answer>` outside
    `<think>` (as Search-R1's reward reads it), else a JSON decision's answer, else the visible
    text when it is neither a search nor an unclosed tag."""
    visible = _THINK.sub("", text)
    tags = _ANSWER.findall(visible)
    if tags:
        return tags[-1].strip() or None
    decision = _json_decision(visible)
    if decision is not None:
        return decision[1] or None if decision[0] == "answer" else None
    plain = visible.strip()
    if not plain or "<search>" in plain or "<answer>" in plain or plain.startswith(JSON_DECISION_PREFIX):
        return None
    return plain


def first_action(completion: Completion) -> DecisionKind | None:
    """The first decision of a completion: text (`text_first_action`), or messages, whose first
    assistant turn searches when it calls a tool and is read as text otherwise."""
    if isinstance(completion, str):
        return text_first_action(completion)
    turns = _assistant_turns(completion)
    if not turns:
        return None
    if turns[0].get("tool_calls"):
        return "search"
    return text_first_action(_content(turns[0]))


def final_answer(completion: Completion) -> str | None:
    """The final answer of a completion: text (`text_answer`), or messages, whose last assistant
    turn answers unless it calls a tool."""
    if isinstance(completion, str):
        return text_answer(completion)
    turns = _assistant_turns(completion)
    if not turns or turns[-1].get("tool_calls"):
        return None
    return text_answer(_content(turns[-1]))
