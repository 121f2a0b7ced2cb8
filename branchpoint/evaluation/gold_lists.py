"""Gold-answer lists that look like alias dumps, flagged per question.

Some question sets carry, as a question's gold answers, the alias list of an entity from another
data set (SelfAware's answerable questions reuse TriviaQA-style alias lists: case variants of one
name, Wikipedia titles with their disambiguation, and redirect titles of unrelated things, so
"conventional vehicle" is accepted for banana oil while the right answer "Nectar" is marked
wrong elsewhere). Any judge that matches against such a list, the rule judge and an LLM judge
alike, then grades by the list rather than by the question. Nothing here changes a judgment:
`evaluate` reports the questions whose list looks like this (metrics.json
`gold_list_warnings`, one log line each) so that a person can check them.

A list of five or more gold answers looks like an alias dump when it shows at least two of:

- `case_variants`: two entries that differ only in case or spacing ("Banana oil", "banana oil");
- `wikipedia_titles`: an entry with a trailing disambiguation in parentheses ("Pear oil
  (solvent)") or an inverted name ("Huxley, Aldous");
- `unrelated_entries`: entries that share no content word with any other entry while most of
  the others are variants of each other ("conventional vehicle" beside "isoamyl acetate",
  "isopentyl acetate", "banana oil").

One signal alone is common in honest lists (Natural Questions' multi-answer lists name unrelated
things; "the courts" / "The courts"); two together fired on 6 of the 3,610 NQ-open dev questions
(`nq_open_dev.jsonl` of docs/data.md), lists that a person would want to look at anyway.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from branchpoint.evaluation.answer_normalization import normalize_answer
from branchpoint.traces import ExecutionRecord

log = logging.getLogger(__name__)

#: Lists shorter than this are never flagged.
MIN_ANSWERS = 5
#: How many of the signals must show.
MIN_SIGNALS = 2
_STOP = frozenset({"a", "an", "the", "of", "and", "in", "on", "at", "to", "for", "by", "s"})
_DISAMBIGUATION = re.compile(r"\([^)]*\)\s*$")
_INVERTED_NAME = re.compile(r"[A-Z][\w'-]+, [A-Z][\w' .-]+")


class GoldListWarning(BaseModel):
    """One question whose gold list looks like an alias dump, and why."""

    question_id: str
    question: str
    n_gold: int
    signals: list[str]
    examples: list[str]


def _content(gold: str) -> set[str]:
    return {w for w in normalize_answer(gold).split() if w not in _STOP}


def alias_dump_signals(gold_answers: Sequence[str]) -> dict[str, list[str]]:
    """The alias-dump signals a gold list shows (see the module docstring), each with the
    entries that show it; empty when the list is short or shows fewer than `MIN_SIGNALS`."""
    golds = [g for g in gold_answers if normalize_answer(g)]
    if len(golds) < MIN_ANSWERS:
        return {}
    signals: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for gold in golds:
        key = " ".join(gold.lower().split())
        if key in seen and seen[key] != gold:
            signals.setdefault("case_variants", []).append(gold)
        seen.setdefault(key, gold)
    titles = [g for g in golds if _DISAMBIGUATION.search(g) or _INVERTED_NAME.fullmatch(g.strip())]
    if titles:
        signals["wikipedia_titles"] = titles
    words = [_content(g) for g in golds]
    linked = [any(words[i] & words[j] for j in range(len(words)) if j != i) for i in range(len(words))]
    unrelated = [g for g, is_linked in zip(golds, linked, strict=True) if not is_linked]
    if unrelated and sum(linked) >= max(2, len(golds) / 2):
        signals["unrelated_entries"] = unrelated
    return signals if len(signals) >= MIN_SIGNALS else {}


def gold_list_warnings(records: Iterable[ExecutionRecord]) -> list[GoldListWarning]:
    """One warning per question (first record of each question id) whose gold list looks like
    an alias dump, in the order the questions first appear; each is also logged."""
    out: list[GoldListWarning] = []
    done: set[str] = set()
    for record in records:
        if record.question_id in done:
            continue
        done.add(record.question_id)
        signals = alias_dump_signals(record.gold_answers)
        if not signals:
            continue
        examples = list(dict.fromkeys(g for entries in signals.values() for g in entries))[:5]
        warning = GoldListWarning(
            question_id=record.question_id,
            question=record.question,
            n_gold=len(record.gold_answers),
            signals=sorted(signals),
            examples=examples,
        )
        log.warning(
            "question %s: its %d gold answers look like an alias dump (%s: %s); check them before trusting its grades",
            warning.question_id,
            warning.n_gold,
            ", ".join(warning.signals),
            "; ".join(examples),
        )
        out.append(warning)
    return out
