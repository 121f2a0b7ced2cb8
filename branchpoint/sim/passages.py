"""The passages a request shows the simulated model, and what its behaviour reads from them.

A passage is its title and its text as the prompt shows it (clipped as `branchpoint.agents.prompts`
clips it); passages count once however often they are shown (`distinct`, by title and text).
`Features` are what the answer and search distributions of `branchpoint.sim.behaviour` depend on:
whether a gold-bearing passage is shown (a gold answer occurs in its title or text, folded:
`matching.holds_gold`) and how many negative passages (a cue of uncertainty:
`matching.negative_cue`) and positive ones (all the others) are shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from branchpoint.datasets.questions import Question
from branchpoint.sim.matching import holds_gold, negative_cue


@dataclass(frozen=True)
class Passage:
    """A passage as shown to the model: its title and (clipped) text."""

    title: str
    text: str


def clip_words(text: str, words: int) -> str:
    """The clipping the prompts apply (`branchpoint.agents.prompts`): first `words` words + ' ...'."""
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def shown_passage(doc: Mapping[str, Any], evidence_words: int) -> Passage:
    """How a retrieved document appears in a prompt that clips passages to `evidence_words`."""
    return Passage(doc.get("title") or "", clip_words(doc.get("text") or "", evidence_words))


def distinct(passages: Iterable[Passage]) -> list[Passage]:
    """The passages in the order first shown, each once."""
    seen: set[Passage] = set()
    out = []
    for p in passages:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


@dataclass(frozen=True)
class Features:
    """What the answer and search distributions depend on."""

    gold: bool
    n_pos: int
    n_neg: int

    @property
    def n(self) -> int:
        """The number of distinct passages shown."""
        return self.n_pos + self.n_neg


def features(question: Question | None, passages: Iterable[Passage]) -> Features:
    """Gold-bearing shown?, and the numbers of positive and negative passages (distinct)."""
    gold = False
    n_pos = n_neg = 0
    for p in distinct(passages):
        both = f"{p.title}\n{p.text}"
        if question is not None and question.gold_answers and holds_gold(both, question.gold_answers):
            gold = True
        if negative_cue(both):
            n_neg += 1
        else:
            n_pos += 1
    return Features(gold, n_pos, n_neg)
