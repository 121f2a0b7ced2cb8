"""Search-R1 rollouts -> branchpoint traces (`branchpoint import rollouts --format searchr1`).

Search-R1 (github PeterGriffinJin/Search-R1) writes no rollout file of its own: its reward
manager (`verl/trainer/main_ppo.py`, `RewardManager.__call__`) decodes each rollout's prompt
and response ids into one string, `sequences_str`, and scores it with `qa_em.compute_score_em`
against `reward_model.ground_truth.target`. A dump of its rollouts is therefore one JSON object
per line holding either

- `sequences_str`: that decoded sequence (prompt, then response), with the batch item's
  non-tensor fields as the dataset wrote them (`scripts/data_process/nq_search.py`:
  `data_source`, `reward_model: {"ground_truth": {"target": [...]}}`, `extra_info: {"split",
  "index"}`), and optionally `score` and `step`; or
- `input` and `output` (the prompt and the response, decoded apart) with `gts`, `score` and
  `step`: what a current verl trainer's `rollout_data_dir` writes (`_dump_generations` in
  `verl/trainer/ppo/ray_trainer.py`) for a Search-R1-style run.

The response follows Search-R1's loop (`search_r1/llm_agent/generation.py`): each model turn is
cut after its first `</search>` (else `</answer>`); a search is followed by
`\\n\\n<information>Doc i(Title: t) text ...</information>\\n\\n`; an invalid action by the fixed
"My previous action is invalid. ..." message. The question is what follows `Question: ` in the
prompt, up to the line's end.
"""

from __future__ import annotations

import re
from typing import Any

from branchpoint.errors import InputError
from branchpoint.importers.rollouts import ParsedRollout, Turn, doc_id, gold_list, score_of, step_of, strip_end
from branchpoint.traces import RetrievedDoc

#: The observation Search-R1 appends after a turn with no valid action (`execute_predictions`).
INVALID_ACTION = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)
INFO_OPEN = "\n\n<information>"
INFO_CLOSE = "</information>\n\n"
QUESTION_MARK = "Question: "
#: Where a chat template's assistant turn begins (Qwen's `<|im_start|>assistant\n`, and the
#: same text with special tokens skipped).
ASSISTANT_STARTS = ("<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>\n\n")
_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_DOC_START = re.compile(r"^Doc \d+\(Title: ", re.MULTILINE)


def split_sequence(sequence: str, where: str) -> tuple[str, str]:
    """(prompt, response) of a decoded `sequences_str`: the prompt runs to the end of the
    `Question: ...` line, then through a chat template's assistant header when there is one."""
    start = sequence.find(QUESTION_MARK)
    if start < 0:
        raise InputError(f'{where}: field "sequences_str": no "{QUESTION_MARK}" in it (expected Search-R1\'s prompt)')
    end = sequence.find("\n", start)
    end = len(sequence) if end < 0 else end + 1
    for header in ASSISTANT_STARTS:
        at = sequence.find(header, end)
        if at >= 0:
            return sequence[: at + len(header)], sequence[at + len(header) :]
    return sequence[:end], sequence[end:]


def question_of(prompt: str, where: str) -> str:
    """The question in a Search-R1 prompt: after its last `Question: `, to the end of that line."""
    start = prompt.rfind(QUESTION_MARK)
    if start < 0:
        raise InputError(f'{where}: no "{QUESTION_MARK}" in the prompt (expected Search-R1\'s prompt)')
    rest = prompt[start + len(QUESTION_MARK) :]
    return rest.split("\n", 1)[0].strip()


def parse_passages(block: str) -> list[RetrievedDoc]:
    """The passages of an `<information>` block, as `_passages2string` wrote them: `Doc i(Title:
    t) text` each; a quoted title (FlashRAG's `"Title"`) loses its quotes, any other title is kept
    as the text's first line, so that rendering the passages again gives the block back."""
    starts = [m.start() for m in _DOC_START.finditer(block)]
    if not starts:
        return [RetrievedDoc(doc_id=doc_id(block), score=0.0, text=block)] if block.strip() else []
    docs = []
    for a, b in zip(starts, [*starts[1:], len(block)]):
        entry = block[a:b].removesuffix("\n")
        head = entry[entry.index("(Title: ") + len("(Title: ") :]
        if head.startswith('"') and '") ' in head:
            cut = head.index('") ')
            title: str | None = head[1:cut]
            text = head[cut + 3 :]
        elif ") " in head:
            cut = head.index(") ")
            title, text = None, head[:cut] + "\n" + head[cut + 2 :]
        else:
            title, text = None, head
        docs.append(RetrievedDoc(doc_id=doc_id(text), score=0.0, text=text, title=title))
    return docs


def parse_response(response: str) -> list[Turn]:
    """The model turns of a Search-R1 response (see the module docstring)."""
    response = strip_end(response)
    turns: list[Turn] = []
    p = 0
    while p < len(response):
        ends = [(i, kind) for kind in ("</search>", "</answer>") if (i := response.find(kind, p)) >= 0]
        invalid = response.find(INVALID_ACTION, p)
        if invalid >= 0 and all(invalid < i for i, _ in ends):
            text = response[p:invalid]
            turns.append(Turn(text=text, action="invalid", observation=INVALID_ACTION))
            p = invalid + len(INVALID_ACTION)
            continue
        if not ends:
            turns.append(Turn(text=response[p:], action="none"))
            break
        i, tag = min(ends)
        end = i + len(tag)
        text = response[p:end]
        match = list(_TAG.finditer(text))
        content = match[-1].group(2).strip() if match else None
        if tag == "</answer>":
            turns.append(Turn(text=text, action="answer", content=content))
            p = end
            continue
        turn = Turn(text=text, action="search", content=content, queries=[content or ""])
        if response.startswith(INFO_OPEN, end):
            close = response.find(INFO_CLOSE, end)
            close = len(response) if close < 0 else close
            block = response[end + len(INFO_OPEN) : close]
            turn.observation = response[end : close + len(INFO_CLOSE)]
            turn.docs = [parse_passages(block)]
            p = close + len(INFO_CLOSE)
        else:  # the last rollout of the loop searches no more (`do_search=False`): nothing follows
            turn.queries, turn.action = [], "search_unrun"
            p = end
        turns.append(turn)
    return turns


def _key(obj: dict[str, Any]) -> str | None:
    extra = obj.get("extra_info")
    if isinstance(extra, dict) and extra.get("index") is not None:
        return f"{obj.get('data_source') or 'q'}:{extra.get('split') or ''}:{extra['index']}".replace("::", ":")
    return None


def parse_searchr1(obj: dict[str, Any], where: str, step: int | None) -> ParsedRollout:
    """One Search-R1 rollout line (see the module docstring)."""
    if isinstance(obj.get("sequences_str"), str):
        prompt, response = split_sequence(obj["sequences_str"], where)
    elif isinstance(obj.get("input"), str) and isinstance(obj.get("output"), str):
        prompt, response = obj["input"], obj["output"]
    else:
        raise InputError(
            f'{where}: expected field "sequences_str" (Search-R1\'s decoded sequence) or "input" and "output" '
            f"(verl's rollout dump); the line has {', '.join(sorted(obj)) or 'no fields'}"
        )
    reward_model = obj.get("reward_model")
    truth = (
        reward_model.get("ground_truth") if isinstance(reward_model, dict) else obj.get("gts", obj.get("ground_truth"))
    )
    return ParsedRollout(
        prompt=prompt,
        question=question_of(prompt, where),
        turns=parse_response(response),
        gold_answers=gold_list(truth),
        score=score_of(obj.get("score"), where),
        step=step_of(obj, step, where),
        question_key=_key(obj),
        extra={"data_source": obj["data_source"]} if isinstance(obj.get("data_source"), str) else {},
    )
