"""Training rollouts -> branchpoint traces: what the `searchr1` and `verl` readers share.

A reader parses one rollout into a `ParsedRollout` (the prompt, the question, the model's turns
with what the environment appended after each) and `rollout_record` turns it into an
`ExecutionRecord`:

- ids: `question_id` is the dump's own stable id where it has one (`extra_info.index`, with the
  data source), else `q-` and a hash of the question text, so the same question has the same id
  in every training step; `repeat` is the rollout's rank among that question's rollouts of the
  same step (GRPO's group); `condition` is `{"rollout.step": N}` (the training step; `{}` when
  unknown); `execution_id(run_id, condition, question_id, repeat=...)`;
- steps: every model call is a `decide` step (its `action`: `search`, `invalid` or `none`) or,
  when it gave the answer, an `answer` step, with its usage; every search is a `search` step
  with its query and the passages parsed from what the environment appended;
- token counts (`token_counts` on the record says which): `ids` when the dump holds token ids
  (exact), `tokenizer:NAME` when counted with the tokenizer given (`--tokenizer`), else
  `estimated` (ceil(characters / 4), the common rule of thumb; TPC from such traces is an
  estimate). A call's input is the prompt plus everything before it in the sequence, counted
  segment by segment;
- judgments: the dump's reward `score` as judge `<format>:score`, CORRECT when score >= the
  threshold (1.0: the exact-match reward; format rewards below it count as INCORRECT); score them
  with `branchpoint evaluate TRACES --judge given`, or re-judge with `--judge rule` (gold answers
  are kept);
- status: `ok` with an answer, `malformed` when the response holds no answer (the loop ran out
  of turns or the model never closed a tag; scored as wrong).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.traces import ExecutionRecord, Judgment, RetrievedDoc, Step, Usage, execution_id, iter_json_lines

#: The condition key holding an imported rollout's training step (`experiments.branch_planning.
#: base_condition` leaves `rollout.*` out: no spec sweeps it).
STEP_KEY = "rollout.step"
#: How token counts were obtained (a record's `token_counts`).
COUNT_IDS = "ids"
COUNT_ESTIMATED = "estimated"
#: Characters per token of the estimate.
CHARS_PER_TOKEN = 4
#: The reward at or above which a rollout's answer is CORRECT (Search-R1's exact-match reward).
DEFAULT_CORRECT_AT = 1.0
#: End-of-sequence markers a decoded sequence may end with (kept out of the last turn's text).
END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>")


@dataclass
class Turn:
    """One model call of a rollout: its generated text, the action it took, and what the
    environment appended after it (`observation`, with the passages parsed from it)."""

    text: str
    action: str  # search | answer | invalid | none
    content: str | None = None  # the query of a search, the answer of an answer
    queries: list[str] = field(default_factory=list)  # a search call's queries (several for verl's query_list)
    observation: str = ""
    docs: list[list[RetrievedDoc]] = field(default_factory=list)  # per query
    input_tokens: int | None = None  # exact counts, when the dump holds ids
    output_tokens: int | None = None


@dataclass
class ParsedRollout:
    """One rollout as a reader parsed it (see the module docstring)."""

    prompt: str
    question: str
    turns: list[Turn]
    gold_answers: list[str]
    score: float | None
    step: int | None
    question_key: str | None  # the dump's own stable id of the question, if any
    prompt_tokens: int | None = None  # exact, with ids
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def final_answer(self) -> str | None:
        answers = [t.content for t in self.turns if t.action == "answer"]
        return answers[-1] if answers else None


class TokenCounter:
    """Counts tokens of text: with a tokenizer file or folder (exact for that tokenizer), else an
    estimate of ceil(characters / 4). `label` is what records say (`token_counts`)."""

    def __init__(self, tokenizer: str | Path | None = None) -> None:
        self._encode: Callable[[str], list[int]] | None = None
        self._decode: Callable[[list[int]], str] | None = None
        self.label = COUNT_ESTIMATED
        if tokenizer is not None:
            self._encode, self._decode = load_tokenizer(tokenizer)
            self.label = f"tokenizer:{Path(str(tokenizer)).name}"

    @property
    def exact(self) -> bool:
        return self._encode is not None

    def count(self, text: str) -> int:
        """Tokens of `text` (the tokenizer's, without special tokens; else the estimate)."""
        if self._encode is not None:
            return len(self._encode(text))
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def decode(self, ids: list[int], where: str) -> str:
        """Text of token ids; InputError without a tokenizer (ids cannot be read without it)."""
        if self._decode is None:
            raise InputError(
                f"{where}: the rollout holds token ids only; decoding them needs the tokenizer the run used: "
                "--tokenizer PATH (a tokenizer.json, or a Hugging Face model folder)"
            )
        return self._decode(ids)


def load_tokenizer(path: str | Path) -> tuple[Callable[[str], list[int]], Callable[[list[int]], str]]:
    """(encode, decode) of a local tokenizer: a `tokenizer.json` file or a folder holding one
    (read with the `tokenizers` package; nothing is downloaded)."""
    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    if not file.is_file():
        raise InputError(
            f"--tokenizer {path}: no tokenizer.json there (expected the file, or a model folder holding it)"
        )
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise InputError("--tokenizer needs the package tokenizers: pip install tokenizers") from None
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as exc:
        raise InputError(f"--tokenizer {file}: not a tokenizers file ({exc})") from None
    return (
        lambda text: tok.encode(text, add_special_tokens=False).ids,
        lambda ids: tok.decode(ids, skip_special_tokens=False),
    )


def doc_id(text: str) -> str:
    """A passage's id when the dump gives none: a hash of its text."""
    return "h-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def question_id(question: str, key: str | None) -> str:
    """The question's id: the dump's own key, else a hash of the normalised question text."""
    if key:
        return key
    norm = " ".join(question.split()).lower()
    return "q-" + hashlib.sha256(norm.encode("utf-8")).hexdigest()[:12]


def strip_end(text: str) -> str:
    """`text` without end-of-sequence markers (and padding repeats of them) at its end."""
    changed = True
    while changed:
        changed = False
        for marker in END_MARKERS:
            stripped = text.rstrip()
            if stripped.endswith(marker):
                text, changed = stripped[: -len(marker)], True
    return text


def gold_list(value: Any) -> list[str]:
    """Gold answers from a ground truth as dumps hold it: `{"target": [...]}` (Search-R1's
    `reward_model.ground_truth`), a list, or one string."""
    if isinstance(value, dict):
        value = value.get("target", value.get("golden_answers"))
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def score_of(value: Any, where: str) -> float | None:
    """The reward of a rollout as a number (None when the dump has none)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    raise InputError(f'{where}: field "score": expected a number, got {type(value).__name__}')


def step_of(obj: dict[str, Any], override: int | None, where: str) -> int | None:
    """The rollout's training step: `--step` when given, else the dump's `step` (verl writes it)."""
    if override is not None:
        return override
    value = obj.get("step", obj.get("global_steps"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise InputError(f'{where}: field "step": expected an integer training step, got {value!r}')
    return int(value)


def usage_steps(parsed: ParsedRollout, counter: TokenCounter, fmt: str) -> list[Step]:
    """The record's steps: a model step per turn (with its usage) and a search step per query."""
    steps: list[Step] = []
    before = parsed.prompt_tokens if parsed.prompt_tokens is not None else counter.count(parsed.prompt)
    for i, turn in enumerate(parsed.turns):
        out = turn.output_tokens if turn.output_tokens is not None else counter.count(turn.text)
        inp = turn.input_tokens if turn.input_tokens is not None else before
        answering = turn.action == "answer" and i == len(parsed.turns) - 1
        steps.append(
            Step(
                kind="answer" if answering else "decide",
                usage=Usage(input_tokens=inp, output_tokens=out),
                action=turn.action,
                text=turn.content,
                raw=turn.text,
            )
        )
        for query, docs in zip(turn.queries, turn.docs or [[] for _ in turn.queries]):
            steps.append(Step(kind="search", query=query, source=fmt, retrieved=docs))
        before = inp + out + (counter.count(turn.observation) if turn.observation else 0)
    return steps


def rollout_record(
    parsed: ParsedRollout,
    *,
    fmt: str,
    run_id: str,
    repeat: int,
    counter: TokenCounter,
    where: str,
    exact_counts: bool,
    correct_at: float = DEFAULT_CORRECT_AT,
) -> ExecutionRecord:
    """One parsed rollout as an ExecutionRecord (see the module docstring)."""
    condition = {STEP_KEY: parsed.step} if parsed.step is not None else {}
    qid = question_id(parsed.question, parsed.question_key)
    steps = usage_steps(parsed, counter, fmt)
    usages = [s.usage for s in steps if s.usage is not None]
    answer = parsed.final_answer
    judgments = []
    if parsed.score is not None:
        judgments.append(
            Judgment(
                judge=f"{fmt}:score",
                kind="answer",
                label="CORRECT" if parsed.score >= correct_at else "INCORRECT",
                raw=str(parsed.score),
            )
        )
    return ExecutionRecord(
        execution_id=execution_id(run_id, condition, qid, repeat=repeat),
        run_id=run_id,
        condition=condition,
        question_id=qid,
        question=parsed.question,
        answerable=True,
        gold_answers=parsed.gold_answers,
        repeat=repeat,
        status="ok" if answer is not None else "malformed",
        final_answer=answer,
        steps=steps,
        search_calls=sum(1 for s in steps if s.kind == "search"),
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        judgments=judgments,
        error=None if answer is not None else "the response holds no answer",
        imported_from=fmt,
        training_step=parsed.step,
        token_counts=COUNT_IDS if exact_counts else counter.label,
        rollout_source=where,
        **parsed.extra,
    )


def read_rollouts(
    paths: list[Path],
    parse: Callable[[dict[str, Any], str, int | None], ParsedRollout],
    *,
    fmt: str,
    run_id: str,
    counter: TokenCounter,
    steps: list[int | None] | None = None,
    correct_at: float = DEFAULT_CORRECT_AT,
) -> Iterator[tuple[ExecutionRecord, ParsedRollout]]:
    """Records of every rollout of the files, in file order; `steps[i]` is file i's training step
    (None: the dump's own `step`). `parse(obj, where, step)` reads one line."""
    repeats: dict[tuple[int | None, str], int] = {}
    for i, path in enumerate(paths):
        if not path.is_file():
            raise InputError(f"{path}: rollout file not found")
        override = steps[i] if steps else None
        n = 0
        for lineno, obj in iter_json_lines(path):
            where = f"{path} line {lineno}"
            parsed = parse(obj, where, override)
            qid = question_id(parsed.question, parsed.question_key)
            key = (parsed.step, qid)
            repeat = repeats.get(key, 0)
            repeats[key] = repeat + 1
            exact = parsed.prompt_tokens is not None
            yield (
                rollout_record(
                    parsed,
                    fmt=fmt,
                    run_id=run_id,
                    repeat=repeat,
                    counter=counter,
                    where=where,
                    exact_counts=exact,
                    correct_at=correct_at,
                ),
                parsed,
            )
            n += 1
        if n == 0:
            raise InputError(f"{path}: no rollouts in the file (expected one JSON object per line)")
