"""Checks on a generated negative-evidence document before it enters a corpus: it must not copy
the prompt's own example (a small model often repeats the few-shot entry), and it must not
contradict what is known about its question (its gold answers, or the note of an unanswerable
question such as "Sydney is not the capital of Australia"), judged by a model call."""

from __future__ import annotations

import re
from collections.abc import Sequence

from branchpoint.retrieval.negative_evidence.prompts import EXAMPLE_TEXTS

#: Words per shingle of the copy check, and the share of the document's shingles found in an
#: example that makes it a copy (an entry written afresh shares almost no 6-word run with it).
SHINGLE_WORDS = 6
COPY_SHARE = 0.2

COPIES_EXAMPLE = "copies the prompt's example"
CONTRADICTS_FACTS = "contradicts the question's known facts"


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)}


def copied_share(text: str, examples: Sequence[str] = EXAMPLE_TEXTS) -> float:
    """The largest share of `text`'s 6-word runs that one of the prompt's examples also has."""
    own = _shingles(text)
    if not own:
        return 0.0
    return max((len(own & _shingles(ex)) / len(own) for ex in examples), default=0.0)


def copies_example(text: str, examples: Sequence[str] = EXAMPLE_TEXTS) -> bool:
    """Whether `text` copies one of the prompt's examples (`COPY_SHARE` of its 6-word runs)."""
    return copied_share(text, examples) >= COPY_SHARE


def known_facts(question: object) -> list[str]:
    """What the question's file says is true: its gold answers and its note (empty when neither)."""
    facts = []
    gold = [str(g) for g in getattr(question, "gold_answers", None) or [] if str(g).strip()]
    if gold:
        facts.append("The correct answer is: " + " / ".join(gold) + ".")
    note = getattr(question, "note", None)
    if isinstance(note, str) and note.strip():
        facts.append(note.strip())
    return facts


_CHECK = """\
Known facts about the question below:
{facts}

Question: {question}

Document:
{title}
{text}

Does the document state anything that contradicts the known facts (for example, that a false \
premise of the question is true, or an answer other than the correct one)? Reply with one word: \
CONTRADICTS or CONSISTENT."""


def check_messages(question: str, facts: Sequence[str], title: str, text: str) -> list[dict[str, str]]:
    """The chat prompt of the fact check."""
    body = _CHECK.format(facts="\n".join(f"- {f}" for f in facts), question=question.strip(), title=title, text=text)
    return [{"role": "user", "content": body}]


def check_prompt(question: str, facts: Sequence[str], title: str, text: str) -> str:
    """The completion prompt of the fact check (it ends where the one-word verdict goes)."""
    return check_messages(question, facts, title, text)[0]["content"] + "\nVerdict:"


def parse_verdict(reply: str) -> bool | None:
    """True for CONTRADICTS, False for CONSISTENT, None when the reply says neither (or both)."""
    found = set(re.findall(r"\b(CONTRADICTS|CONSISTENT)\b", reply.upper()))
    return None if len(found) != 1 else found == {"CONTRADICTS"}
