"""verl rollouts -> branchpoint traces (`branchpoint import rollouts --format verl`).

Two kinds of line, one JSON object each (github volcengine/verl):

- a **rollout dump** line, as the trainer writes it with `trainer.rollout_data_dir` (or
  `validation_data_dir`): `_dump_generations` in `verl/trainer/ppo/ray_trainer.py` writes
  `{step}.jsonl` with `input` (the prompt) and `output` (the response), each decoded with
  `skip_special_tokens=True`, `gts` (the item's `reward_model.ground_truth`), `score` (the summed
  token-level reward), `step` (the global step) and the reward function's extra fields. Token
  counts are not in it: they are counted with `--tokenizer`, else estimated;
- an **agent-loop output**: `AgentLoopOutput` (`verl/experimental/agent_loop/agent_loop.py`)
  as `model_dump()` writes it: `prompt_ids`, `response_ids`, `response_mask` (1 for tokens the
  model generated, 0 for tool responses), `num_turns`, `reward_score`, `metrics`
  (`generate_sequences`, `tool_calls`, `num_preempted`), `extra_fields`; verl keeps these in
  memory, so a dump of them is the user's own, with `gts` and `step` beside them where known.
  Token counts come from the ids (exact): each run of 1s in the mask is one model call, its
  input the prompt plus every token before it. The text needs the run's tokenizer
  (`--tokenizer`).

The response follows verl's tool agent loop (`tool_agent_loop.py`) with the hermes tool parser
and its Search-R1-like search tool (`verl/tools/search_tool.py`): a model turn calls
`<tool_call>{"name": "search", "arguments": {"query_list": [...]}}</tool_call>` (one search
step per query), the tool answers `<tool_response>{"result": "Doc 1 (Title: t)\\ntext\\n\\n..."}
</tool_response>` (per query, joined by `\\n---\\n`: `search_r1_like_utils.py`), and the final
turn holds `<answer>...</answer>`. A response in Search-R1's own tags (`<search>`,
`<information>`) is read as `--format searchr1` reads it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from branchpoint.errors import InputError
from branchpoint.importers.rollouts import (
    ParsedRollout,
    TokenCounter,
    Turn,
    doc_id,
    gold_list,
    score_of,
    step_of,
    strip_end,
)
from branchpoint.importers.searchr1 import QUESTION_MARK, parse_response
from branchpoint.traces import RetrievedDoc

#: Tool names that are searches.
SEARCH_TOOLS = frozenset({"search", "web_search", "retrieve", "wikipedia_search"})
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_RESPONSE = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
#: What follows the last tool response before the model's next turn (the chat template's end of
#: the tool message and the generation prompt, with or without special tokens).
_NEXT_TURN = re.compile(r"\A(?:<\|im_end\|>)?\s*(?:<\|im_start\|>)?(?:assistant\n)?")
_VERL_DOC = re.compile(r"^Doc \d+ \(Title: (.*?)\)\n", re.MULTILINE)


def question_of(prompt: str) -> str:
    """The question of a prompt: after its last `Question: ` to the end of that line (the
    Search-R1-like prompts' form), else the prompt's last non-empty line."""
    start = prompt.rfind(QUESTION_MARK)
    if start >= 0:
        return prompt[start + len(QUESTION_MARK) :].split("\n", 1)[0].strip()
    lines = [line.strip() for line in strip_end(prompt).splitlines() if line.strip() and line.strip() != "assistant"]
    return lines[-1] if lines else prompt.strip()


def parse_verl_passages(text: str) -> list[RetrievedDoc]:
    """The passages of one query's result (`Doc i (Title: t)\\ntext`, blank lines between)."""
    heads = list(_VERL_DOC.finditer(text))
    if not heads:
        return [RetrievedDoc(doc_id=doc_id(text), score=0.0, text=text)] if text.strip() else []
    docs = []
    for m, nxt in zip(heads, [*heads[1:], None]):
        body = text[m.end() : nxt.start() if nxt else len(text)].strip()
        title = m.group(1).strip()
        docs.append(RetrievedDoc(doc_id=doc_id(body), score=0.0, text=body, title=title.strip('"') or None))
    return docs


def tool_results(observation: str, n_queries: int) -> list[list[RetrievedDoc]]:
    """The passages of each query from the tool responses in an observation."""
    bodies = [m.group(1).strip() for m in _RESPONSE.finditer(observation)]
    results: list[str] = []
    for body in bodies:
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            value = body
        text = value.get("result", body) if isinstance(value, dict) else body
        results += str(text).split("\n---\n")
    per_query = [parse_verl_passages(r) for r in results]
    if len(per_query) != n_queries:  # not one result per query: keep them all on the first
        merged = [d for docs in per_query for d in docs]
        return [merged] + [[] for _ in range(max(0, n_queries - 1))]
    return per_query


def model_turn(text: str) -> Turn:
    """One model turn: its tool calls (search queries), else its answer."""
    calls = _CALL.findall(text)
    if calls:
        queries: list[str] = []
        other = False
        for raw in calls:
            try:
                call = json.loads(raw)
                args = call.get("arguments") or {}
                name = call.get("name")
            except (json.JSONDecodeError, AttributeError):
                return Turn(text=text, action="invalid")
            if name not in SEARCH_TOOLS:
                other = True
                continue
            listed = args.get("query_list", args.get("query"))
            queries += [str(q) for q in (listed if isinstance(listed, list) else [listed]) if q is not None]
        if not queries:
            return Turn(text=text, action="tool" if other else "invalid")
        return Turn(text=text, action="search", content=" | ".join(queries), queries=queries)
    answers = _ANSWER.findall(text)
    if answers:
        return Turn(text=text, action="answer", content=answers[-1].strip())
    return Turn(text=text, action="none")


def parse_output(output: str) -> list[Turn]:
    """The model turns of a decoded verl response (see the module docstring)."""
    if "<tool_call>" not in output and "<search>" in output:
        return parse_response(output)
    output = strip_end(output)
    turns: list[Turn] = []
    p = 0
    while p < len(output):
        at = output.find("<tool_response>", p)
        if at < 0:
            turns.append(model_turn(output[p:]))
            break
        part = output[p:at]
        last = part.rfind("</tool_call>")
        cut = p + (last + len("</tool_call>") if last >= 0 else len(part))
        turn = model_turn(output[p:cut])
        end = output.find("</tool_response>", at)
        end = len(output) if end < 0 else end + len("</tool_response>")
        while True:  # several tool responses in one tool message
            rest = output[end:]
            gap = len(rest) - len(rest.lstrip())
            if not rest.lstrip().startswith("<tool_response>"):
                break
            close = output.find("</tool_response>", end + gap)
            end = len(output) if close < 0 else close + len("</tool_response>")
        header = _NEXT_TURN.match(output[end:])
        end += header.end() if header else 0
        turn.observation = output[cut:end]
        if turn.action == "search":
            turn.docs = tool_results(turn.observation, len(turn.queries))
        turns.append(turn)
        p = end
    return turns


def _runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each run of equal values in a response mask."""
    runs: list[tuple[int, int, int]] = []
    for i, m in enumerate(mask):
        if runs and runs[-1][0] == m:
            runs[-1] = (m, runs[-1][1], i + 1)
        else:
            runs.append((m, i, i + 1))
    return runs


def _int_list(obj: dict[str, Any], name: str, where: str) -> list[int]:
    value = obj.get(name)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InputError(f'{where}: field "{name}": expected a list of token ids (integers)')
    return value


def parse_agent_loop(obj: dict[str, Any], where: str, step: int | None, counter: TokenCounter) -> ParsedRollout:
    """One `AgentLoopOutput` line (see the module docstring): exact token counts from the ids."""
    prompt_ids = _int_list(obj, "prompt_ids", where)
    response_ids = _int_list(obj, "response_ids", where)
    mask = _int_list(obj, "response_mask", where)
    if len(mask) != len(response_ids):
        raise InputError(
            f'{where}: field "response_mask": {len(mask)} entries for {len(response_ids)} response ids (expected one each)'
        )
    if any(m not in (0, 1) for m in mask):
        raise InputError(f'{where}: field "response_mask": expected 0 (tool tokens) or 1 (model tokens) only')
    prompt = counter.decode(prompt_ids, where)
    turns: list[Turn] = []
    for value, a, b in _runs(mask):
        text = counter.decode(response_ids[a:b], where)
        if value == 1:
            turn = model_turn(strip_end(text))
            turn.text = text
            turn.input_tokens, turn.output_tokens = len(prompt_ids) + a, b - a
            turns.append(turn)
        elif turns:
            turns[-1].observation = text
            if turns[-1].action == "search":
                turns[-1].docs = tool_results(text, len(turns[-1].queries))
    extra_fields: dict[str, Any] = obj["extra_fields"] if isinstance(obj.get("extra_fields"), dict) else {}
    truth = obj.get("gts", extra_fields.get("gts"))
    score = obj.get("reward_score", obj.get("score"))
    metrics: dict[str, Any] = obj["metrics"] if isinstance(obj.get("metrics"), dict) else {}
    return ParsedRollout(
        prompt=prompt,
        question=str(obj.get("question") or question_of(prompt)),
        turns=turns,
        gold_answers=gold_list(truth),
        score=score_of(score, where),
        step=step_of({**extra_fields, **obj}, step, where),
        question_key=None,
        prompt_tokens=len(prompt_ids),
        extra={
            "num_turns": obj.get("num_turns"),
            "wall_s": float(metrics.get("generate_sequences") or 0.0) + float(metrics.get("tool_calls") or 0.0),
        },
    )


def parse_verl(obj: dict[str, Any], where: str, step: int | None, counter: TokenCounter) -> ParsedRollout:
    """One verl line: an agent-loop output (ids) or a rollout dump line (text)."""
    if "response_ids" in obj or "prompt_ids" in obj:
        return parse_agent_loop(obj, where, step, counter)
    if not isinstance(obj.get("input"), str) or not isinstance(obj.get("output"), str):
        raise InputError(
            f'{where}: expected fields "input" and "output" (verl\'s rollout dump) or "prompt_ids", '
            f'"response_ids" and "response_mask" (an agent-loop output); the line has {", ".join(sorted(obj)) or "no fields"}'
        )
    kept = {k: obj[k] for k in ("acc", "request_id") if k in obj}
    return ParsedRollout(
        prompt=obj["input"],
        question=question_of(obj["input"]),
        turns=parse_output(obj["output"]),
        gold_answers=gold_list(obj.get("gts")),
        score=score_of(obj.get("score"), where),
        step=step_of(obj, step, where),
        question_key=None,
        extra={"rollout_extra": kept} if kept else {},
    )
