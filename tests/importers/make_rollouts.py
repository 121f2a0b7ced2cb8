"""Write the example rollout dumps shipped in branchpoint/data/rollouts (and used by the tests).

Each file is modeled on what the tools' own code writes, written here from that code (not from
branchpoint's readers, so the readers are checked against an independent rendering):

- `searchr1_step{10,50,100}.jsonl`: Search-R1 (github PeterGriffinJin/Search-R1). The sequence is
  what `RewardManager.__call__` (verl/trainer/main_ppo.py) decodes, prompt then response, special
  tokens kept: the prompt is `make_prefix` of scripts/data_process/nq_search.py (template `base`)
  in Qwen2.5's chat template; the response is the concatenation `run_llm_loop`
  (search_r1/llm_agent/generation.py) builds: each turn cut after `</search>` / `</answer>`, a
  search followed by `\\n\\n<information>{_passages2string(result).strip()}</information>\\n\\n`,
  an invalid turn by the fixed invalid-action message. Beside it, the batch item's non-tensor
  fields as nq_search.py writes them (`data_source`, `reward_model`, `extra_info`) and the EM
  score of `qa_em.compute_score_em`, and the step.
- `verl_step{10,100}.jsonl`: verl (github volcengine/verl) `_dump_generations`
  (verl/trainer/ppo/ray_trainer.py): `input`, `output` (decoded with skip_special_tokens=True),
  `gts`, `score`, `step`, for the Search-R1-like tool agent (examples/data_preprocess/
  preprocess_search_r1_dataset.py's prompt; verl/tools/search_tool.py's `{"result": ...}` with
  verl/tools/utils/search_r1_like_utils.py's `Doc i (Title: t)\\ntext` passages).
- `verl_agent_loop.jsonl`: `AgentLoopOutput.model_dump()` (verl/experimental/agent_loop/
  agent_loop.py: prompt_ids, response_ids, response_mask, response_logprobs, routed_experts,
  multi_modal_data, reward_score, num_turns, metrics, extra_fields), with `gts` and `step`
  beside it, ids from `tokenizer.json` (a small byte-level BPE trained on these texts: the
  "run's tokenizer" of the example).

Run: python -m tests.importers.make_rollouts [OUT_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "branchpoint" / "data" / "rollouts"

# A tiny corpus in FlashRAG's form: contents = '"Title"\ntext'.
CORPUS = {
    "frankenstein": '"Frankenstein"\nFrankenstein; or, The Modern Prometheus is an 1818 novel written by Mary Shelley.',
    "shelley": '"Mary Shelley"\nMary Wollstonecraft Shelley was an English novelist who wrote the Gothic novel Frankenstein.',
    "canberra": '"Canberra"\nCanberra is the capital city of Australia, founded following the federation of the colonies.',
    "sydney": '"Sydney"\nSydney is the capital city of the state of New South Wales and the most populous city in Australia.',
    "mona": '"Mona Lisa"\nThe Mona Lisa is a half-length portrait painting by Italian artist Leonardo da Vinci.',
    "wall": '"Berlin Wall"\nThe Berlin Wall fell on 9 November 1989, when the East German government opened the border.',
    "jupiter": '"Jupiter"\nJupiter is the fifth planet from the Sun and the largest in the Solar System.',
    "fleming": '"Alexander Fleming"\nSir Alexander Fleming was a Scottish physician who discovered penicillin in 1928.',
}
QUESTIONS = [  # (index, question as in the data set, golden answers, passages a search returns)
    (0, "who wrote the novel frankenstein", ["Mary Shelley"], ["frankenstein", "shelley"]),
    (1, "what is the capital of australia", ["Canberra"], ["canberra", "sydney"]),
    (2, "who painted the mona lisa", ["Leonardo da Vinci"], ["mona", "frankenstein"]),
    (3, "when did the berlin wall fall", ["1989", "9 November 1989"], ["wall", "canberra"]),
    (4, "what is the largest planet in the solar system", ["Jupiter"], ["jupiter", "sydney"]),
    (5, "who discovered penicillin", ["Alexander Fleming"], ["fleming", "shelley"]),
]
#: (searches, answer or None for "no answer", invalid turn first) per rollout, per step and question:
#: early training answers from memory, later it searches more and more (over-searching).
WRONG = {0: "Percy Shelley", 1: "Sydney", 2: "Michelangelo", 3: "1991", 4: "Saturn", 5: "Louis Pasteur"}
PLANS: dict[int, list[list[tuple[int, str | None, bool]]]] = {
    10: [
        [(0, "Mary Shelley", False), (0, "Percy Shelley", False)],
        [(0, "Sydney", False), (1, "Canberra", False)],
        [(0, "Leonardo da Vinci", False), (0, "Leonardo da Vinci", False)],
        [(0, "1989", False), (0, None, True)],
        [(0, "Jupiter", False), (1, "Jupiter", False)],
        [(1, "Alexander Fleming", False), (0, "Louis Pasteur", False)],
    ],
    50: [
        [(1, "Mary Shelley", False), (0, "Mary Shelley", False)],
        [(1, "Canberra", False), (1, "Canberra", False)],
        [(1, "Leonardo da Vinci", False), (0, "Leonardo da Vinci", False)],
        [(1, "1989", False), (2, "9 November 1989", False)],
        [(0, "Jupiter", False), (1, "Jupiter", False)],
        [(1, "Alexander Fleming", False), (1, "Alexander Fleming", False)],
    ],
    100: [
        [(2, "Mary Shelley", False), (1, "Mary Shelley", False)],
        [(2, "Canberra", False), (1, "Canberra", False)],
        [(1, "Leonardo da Vinci", False), (2, "Leonardo da Vinci", False)],
        [(2, "1989", False), (1, "1989", False)],
        [(1, "Jupiter", False), (3, "Jupiter", False)],
        [(2, "Alexander Fleming", False), (0, "Alexander Fleming", False)],
    ],
}

# --- Search-R1 -------------------------------------------------------------------------------
SR1_PREFIX = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)
QWEN_SYSTEM = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
SR1_INVALID = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)


def sr1_passages(keys: list[str]) -> str:
    """`_passages2string` of generation.py."""
    out = ""
    for i, key in enumerate(keys):
        content = CORPUS[key]
        title = content.split("\n")[0]
        text = "\n".join(content.split("\n")[1:])
        out += f"Doc {i + 1}(Title: {title}) {text}\n"
    return out


def em(answer: str | None, golden: list[str]) -> float:
    """qa_em.compute_score_em on a sequence whose last answer is `answer` (normalised EM)."""
    import re
    import string

    def norm(s: str) -> str:
        s = s.lower()
        s = "".join(ch for ch in s if ch not in set(string.punctuation))
        s = re.sub(r"\b(a|an|the)\b", " ", s)
        return " ".join(s.split())

    return 1.0 if answer is not None and any(norm(answer) == norm(g) for g in golden) else 0.0


def searchr1_line(step: int, index: int, question: str, golden: list[str], keys: list[str], plan: tuple) -> dict:
    searches, answer, invalid = plan
    q = question.strip()
    q = q if q.endswith("?") else q + "?"
    prompt = QWEN_SYSTEM + "<|im_start|>user\n" + SR1_PREFIX.format(question=q) + "<|im_end|>\n<|im_start|>assistant\n"
    response = ""
    if invalid:
        response += "<think> I think I know this one. </think> The answer is 1990." + SR1_INVALID
    for k in range(searches):
        query = q.rstrip("?") if k == 0 else f"{q.rstrip('?')} details"
        response += f"<think> I need to look this up (search {k + 1}). </think>\n<search> {query} </search>"
        response += f"\n\n<information>{sr1_passages(keys).strip()}</information>\n\n"
    if answer is not None:
        response += f"<think> Based on what I know, the answer is clear. </think>\n<answer> {answer} </answer>"
    else:
        response += "<think> I am still not sure what to say here"
    sequence = prompt + response + "<|im_end|>"
    return {
        "sequences_str": sequence,
        "data_source": "nq",
        "reward_model": {"style": "rule", "ground_truth": {"target": golden}},
        "extra_info": {"split": "train", "index": index},
        "score": em(answer, golden),
        "step": step,
    }


# --- verl --------------------------------------------------------------------------------------
VERL_PREFIX = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <tool_call> query </tool_call> and it will return the top searched results between <tool_response> and "
    "</tool_response>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: "
)


def verl_passages(keys: list[str]) -> str:
    """`_passages2string` of search_r1_like_utils.py."""
    out = ""
    for i, key in enumerate(keys):
        content = CORPUS[key]
        title = content.split("\n")[0]
        text = "\n".join(content.split("\n")[1:])
        out += f"Doc {i + 1} (Title: {title})\n{text}\n\n"
    return out.strip()


def verl_turns(question: str, keys: list[str], plan: tuple) -> tuple[str, list[tuple[int, str]]]:
    """(input, [(mask, text), ...]): the prompt as decoded without special tokens, and the
    response's pieces, 1 for model text, 0 for the tool message and the next generation prompt."""
    searches, answer, _ = plan
    prompt = f"system\nYou are a helpful and harmless assistant.\nuser\n{VERL_PREFIX}{question}?\nassistant\n"
    pieces: list[tuple[int, str]] = []
    for k in range(searches):
        query = question if k == 0 else f"{question} details"
        call = json.dumps({"name": "search", "arguments": {"query_list": [query]}})
        pieces.append((1, f"<think> Let me search (search {k + 1}). </think>\n<tool_call>\n{call}\n</tool_call>"))
        result = json.dumps({"result": verl_passages(keys)}, ensure_ascii=False)
        pieces.append((0, f"\nuser\n<tool_response>\n{result}\n</tool_response>\nassistant\n"))
    final = f"<answer> {answer} </answer>" if answer is not None else "I do not know"
    pieces.append((1, f"<think> I can answer now. </think>\n{final}"))
    return prompt, pieces


def verl_dump_line(step: int, question: str, golden: list[str], keys: list[str], plan: tuple) -> dict:
    prompt, pieces = verl_turns(question, keys, plan)
    return {
        "input": prompt,
        "output": "".join(t for _, t in pieces),
        "gts": {"target": golden},
        "score": em(plan[1], golden),
        "step": step,
    }


def train_tokenizer(texts: list[str]):  # type: ignore[no-untyped-def]
    """A small byte-level BPE (the example run's tokenizer), deterministic for these texts."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def agent_loop_line(tok, step: int, question: str, golden: list[str], keys: list[str], plan: tuple) -> dict:  # type: ignore[no-untyped-def]
    prompt, pieces = verl_turns(question, keys, plan)
    response_ids: list[int] = []
    mask: list[int] = []
    for m, text in pieces:
        ids = tok.encode(text, add_special_tokens=False).ids
        response_ids += ids
        mask += [m] * len(ids)
    return {
        "prompt_ids": tok.encode(prompt, add_special_tokens=False).ids,
        "response_ids": response_ids,
        "response_mask": mask,
        "response_logprobs": None,
        "routed_experts": None,
        "multi_modal_data": None,
        "reward_score": em(plan[1], golden),
        "num_turns": 2 + 2 * plan[0],
        "metrics": {"generate_sequences": 0.8 + 0.4 * plan[0], "tool_calls": 0.05 * plan[0], "num_preempted": -1},
        "extra_fields": {},
        "gts": {"target": golden},
        "step": step,
    }


def write(out: Path = OUT) -> list[Path]:
    """Write every example file into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[dict]] = {}
    for step, plans in PLANS.items():
        files[f"searchr1_step{step}.jsonl"] = [
            searchr1_line(step, i, q, g, keys, p) for (i, q, g, keys), group in zip(QUESTIONS, plans) for p in group
        ]
    for step in (10, 100):
        files[f"verl_step{step}.jsonl"] = [
            verl_dump_line(step, q, g, keys, p) for (_, q, g, keys), group in zip(QUESTIONS, PLANS[step]) for p in group
        ]
    texts = [line["input"] + line["output"] for line in files["verl_step10.jsonl"] + files["verl_step100.jsonl"]]
    tok = train_tokenizer(texts)
    tok.save(str(out / "tokenizer.json"))
    files["verl_agent_loop.jsonl"] = [
        agent_loop_line(tok, 100, q, g, keys, p) for (_, q, g, keys), group in zip(QUESTIONS, PLANS[100]) for p in group
    ]
    paths = []
    for name, lines in files.items():
        path = out / name
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(p)
