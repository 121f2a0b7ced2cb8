"""Reading a request: what the simulated model is shown (`Observation`).

From a chat request (`observe_chat`): the question (the last user turn that is not search
results or an instruction; in Search-R1's prompt, the text after its `Question:`), the passages
shown (`Doc i(Title: t) text` lines in tool results, `<information>` turns, or the
`<information>` blocks of a final assistant sequence, the `searchr1` protocol's), whether it may
search (a `search` tool offered, the tagged-text system prompt with `<search>`, or Search-R1's
prompt, unless the sequence ends with an opened `<answer>`: its forced answer), structured output as vLLM reads it (`structured_of`), the thinking-token
budget, the searches left it discloses (`disclosed_left`: `agent.budget_disclosure`'s text), and the
reasoning effort (`reasoning_effort`;
`chat_template_kwargs.enable_thinking`; else the profile's default). From a few-shot completion
request (`observe_completion`): the last `Question:` block, the `[i] "Title" text` items of its
`Evidence:` line, its `Budget:` line (the searches left), and whether the search header and grammar
allow `search`. The distributions of
the reply are in `behaviour`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from branchpoint.datasets.questions import Question
from branchpoint.sim import vllm_rules
from branchpoint.sim.passages import Passage
from branchpoint.sim.profile import Profile
from branchpoint.sim.question_set import QuestionBank

Protocol = Literal["completion", "native", "tagged", "plain"]


_CHAT_DOC = re.compile(r"^Doc \d+\(Title: (.*?)\) (.*)$", re.MULTILINE)
_FEWSHOT_ITEM = re.compile(r"\[(\d+)\] ")
_INFORMATION = re.compile(r"<information>(.*?)</information>", re.DOTALL)


@dataclass
class Observation:
    """What the simulator read from one request."""

    protocol: Protocol
    question_text: str
    question: Question | None
    passages: list[Passage]
    can_search: bool
    constrained: bool
    effort: str
    task: Literal["decide", "self_eval"] = "decide"
    structured: dict[str, Any] | None = None
    tool_required: bool = False
    thinking_budget: int | None = None
    #: The request continues an assistant sequence that ends with an opened `<answer>` (the
    #: `searchr1` protocol's forced answer): the reply is the answer and `</answer>`.
    continues_answer: bool = False
    #: The searches left that the request discloses (`disclosed_left`; None: no budget disclosed).
    searches_left: int | None = None


def disclosed_left(texts: list[str]) -> int | None:
    """The searches left a request discloses (`agents.disclosure`): the last countdown
    ("Searches left: L of N.") in its texts, else the cap a `start` text states ("You may search
    at most N times"), else None."""
    from branchpoint.agents.disclosure import LEFT_PATTERN, START_PATTERN

    for pattern in (LEFT_PATTERN, START_PATTERN):
        found = [m for text in texts for m in pattern.findall(text)]
        if found:
            last = found[-1]
            return int(last[0] if isinstance(last, tuple) else last)
    return None


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def chat_passages(text: str) -> list[Passage]:
    return [Passage(t, x) for t, x in _CHAT_DOC.findall(text)]


def fewshot_passages(line: str) -> list[Passage]:
    body = line.strip()
    if body in ("", "(none)"):
        return []
    pieces = _FEWSHOT_ITEM.split(body)
    out = []
    # pieces: [before, n1, text1, n2, text2, ...]
    for i in range(2, len(pieces), 2):
        item = pieces[i].strip()
        title = ""
        m = re.match(r'^"([^"]*)" (.*)$', item, re.DOTALL)
        if m:
            title, item = m.group(1), m.group(2)
        out.append(Passage(title, item.strip()))
    return out


def request_effort(profile: Profile, body: Mapping[str, Any]) -> str:
    """The effort a chat request asks for (vLLM fields), else the profile's default."""
    kwargs = body.get("chat_template_kwargs") or {}
    effort = body.get("reasoning_effort")
    if effort == "minimal":
        effort = "low"
    thinking = kwargs.get("enable_thinking") if isinstance(kwargs, dict) else None
    if thinking is False:
        return "none"
    if effort in ("none", "low", "medium", "high"):
        return str(effort)
    if thinking is True:
        return profile.thinking_effort if profile.thinking_effort != "none" else "medium"
    return profile.default_effort


def structured_of(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """What constrains the output, as vLLM reads it: `structured_outputs`, else `response_format`
    (json_schema / json_object), as one dict. llama.cpp's `grammar` and the removed `guided_*`
    fields are ignored, as vLLM ignores them (`vllm_rules`)."""
    so = body.get("structured_outputs")
    if isinstance(so, dict) and so:
        return {k: v for k, v in so.items() if v is not None}
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        return {"json": (rf.get("json_schema") or {}).get("schema") or {}}
    if isinstance(rf, dict) and rf.get("type") == "json_object":
        return {"json": {"type": "object"}}
    return None


def searchr1_question(text: str) -> str | None:
    """The question of a user turn that is Search-R1's prompt (`prompts.SEARCHR1_PROMPT`), or None."""
    from branchpoint.agents import prompts

    head, _, tail = prompts.SEARCHR1_PROMPT.partition("{question}")
    if not text.startswith(head):
        return None
    # the question's line (a disclosed budget is a line after it)
    return text[len(head) :].removesuffix(tail).partition("\n")[0].strip()


def information_passages(text: str) -> list[Passage]:
    """The passages of every `<information>` block in a sequence (titles without their quotes:
    Search-R1 shows the contents' first line, FlashRAG's `"Title"`)."""
    out = []
    for block in _INFORMATION.findall(text):
        out += [Passage(p.title.removeprefix('"').removesuffix('"'), p.text) for p in chat_passages(block)]
    return out


def observe_chat(profile: Profile, bank: QuestionBank, body: Mapping[str, Any]) -> Observation:
    from branchpoint.agents import prompts

    messages = body.get("messages") or []
    sequence = _content(messages[-1]) if messages and messages[-1].get("role") == "assistant" else ""
    continues_answer = sequence.endswith(prompts.SEARCHR1_ANSWER_OPEN)
    system = " ".join(_content(m) for m in messages if m.get("role") in ("system", "developer"))
    instructions = {prompts.FORCE_ANSWER, prompts.SELF_EVAL_PROMPT}
    candidates = []
    passages: list[Passage] = []
    for m in messages:
        text = _content(m)
        if m.get("role") == "tool":
            passages += chat_passages(text)
        elif m.get("role") == "user":
            if text.startswith("<information>"):  # a disclosed countdown may follow the block
                passages += chat_passages(text.removeprefix("<information>").partition("</information>")[0])
            elif searchr1_question(text) is not None:
                candidates.append(searchr1_question(text) or "")
            elif text.strip() not in instructions:
                candidates.append(text)
    passages += information_passages(sequence)
    searchr1 = any(searchr1_question(_content(m)) is not None for m in messages if m.get("role") == "user")
    last_user = next((_content(m) for m in reversed(messages) if m.get("role") == "user"), "")
    question_text = candidates[-1].strip() if candidates else ""
    question = bank.lookup(question_text)
    if question is None and searchr1:  # Search-R1 adds a `?` to a question that has none
        question = bank.lookup(question_text.removesuffix("?"))
    tools = body.get("tools") or []
    tool_choice = vllm_rules.tool_choice(body)
    has_search_tool = any((t.get("function") or {}).get("name") == "search" for t in tools if isinstance(t, dict))
    forced = last_user.strip() == prompts.FORCE_ANSWER or continues_answer
    if has_search_tool and tool_choice != "none":
        protocol: Protocol = "native"
        can_search = not forced
    elif "<search>" in system and not forced:
        protocol, can_search = "tagged", True
    elif searchr1:  # Search-R1's prompt: tagged; its forced answer continues an opened <answer>
        protocol, can_search = "tagged", not continues_answer
    else:
        protocol, can_search = "plain", False
    structured = structured_of(body)
    return Observation(
        protocol=protocol,
        question_text=question_text,
        question=question,
        passages=passages,
        can_search=can_search,
        constrained=structured is not None,
        effort=request_effort(profile, body),
        task="self_eval" if last_user.strip() == prompts.SELF_EVAL_PROMPT else "decide",
        structured=structured,
        tool_required=tool_choice == "required"
        or (isinstance(tool_choice, dict) and (tool_choice.get("function") or {}).get("name") == "search"),
        thinking_budget=vllm_rules.thinking_budget(body),
        continues_answer=continues_answer,
        searches_left=disclosed_left([_content(m) for m in messages]) if can_search else None,
    )


def observe_completion(profile: Profile, bank: QuestionBank, body: Mapping[str, Any]) -> Observation:
    from branchpoint.agents import prompts

    prompt = body.get("prompt") or ""
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt and isinstance(prompt[0], str) else ""
    block = prompt.rsplit("Question: ", 1)[-1] if "Question: " in prompt else ""
    question_text, _, rest = block.partition("\n")
    evidence_line = budget_line = ""
    for line in rest.split("\n"):
        if line.startswith("Evidence: "):
            evidence_line = line.removeprefix("Evidence: ")
        elif line.startswith("Budget: "):
            budget_line = line.removeprefix("Budget: ")
    structured = structured_of(body)
    grammar = (structured or {}).get("grammar")
    offered = prompt.startswith(prompts.FEWSHOT_HEADER)
    can_search = offered and (grammar is None or "search" in str(grammar))
    return Observation(
        protocol="completion",
        question_text=question_text.strip(),
        question=bank.lookup(question_text),
        passages=fewshot_passages(evidence_line),
        can_search=can_search,
        constrained=structured is not None,
        effort="none",
        structured=structured,
        searches_left=disclosed_left([budget_line]) if can_search else None,
    )
