"""Action protocols: turn model output into a SEARCH or ANSWER decision.

Three protocols over the same OpenAI-compatible server: few-shot JSON decisions on the
completion endpoint (base models, with a GBNF grammar as the fallback), native OpenAI tool
calls, and tagged text in the Search-R1 convention (`<search>`, `<answer>`, `<think>`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from branchpoint.models.call import ModelCall

#: What a policy decides at a decide step: search (its query in the decision's text) or answer
#: (its answer there). Written lowercase into a step's `action`; not a fork's forced continuation
#: (`branchpoint.traces.ForkAction`: THINK, SEARCH, STOP, SWITCH).
DecisionKind = Literal["search", "answer"]

#: The completion prompt ends with this prefix, so the model continues the JSON object.
JSON_DECISION_PREFIX = '{"action": "'


@dataclass
class Decision:
    """A policy's decision, with the model calls it took (retries included) and their outcome.

    `transcript`: entries for the state's transcript that the decision adds besides its own turn
    (e.g. the `self_eval` verdict; see `branchpoint.agents.transcript`). `steps`: the trace steps
    already built for the calls, when a policy's node made them (a forced answer in the policy's
    own protocol); otherwise they are built from `calls`.
    """

    action: DecisionKind
    text: str
    calls: list[ModelCall] = field(default_factory=list)
    status: Literal["ok", "malformed", "length"] = "ok"
    transcript: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] | None = None

    @classmethod
    def failed(cls, calls: list[ModelCall]) -> Decision:
        """A decision that could not be parsed: `length` if the last call ran out of tokens."""
        length = bool(calls) and calls[-1].finish_reason == "length"
        return cls("answer", "", calls, status="length" if length else "malformed")


def decision_grammar(allow_search: bool) -> str:
    """GBNF for the rest of a JSON decision after JSON_DECISION_PREFIX (llama.cpp grammar syntax).

    It matches e.g. `search", "text": "capital of France"}`: the action, then a one-line text.
    """
    actions = r'("search\"" | "answer\"")' if allow_search else r'"answer\""'
    return f"root ::= {actions} " + r'", \"text\": \"" chars "\"}"' + "\n" + r'chars ::= [^"\\\n]{1,200}' + "\n"


def parse_json_decision(completion: str, allow_search: bool = True) -> tuple[DecisionKind, str] | None:
    """Parse `{"action": ..., "text": ...}` continued after JSON_DECISION_PREFIX; None if invalid."""
    raw = JSON_DECISION_PREFIX + completion.strip()
    end = raw.find("}")
    # A base model often stops right after the closing quote: accept the object closed for it.
    candidate = raw[: end + 1] if end >= 0 else raw + "}"
    try:
        obj = json.loads(candidate)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    action, text = obj.get("action"), obj.get("text")
    if action not in ("search", "answer") or not isinstance(text, str) or not text.strip():
        return None
    if action == "search" and not allow_search:
        return None
    return action, text.strip()


_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def parse_tagged(text: str, allow_search: bool = True) -> tuple[DecisionKind, str] | None:
    """First `<search>q</search>` or `<answer>a</answer>` outside `<think>`; None if neither."""
    visible = _THINK.sub("", text)
    for match in _TAG.finditer(visible):
        action, body = match.group(1), match.group(2).strip()
        if not body or (action == "search" and not allow_search):
            continue
        return action, body  # type: ignore[return-value]
    return None


#: Where a tagged turn ends: the tagged policy sends these as `stop`, so a model that writes on
#: after its search (an invented `<information>` block, an answer) is stopped there, as Search-R1
#: stops its rollouts (`infer.py`'s StoppingCriteria on `</search>`, and EOS after `</answer>`).
TAGGED_STOPS = ("</search>", "</answer>")
_OPENING = {"<search>": "</search>", "<answer>": "</answer>"}


def close_tagged_reply(text: str, finish_reason: str | None) -> str:
    """A tagged reply as the sequence keeps it: cut just after its first closing tag (what
    Search-R1's `_postprocess_responses` does, for a server that ignored the stop strings); or,
    when the server stopped at a stop string and left it out (OpenAI, llama.cpp; vLLM keeps it
    with `include_stop_str_in_output`), the closing tag of the last tag opened put back. A reply
    cut off by `max_tokens` before any closing tag is left as it is (it decides nothing)."""
    ends = [(i, tag) for tag in TAGGED_STOPS if (i := text.find(tag)) >= 0]
    if ends:
        i, tag = min(ends)
        return text[: i + len(tag)]
    if finish_reason == "stop":
        opened = max(_OPENING, key=text.rfind)
        if text.rfind(opened) >= 0:
            return text + _OPENING[opened]
    return text


def parse_tool_call(call: ModelCall, allow_search: bool = True) -> tuple[DecisionKind, str] | None:
    """A `search` tool call becomes SEARCH(query); plain content without tool calls is ANSWER."""
    for tc in call.tool_calls:
        args: Any = tc.get("args") or {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return None
        query = args.get("query") if isinstance(args, dict) else None
        if tc.get("name") == "search" and allow_search and isinstance(query, str) and query.strip():
            return "search", query.strip()
        return None
    answer = _THINK.sub("", call.text).strip()
    tagged = parse_tagged(call.text, allow_search=False)
    if tagged:
        return tagged
    return ("answer", answer) if answer else None
