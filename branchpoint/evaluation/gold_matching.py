"""The rule judge's second reading of one response: does it give a gold answer?

*Correctness* (`match_gold`) — a gold answer matches when it occurs in the response (SQuAD
normalisation, with punctuation deleted or turned into spaces, plural "s" ignored), or as a
person's shortened name ("Elizabeth Lail" for "Elizabeth Dean Lail", "Ford" for "Gerald
Ford", "FDR"), or when all its content words and every number occur (any order: "June 20,
1837" for "20 June 1837"; two of three content words suffice for long golds). A match does not
count when every occurrence is negated ("It wasn't Canberra") or hedged between candidates
("either 1989 or 1990"), or when another first name stands before a matched surname
("Theodore Roosevelt" for "Franklin D. Roosevelt"); a negation followed by "until" does not
negate ("didn't win one until 1952"). Ordinals count as numbers ("21st October 2016"), and a
royal's or saint's given name after a title matches "X of Y" ("Queen Charlotte" for "Charlotte
of Mecklenburg-Strelitz"). Gold "yes" / "no" is read from the response's polarity, unless the
response says it does not know ("I can't determine that" is no "no").

Yes/no golds reuse the "unknown" cues and the negation pattern of `abstention_rules`; the text
normalisation is in `answer_normalization`.

The rules were written while reading the `dev` part of tests/evaluation/data/judge_labels.jsonl
(batch 1, then batch 3 for error analysis); the `heldout` part (batches 1 and 2) was written before the rules it measures were frozen and is
never used to tune them (docs/judges.md reports both, tests/evaluation/test_judge_labels.py
re-measures the held-out part).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

from branchpoint.evaluation.abstention_rules import _NEGATION, _STOP, ABSTENTION_PATTERNS, _first
from branchpoint.evaluation.answer_normalization import _lower, _spaced, _stem, contained_gold, normalize_answer

_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
#: Words a gold answer may carry that a response naming the same thing often leaves out.
_GENERIC = frozenset(
    {"corporation", "company", "inc", "ltd", "co", "corp", "museum", "city", "president", "king", "queen"}
)
_TITLES = frozenset({"president", "king", "queen", "sir", "dr", "saint", "st"})
_NAME_PARTICLES = frozenset({"of", "de", "da", "van", "von", "der", "du", "la", "le", "in", "the", "al"})
_GOLD_CLAUSE = re.compile(r"[,;:.!?()\u2014\u2013]|\s-\s|\b(?:but|whereas|although|though|while|which)\b", re.I)
_NEG_WORDS = frozenset({"not", "never", "no", "neither", "nor"})
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
#: Titles that may stand before a royal's or saint's given name ("Queen Charlotte" for gold
#: "Charlotte of Mecklenburg-Strelitz").
_ROYAL_TITLES = frozenset(
    {
        "king",
        "queen",
        "prince",
        "princess",
        "emperor",
        "empress",
        "saint",
        "st",
        "lady",
        "lord",
        "duke",
        "duchess",
        "tsar",
        "pope",
    }
)


class GoldMatch(NamedTuple):
    """A gold answer found in a response and how: `contained`, `name` (shortened person name),
    `initials`, `words` (its content words in any order) or `polarity` (yes / no)."""

    gold: str
    how: str


class _Tok(NamedTuple):
    norm: str
    capital: bool
    clause: int


def _toks(text: str) -> list[_Tok]:
    """Word tokens (normalised, stemmed, number words as digits, articles dropped) with their
    capitalisation and clause number; "n't" becomes the word "not"."""
    text = re.sub(r"n[\u2019']t\b", " not", text)
    out = []
    for clause_no, clause in enumerate(_GOLD_CLAUSE.split(text)):
        if not clause:
            continue
        for word in "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in clause).split():
            low = word.lower()
            if low in ("a", "an", "the"):
                continue
            ordinal = _ORDINAL.match(low)
            norm = ordinal.group(1) if ordinal else _NUMBER_WORDS.get(low, _stem(low))
            out.append(_Tok(norm, word[:1].isupper(), clause_no))
    return out


def _find(seq: list[str], sub: list[str]) -> list[int]:
    n = len(sub)
    return [i for i in range(len(seq) - n + 1) if seq[i : i + n] == sub] if n else []


def _is_name(gold: str) -> bool:
    words = [w for w in re.findall(r"[\w'.-]+", gold) if w.lower() not in _NAME_PARTICLES]
    return len(words) >= 2 and all(w[:1].isupper() for w in words)


def _polarity(response: str) -> str:
    tokens = _spaced(response).split()
    if tokens and tokens[0] in ("yes", "yeah", "yep", "correct", "true"):
        return "yes"
    if tokens and tokens[0] in ("no", "nope", "false", "neither"):
        return "no"
    return "no" if _NEGATION.search(_lower(response)) else "yes"


def _says_unknown(response: str) -> bool:
    """True when a yes/no response does not start with yes / no and says it does not know."""
    tokens = _spaced(response).split()
    if tokens and tokens[0] in ("yes", "yeah", "yep", "no", "nope", "correct", "true", "false"):
        return False
    return _first((p for p in ABSTENTION_PATTERNS if p.family == "unknown"), _lower(response)) is not None


def _stands(toks: list[_Tok], start: int, end: int) -> bool:
    """True unless the span is negated (a negation earlier in its clause, not followed by "until":
    "didn't win one until 1952" gives 1952) or hedged ("either ... or")."""
    clause = toks[start].clause
    before = [t.norm for t in toks[:start] if t.clause == clause]
    after = [t.norm for t in toks[end:] if t.clause == clause]
    negs = [i for i, w in enumerate(before) if w in _NEG_WORDS]
    if negs and not {"until", "till"} & set(before[negs[-1] :]):
        return False
    return not ("either" in before and ("or" in before or "or" in after))


def _spans(words: list[str], gold_words: list[str], toks: list[_Tok]) -> list[int]:
    return [i for i in _find(words, gold_words) if _stands(toks, i, i + len(gold_words))]


def match_gold(response: str | None, gold_answers: Iterable[str]) -> GoldMatch | None:
    """The gold answer the response gives, and how it was found; None when it gives none (see
    the module docstring: containment, shortened names, initials, content words, yes / no)."""
    if not response or not response.strip():
        return None
    golds = [g for g in gold_answers if normalize_answer(g)]
    if golds and all(normalize_answer(g) in ("yes", "no") for g in golds):
        if _says_unknown(response):  # "I can't determine that" is no "no"
            return None
        polarity = _polarity(response)
        return next((GoldMatch(g, "polarity") for g in golds if normalize_answer(g) == polarity), None)
    toks = _toks(response)
    words = [t.norm for t in toks]
    present = set(words)
    rejected = set()
    for gold in golds:
        g_words = [t.norm for t in _toks(gold)]
        if _find(words, g_words):
            if _spans(words, g_words, toks):
                return GoldMatch(gold, "contained")
            rejected.add(gold)  # named, but only negated or hedged
        elif contained_gold(response, [gold]) is not None:
            return GoldMatch(gold, "contained")
    for gold in golds:
        if gold in rejected:
            continue
        match = _name_match(gold, toks, words) or _words_match(gold, present)
        if match is not None:
            return match
    return None


def _name_match(gold: str, toks: list[_Tok], words: list[str]) -> GoldMatch | None:
    """A person's name shortened: first + last name, initials (3+ names), or a surname that no
    other capitalised first name precedes."""
    if not _is_name(gold):
        return None
    name = [t.norm for t in _toks(gold) if t.norm not in _TITLES]
    if len(name) >= 3 and name[1] == "of":  # "Charlotte of Mecklenburg-Strelitz": "Queen Charlotte"
        for i in _spans(words, [name[0]], toks):
            if i > 0 and toks[i - 1].norm in _ROYAL_TITLES and toks[i - 1].clause == toks[i].clause:
                return GoldMatch(gold, "name")
    if len(name) >= 3:
        if _spans(words, [name[0], name[-1]], toks):
            return GoldMatch(gold, "name")
        initials = "".join(t[0] for t in name if t not in _NAME_PARTICLES)
        if len(initials) >= 3 and initials in words:
            return GoldMatch(gold, "initials")
    for k in range(len(name) - 1, 0, -1):
        suffix = name[-k:]
        if len(suffix[-1]) < 4 or (suffix[0] in _NAME_PARTICLES and k == 1):
            continue
        for i in _spans(words, suffix, toks):
            prev = toks[i - 1] if i > 0 and toks[i - 1].clause == toks[i].clause else None
            if prev is None or prev.norm in name or not prev.capital:
                return GoldMatch(gold, "name")
    return None


def _words_match(gold: str, present: set[str]) -> GoldMatch | None:
    """Every content word of the gold (two of three for golds of 3+ words) and every number."""
    content = [t.norm for t in _toks(gold) if t.norm not in _STOP and t.norm not in _GENERIC]
    if not content or not all(n in present for n in content if n.isdigit()):
        return None
    needed = len(content) if len(content) < 3 else max(2, -(-2 * len(content) // 3))
    if sum(t in present for t in content) >= needed and (len(content) > 1 or content[0] in present):
        return GoldMatch(gold, "words")
    return None
