"""Prompts: few-shot completion prompts for base models and chat messages for instruct models.

The few-shot examples cover the four behaviours we measure: search, answer from evidence,
abstain on an unknowable question, correct a false premise, and ask for missing context.
None of them is about a topic of the demo question set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from branchpoint.agents import disclosure, transcript  # the state fields prompts are built from
from branchpoint.agents.protocols import JSON_DECISION_PREFIX

FEWSHOT_HEADER = (
    "An assistant answers questions. It may search an encyclopedia first. It answers briefly, "
    "and says so when a question cannot be answered, rests on a false premise, or lacks context.\n\n"
)

FEWSHOT_NO_SEARCH_HEADER = (
    "An assistant answers questions briefly, and says so when a question cannot be answered, "
    "rests on a false premise, or lacks context.\n\n"
)

#: (question, evidence lines, action, text): examples that show every decision. With no
#: evidence in hand the assistant searches (except when context is missing); with evidence it
#: abstains, corrects the premise, or answers. The answering examples come last: a base model
#: follows the most recent examples, and with them last it extracts answers from evidence more
#: often (measured on the demo set: 4/16 vs 0/16 answerable, at the cost of abstentions).
FEWSHOT_EXAMPLES: list[tuple[str, list[str], str, str]] = [
    ("How much did Julius Caesar's horse weigh at birth?", [], "search", "Julius Caesar horse weight"),
    (
        "How much did Julius Caesar's horse weigh at birth?",
        ['[1] "Julius Caesar" Julius Caesar was a Roman general and statesman.'],
        "answer",
        "I don't know: no record of that exists.",
    ),
    ("Why did Charles Dickens write Don Quixote?", [], "search", "Don Quixote author"),
    (
        "Why did Charles Dickens write Don Quixote?",
        ['[1] "Don Quixote" Don Quixote is a novel by Miguel de Cervantes, published in 1605.'],
        "answer",
        "He did not: Don Quixote was written by Miguel de Cervantes.",
    ),
    ("How old is the teacher?", [], "answer", "Which teacher do you mean? Please specify."),
    ("What is the capital of Portugal?", [], "search", "capital of Portugal"),
    (
        "What is the capital of Portugal?",
        ['[1] "Lisbon" Lisbon is the capital and largest city of Portugal.'],
        "answer",
        "Lisbon",
    ),
    ("Who wrote the novel Don Quixote?", [], "search", "Don Quixote author"),
    (
        "Who wrote the novel Don Quixote?",
        [
            '[1] "Don Quixote" Don Quixote is a novel by Miguel de Cervantes, published in 1605.',
            '[2] "Lisbon" Lisbon is the capital and largest city of Portugal.',
        ],
        "answer",
        "Miguel de Cervantes",
    ),
]

#: Examples for the no-search condition: the same behaviours, answered without evidence.
FEWSHOT_NO_SEARCH_EXAMPLES: list[tuple[str, list[str], str, str]] = [
    ("What is the capital of Portugal?", [], "answer", "Lisbon"),
    (
        "Why did Charles Dickens write Don Quixote?",
        [],
        "answer",
        "He did not: Don Quixote was written by Miguel de Cervantes.",
    ),
    ("How much did Julius Caesar's horse weigh at birth?", [], "answer", "I don't know: no record of that exists."),
    ("How old is the teacher?", [], "answer", "Which teacher do you mean? Please specify."),
]


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def evidence_lines(evidence: list[dict[str, Any]], words: int) -> list[str]:
    """Numbered evidence lines `[i] "Title" text`, one per distinct passage, clipped to `words`."""
    seen: set[str] = set()
    lines: list[str] = []
    for doc in evidence:
        if doc["doc_id"] in seen:
            continue
        seen.add(doc["doc_id"])
        title = f'"{doc["title"]}" ' if doc.get("title") else ""
        lines.append(f"[{len(lines) + 1}] {title}{_clip(doc['text'], words)}")
    return lines


def _block(question: str, evidence: list[str], with_evidence: bool, budget: str | None = None) -> str:
    out = f"Question: {question}\n"
    if with_evidence:
        out += "Evidence: " + (" ".join(evidence) if evidence else "(none)") + "\n"
    if budget:
        out += f"Budget: {budget}\n"
    return out + "Decision: "


def fewshot_budget_line(state: Mapping[str, Any], offered: bool) -> str | None:
    """The `Budget:` line of the few-shot prompt's current block (see `agents.disclosure`): the
    limits (`start`), and under `every_step` the budget left at this state; None when hidden."""
    parts = [disclosure.start_text(state, search=offered), disclosure.current_left_text(state, search=offered)]
    return " ".join(p for p in parts if p) or None


def fewshot_prompt(
    question: str,
    evidence: list[dict[str, Any]],
    allow_search: bool,
    evidence_words: int,
    history: list[dict[str, str]] | None = None,
    budget: str | None = None,
) -> str:
    """A completion prompt ending in JSON_DECISION_PREFIX, so the model writes the decision.

    Earlier turns of a multi-turn conversation (`history`) come right before the question, as
    answered blocks. `budget` is the disclosed budget (`fewshot_budget_line`), a `Budget:` line
    of the question's own block (the examples have none).
    """
    header = FEWSHOT_HEADER if allow_search else FEWSHOT_NO_SEARCH_HEADER
    examples = FEWSHOT_EXAMPLES if allow_search else FEWSHOT_NO_SEARCH_EXAMPLES
    parts = [header]
    for q, ev, action, text in examples:
        decision = json.dumps({"action": action, "text": text})
        parts.append(_block(q, ev, allow_search) + decision + "\n\n")
    for turn in history or []:
        decision = json.dumps({"action": "answer", "text": turn["answer"]})
        parts.append(f"Question: {turn['question']}\nDecision: {decision}\n\n")
    # Evidence in hand is always shown, also where search is no longer offered (a forced answer
    # in the no-search prompt): an answer "from the evidence you have" must see it.
    parts.append(_block(question, evidence_lines(evidence, evidence_words), allow_search or bool(evidence), budget))
    return "".join(parts) + JSON_DECISION_PREFIX


#: The prompt variants of the mitigation study (agent.prompt): `plain` says nothing about
#: abstaining; `abstention` (default) tells the model to abstain when it should; `fewshot` adds
#: worked examples of answering and abstaining; `self_eval` first asks the model whether the
#: question can be answered at all (an extra call, see the policies).
PROMPT_VARIANTS = ("plain", "abstention", "fewshot", "self_eval")

PLAIN_SYSTEM = "You answer questions accurately and briefly."
PLAIN_SEARCH_SYSTEM = (
    "You answer questions accurately and briefly. You may use the search tool to look things up in an encyclopedia."
)
FEWSHOT_CHAT_EXAMPLES = (
    "Examples:\n"
    "Q: What is the capital of Portugal? A: Lisbon.\n"
    "Q: Why did Charles Dickens write Don Quixote? A: He did not: Don Quixote was written by "
    "Miguel de Cervantes.\n"
    "Q: How much did Julius Caesar's horse weigh at birth? A: I don't know: no record of that exists.\n"
    "Q: How old is the teacher? A: Which teacher do you mean? Please specify."
)
SELF_EVAL_PROMPT = (
    "Before answering, decide whether this question can be answered at all: nobody knows the "
    "answer, it rests on a false premise, or it lacks the context needed. Reply with exactly "
    "'ABSTAIN: <one-sentence reason>' if it cannot be answered, or 'ANSWERABLE' if it can."
)

CHAT_SYSTEM = (
    "You answer questions accurately and briefly. You may use the search tool to look things up "
    "in an encyclopedia. If a question cannot be answered (nobody knows, it rests on a false "
    "premise, or it lacks context), say so instead of guessing: say you don't know, correct the "
    "premise, or ask for clarification."
)

CHAT_SYSTEM_NO_SEARCH = (
    "You answer questions accurately and briefly. If a question cannot be answered (nobody knows, "
    "it rests on a false premise, or it lacks context), say so instead of guessing: say you don't "
    "know, correct the premise, or ask for clarification."
)

TAGGED_PLAIN_SYSTEM = (
    "Answer the question. You may reason inside <think>...</think>. To search an encyclopedia, "
    "write <search>query</search> and stop; results come back inside <information>...</information>. "
    "Give the final answer as <answer>...</answer>."
)
TAGGED_SYSTEM = (
    TAGGED_PLAIN_SYSTEM + " If the question cannot be answered (nobody knows, a false premise, missing "
    "context), say so inside <answer>."
)

FORCE_ANSWER = "Answer now with the evidence you have; no more searches. Reply with the answer only."


def format_docs(docs: list[dict[str, Any]], words: int) -> str:
    """Search results in the Search-R1 style: `Doc i(Title: t) text`."""
    return "\n".join(f"Doc {i}(Title: {d.get('title') or ''}) {_clip(d['text'], words)}" for i, d in enumerate(docs, 1))


def system_prompt(*, tools: bool, allow_search: bool, variant: str = "abstention") -> str:
    """The system prompt of a chat policy for a prompt variant (see PROMPT_VARIANTS)."""
    if variant == "plain":  # nothing about abstaining; the tagged protocol still has to be explained
        if allow_search:
            return PLAIN_SEARCH_SYSTEM if tools else TAGGED_PLAIN_SYSTEM
        return PLAIN_SYSTEM
    if tools:
        system = CHAT_SYSTEM if allow_search else CHAT_SYSTEM_NO_SEARCH
    else:
        system = TAGGED_SYSTEM if allow_search else CHAT_SYSTEM_NO_SEARCH
    return system + ("\n\n" + FEWSHOT_CHAT_EXAMPLES if variant == "fewshot" else "")


def chat_messages(
    state: Mapping[str, Any], *, tools: bool, allow_search: bool, evidence_words: int, variant: str = "abstention"
) -> list[dict[str, Any]]:
    """The chat transcript for the native tool-call protocol (tools=True) or tagged text, built
    from the state alone: history, question, and each executed search of `transcript` (the model
    turn that asked for it, with its tool-call id and content, and the passages it returned).

    Earlier turns of a multi-turn conversation come first, as user / assistant messages. The
    reasoning text of earlier turns is kept in the transcript but not resent (vLLM's reasoning
    parsers and chat templates drop it from earlier turns).
    """
    system = system_prompt(tools=tools, allow_search=allow_search, variant=variant)
    limits = disclosure.start_text(state, search=allow_search)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system + (f"\n\n{limits}" if limits else "")}]
    for turn in state.get("history") or []:
        messages += [{"role": "user", "content": turn["question"]}, {"role": "assistant", "content": turn["answer"]}]
    messages.append({"role": "user", "content": state["question"]})
    for i, (entry, docs) in enumerate(transcript.searches(state)):
        model = entry.get("turn") or {}
        left = disclosure.entry_left_text(state, i, entry)
        after = f"\n\n{left}" if left else ""
        if tools:
            call_id = model.get("call_id") or "call_0"
            messages.append(
                {
                    "role": "assistant",
                    "content": model.get("content") or "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "search", "arguments": json.dumps({"query": entry["query"]})},
                        }
                    ],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": format_docs(docs, evidence_words) + after}
            )
        else:
            messages.append({"role": "assistant", "content": tagged_search_turn(model.get("content"), entry["query"])})
            messages.append(
                {
                    "role": "user",
                    "content": f"<information>{format_docs(docs, evidence_words)}</information>{after}",
                }
            )
    return messages


#: The protocols of the tagged policy (`agent.protocol`): `chat`, a system prompt and one message
#: per turn (each search's results in their own user message); `searchr1`, Search-R1's rollout:
#: its own prompt as the one user message, and every search's results inline in one assistant
#: sequence that the model continues (`searchr1_messages`).
TAGGED_PROTOCOLS = ("chat", "searchr1")

#: Search-R1's prompt, exactly as its data preparation writes it (`scripts/data_process/
#: nq_search.py`, `make_prefix`, template `base`; `infer.py` repeats it): the text its models were
#: trained on, so it is kept word for word ("as many times as your want" included).
SEARCHR1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)


def searchr1_question(question: str) -> str:
    """The question as Search-R1 puts it in its prompt: stripped, with a `?` added when it has none
    (`nq_search.py` and `infer.py` do both)."""
    question = question.strip()
    return question if question.endswith("?") else question + "?"


def searchr1_passages(docs: list[dict[str, Any]]) -> str:
    """Search results as Search-R1 renders them (`generation.py` `_passages2string`): one line
    `Doc i(Title: t) text` per passage, where `t` is the first line of the passage's contents
    (FlashRAG's `"Title"\\ntext`, so the title keeps its quotes) and `text` the rest, whole (no
    clipping), each line ending in a newline."""
    out = ""
    for i, doc in enumerate(docs, 1):
        contents = f'"{doc["title"]}"\n{doc["text"]}' if doc.get("title") else doc["text"]
        first, _, rest = contents.partition("\n")
        out += f"Doc {i}(Title: {first}) {rest}\n"
    return out


def searchr1_information(docs: list[dict[str, Any]]) -> str:
    """What Search-R1 appends to the sequence after a search (`generation.py`
    `execute_predictions`): the results, stripped, inside `<information>`, blank lines around."""
    return f"\n\n<information>{searchr1_passages(docs).strip()}</information>\n\n"


#: What the forced answer of the `searchr1` protocol opens in the sequence, so the model writes
#: the answer and `</answer>` (as the `constrained` policy opens its JSON decision).
SEARCHR1_ANSWER_OPEN = "<answer>"


def searchr1_messages(state: Mapping[str, Any], *, forced: bool = False) -> list[dict[str, Any]]:
    """Search-R1's rollout as chat messages, from the state alone: earlier turns (`history`) as
    user / assistant pairs, then its prompt for the question as the one user message, then (after
    a search, or for a forced answer) one assistant message holding the sequence so far: every
    search's model turn up to its `</search>` followed by its `<information>` block, the way
    Search-R1 concatenates responses and observations into one sequence. The client asks the
    server to continue that message (vLLM's `continue_final_message`; llama.cpp continues a final
    assistant message by itself), so the model sees what Search-R1's model sees: the chat template
    applied to the prompt, then the sequence. A forced answer ends the sequence with `<answer>`.
    A disclosed budget (`agents.disclosure`) is a line after the prompt's question (the prompt
    itself is kept word for word); under `every_step` the budget left follows each
    `<information>` block of the sequence."""
    messages: list[dict[str, Any]] = []
    for turn in state.get("history") or []:
        messages += [{"role": "user", "content": turn["question"]}, {"role": "assistant", "content": turn["answer"]}]
    prompt = SEARCHR1_PROMPT.format(question=searchr1_question(state["question"]))
    limits = disclosure.start_text(state, search=True)
    messages.append({"role": "user", "content": prompt + (f"{limits}\n" if limits else "")})
    sequence = ""
    for i, (entry, docs) in enumerate(transcript.searches(state)):
        left = disclosure.entry_left_text(state, i, entry)
        sequence += tagged_search_turn((entry.get("turn") or {}).get("content"), entry["query"])
        sequence += searchr1_information(docs) + (f"{left}\n\n" if left else "")
    if forced:
        sequence += SEARCHR1_ANSWER_OPEN
    if sequence:
        messages.append({"role": "assistant", "content": sequence})
    return messages


def tagged_search_turn(content: str | None, query: str) -> str:
    """The assistant turn of a tagged search as the model wrote it, up to its `</search>` tag
    (`<search>query</search>` when the turn's text is unknown or has no search tag)."""
    if content:
        end = content.find("</search>")
        if end >= 0 and "<search>" in content[:end]:
            return content[: end + len("</search>")]
    return f"<search>{query}</search>"
