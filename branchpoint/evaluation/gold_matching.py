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
response says it does not know ("I can't determine that" is no "no"). Units and number words
are read in one spelling on both sides ("212 degrees Fahrenheit" = "212 °F" = "212F",
"eighty-eight" = "88", "$15,000,000" = "$15 million", "seventy miles per hour" = "70 mph"). A
gold named only after a ranking connective, in a sentence that opens with another candidate
("Buzz Aldrin was first, followed by Armstrong"; "It fell in 1991, two years after ... 1989"),
is not given (`demoted`): a contradicting candidate makes the answer INCORRECT (the
over-searching study's answer prompt, section "LLM Judge Evaluation Protocol", after SimpleQA).

Yes/no golds reuse the "unknown" cues and the negation pattern of `abstention_rules`; the text
normalisation is in `answer_normalization`.

The rules were written while reading the `dev` part of tests/evaluation/data/judge_labels.jsonl
(batch 1, then batch 3 for error analysis) and of judge_labels_adversarial.jsonl (batch 4: units,
number words, contradicting candidates); the `heldout` parts (batches 1, 2 and 4) were written before the rules they measure were frozen and are
never used to tune them (docs/judges.md reports both, tests/evaluation/test_judge_labels.py
re-measures the held-out part).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

from branchpoint.evaluation.abstention_rules import ABSTENTION_PATTERNS, NEGATION, first_match
from branchpoint.evaluation.answer_normalization import (
    STOP_WORDS,
    contained_gold,
    lower_straight_quotes,
    normalize_answer,
    normalize_spaced,
    stem_plural,
)

_UNITS_WORDS = [
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
]
_NUMBER_WORDS: dict[str, int] = {w: i for i, w in enumerate(_UNITS_WORDS)}
_TENS: dict[str, int] = {
    w: 10 * i
    for i, w in enumerate(["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"])
    if i >= 2
}
_SCALES: dict[str, int] = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
#: Units written out, abbreviated or as symbols, each to one spelling ("212 degrees Fahrenheit"
#: and "212 °F" both read "212 fahrenheit"); "degree" itself says nothing once the scale is named.
_UNIT_SYNONYMS: dict[str, str] = {
    "f": "fahrenheit",
    "fahrenheit": "fahrenheit",
    "c": "celsius",
    "celsius": "celsius",
    "centigrade": "celsius",
    "km": "km",
    "kilometre": "km",
    "kilometer": "km",
    "m": "m",
    "metre": "m",
    "meter": "m",
    "cm": "cm",
    "centimetre": "cm",
    "centimeter": "cm",
    "mm": "mm",
    "millimetre": "mm",
    "millimeter": "mm",
    "mi": "mi",
    "mile": "mi",
    "ft": "ft",
    "foot": "ft",
    "feet": "ft",
    "kg": "kg",
    "kilogram": "kg",
    "kilogramme": "kg",
    "g": "g",
    "gram": "g",
    "gramme": "g",
    "lb": "lb",
    "lbs": "lb",
    "mph": "mi/h",
    "kph": "km/h",
    "kmh": "km/h",
    "percent": "percent",
}
_DROPPED_UNITS = frozenset({"degree"})
#: A number with a unit glued on ("212F", "100C", "8849m", "120km"): split before the unit.
_GLUED_UNIT = re.compile(r"(?<=\d)(?=(?:km|kg|mph|kph|cm|mm|mi|ft|lbs?|m|f|c|g)\b)", re.I)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DECIMAL = re.compile(r"(?<=\d)\.(?=\d)")
_DECIMAL_MARK = "dpoint"


def _is_number(token: str) -> bool:
    return bool(re.fullmatch(r"\d+(?:\.\d+)?", token))


def _number_value(token: str) -> float | None:
    if _is_number(token):
        return float(token)
    return None


def _show_number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _read_numbers(words: list[str]) -> list[tuple[str, int, int]]:
    """Number phrases as (digits, start, end) over `words`: number words in the order English
    writes them ("two hundred and twelve", "eighty eight", "one thousand four hundred and
    forty"), and digits with a scale word ("380 thousand", "8.3 million"). Digits next to digits
    stay apart ("4 2" from "4-2" is a score, not 6)."""
    out = []
    i = 0
    while i < len(words):
        w = words[i]
        start = i
        total, current, last = 0.0, 0.0, ""
        value = _number_value(w)
        if value is not None:
            if i + 1 < len(words) and words[i + 1] in _SCALES:
                out.append((_show_number(value * _SCALES[words[i + 1]]), i, i + 2))
                i += 2
                continue
            i += 1
            continue
        if w not in _NUMBER_WORDS and w not in _TENS:
            i += 1
            continue
        while i < len(words):
            w = words[i]
            if w in _NUMBER_WORDS and last in ("", "tens", "hundred", "scale", "and"):
                if last == "tens" and _NUMBER_WORDS[w] >= 10:
                    break
                current += _NUMBER_WORDS[w]
                last = "unit"
            elif w in _TENS and last in ("", "hundred", "scale", "and"):
                current += _TENS[w]
                last = "tens"
            elif w == "hundred" and last in ("unit", "tens") and current < 100:
                current *= 100
                last = "hundred"
            elif w in _SCALES and last in ("unit", "tens", "hundred"):
                total += current * _SCALES[w]
                current = 0.0
                last = "scale"
            elif w == "and" and last in ("hundred", "scale") and i + 1 < len(words):
                nxt = words[i + 1]
                if nxt not in _NUMBER_WORDS and nxt not in _TENS:
                    break
                last = "and"
            else:
                break
            i += 1
        out.append((_show_number(total + current), start, i))
    return out


def _canonical_words(words: list[str]) -> list[tuple[str, int]]:
    """Number phrases as digits and units in one spelling ("km per hour", "kilometres per
    hour" and "km/h" all "km/h"; "per cent" and "%" both "percent"), each with the index of
    its first word. A one-letter unit ("F", "C", "m", "g") counts only after a number."""
    numbers = {start: (digits, end) for digits, start, end in _read_numbers(words)}
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(words):
        if i in numbers:
            digits, end = numbers[i]
            out.append((digits, i))
            i = end
            continue
        w = words[i]
        after_number = bool(out) and _is_number(out[-1][0])
        if w == "per" and i + 1 < len(words) and words[i + 1] == "cent":
            out.append(("percent", i))
            i += 2
            continue
        if w in _DROPPED_UNITS and after_number:
            i += 1
            continue
        unit = _UNIT_SYNONYMS.get(w) if len(w) > 1 or after_number else None
        if unit in ("km", "mi", "m") and i + 1 < len(words):
            rest = words[i + 1 : i + 3]
            if rest[:1] in (["h"], ["hour"]):
                out.append((f"{unit}/h", i))
                i += 2
                continue
            if rest in (["per", "hour"], ["an", "hour"], ["per", "h"]):
                out.append((f"{unit}/h", i))
                i += 3
                continue
        out.append((unit or w, i))
        i += 1
    return out


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
    """Word tokens (normalised, stemmed, articles dropped, number phrases as digits, units in
    one spelling: `_canonical_words`) with their capitalisation and clause number; "n't"
    becomes the word "not", "8,849" is 8849 and "98.6" stays one number."""
    text = re.sub(r"n[\u2019']t\b", " not", text)
    text = _DECIMAL.sub(_DECIMAL_MARK, _THOUSANDS.sub("", text))
    text = _GLUED_UNIT.sub(" ", text.replace("%", " percent "))
    out: list[_Tok] = []
    for clause_no, clause in enumerate(_GOLD_CLAUSE.split(text)):
        if not clause:
            continue
        words, capitals = [], []
        for word in "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in clause).split():
            low = word.lower()
            if low in ("a", "an", "the"):
                continue
            ordinal = _ORDINAL.match(low)
            plain = low if low in _UNIT_SYNONYMS else stem_plural(low)  # "celsius" is no plural
            words.append(ordinal.group(1) if ordinal else plain.replace(_DECIMAL_MARK, "."))
            capitals.append(word[:1].isupper())
        out.extend(_Tok(norm, capitals[i], clause_no) for norm, i in _canonical_words(words))
    return out


def _find(seq: list[str], sub: list[str]) -> list[int]:
    n = len(sub)
    return [i for i in range(len(seq) - n + 1) if seq[i : i + n] == sub] if n else []


def _is_name(gold: str) -> bool:
    words = [w for w in re.findall(r"[\w'.-]+", gold) if w.lower() not in _NAME_PARTICLES]
    return len(words) >= 2 and all(w[:1].isupper() for w in words)


def _polarity(response: str) -> str:
    tokens = normalize_spaced(response).split()
    if tokens and tokens[0] in ("yes", "yeah", "yep", "correct", "true"):
        return "yes"
    if tokens and tokens[0] in ("no", "nope", "false", "neither"):
        return "no"
    return "no" if NEGATION.search(lower_straight_quotes(response)) else "yes"


def _says_unknown(response: str) -> bool:
    """True when a yes/no response does not start with yes / no and says it does not know."""
    tokens = normalize_spaced(response).split()
    if tokens and tokens[0] in ("yes", "yeah", "yep", "no", "nope", "correct", "true", "false"):
        return False
    return (
        first_match((p for p in ABSTENTION_PATTERNS if p.family == "unknown"), lower_straight_quotes(response))
        is not None
    )


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


def match_gold(response: str | None, gold_answers: Iterable[str], question: str | None = None) -> GoldMatch | None:
    """The gold answer the response gives, and how it was found; None when it gives none (see
    the module docstring: containment, shortened names, initials, content words, yes / no).

    A gold answer that the response only names after another candidate it puts first ("Buzz
    Aldrin was first, followed by Armstrong") is not given (`demoted`); `question` tells when
    the question asks for the one that comes after ("Who was the second ...?").
    """
    if not response or not response.strip():
        return None
    found = _match_gold(response, gold_answers)
    while found is not None and demoted(response, found.gold, question):
        gold_answers = [g for g in gold_answers if g != found.gold]
        found = _match_gold(response, gold_answers)
    return found


def _match_gold(response: str, gold_answers: Iterable[str]) -> GoldMatch | None:
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
    content = [t.norm for t in _toks(gold) if t.norm not in STOP_WORDS and t.norm not in _GENERIC]
    if not content or not all(n in present for n in content if _is_number(n)):
        return None
    needed = len(content) if len(content) < 3 else max(2, -(-2 * len(content) // 3))
    if sum(t in present for t in content) >= needed and (len(content) > 1 or content[0] in present):
        return GoldMatch(gold, "words")
    return None


#: Connectives that rank what follows them after what precedes them.
_DEMOTING = re.compile(r"\b(?:followed by|ahead of|preceded by|after|before)\b", re.I)
#: Questions that ask for what comes later or earlier: there the connective promotes.
_ASKS_ORDER = re.compile(
    r"\b(?:second|third|fourth|fifth|last|next|later|after|before|follow\w*|succe\w*|preced\w*|runners?[- ]up)\b", re.I
)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+")
_SCOPE_END = re.compile(r"[,;:\u2014\u2013]|\s-\s|\b(?:but|whereas|while|although|though|which|who)\b", re.I)
_PRONOUN_SUBJECT = re.compile(r"^\s*(?:it|he|she|they)\b", re.I)
_NOT_CANDIDATES = frozenset({"it", "he", "she", "they", "this", "that", "there", "in", "on", "at", "i", "we"})


def demoted(response: str, gold: str, question: str | None = None) -> bool:
    """True when every sentence that names `gold` first states another candidate and names the
    gold only after a ranking connective ("followed by", "ahead of", "after", "before"):
    "Buzz Aldrin was first, followed by Armstrong", "It fell in 1991, two years after the
    protests of 1989" - a contradicting candidate (over-searching study, answer prompt: INCORRECT
    when a statement contradicts the gold target, as in SimpleQA's grader).

    The candidate is, for a numeric gold, another number in a first part that speaks of the
    question's subject (a pronoun subject or a word of the question); otherwise a capitalised
    name opening the sentence that is neither the gold nor in the question. "It fell in 1989,
    two years before ... 1991" and "Armstrong, followed by Aldrin" give the gold; questions
    that ask for what comes later ("the second ...") never demote.
    """
    if question is not None and _ASKS_ORDER.search(question):
        return False
    gold_words = [t.norm for t in _toks(gold)]
    numeric = any(_is_number(w) for w in gold_words)
    q_words = {t.norm for t in _toks(question or "")}
    seen = False
    for sentence in _SENTENCE.split(response.strip()):
        if _match_gold(sentence, [gold]) is None:
            continue
        seen = True
        cut = _DEMOTING.search(sentence)
        if cut is None:
            return False
        head, after = sentence[: cut.start()], sentence[cut.end() :]
        scope = _SCOPE_END.split(after, maxsplit=1)[0]  # what the connective ranks
        if (
            _match_gold(head, [gold]) is not None
            or _match_gold(scope, [gold]) is None
            or not _names_candidate(head, gold_words, q_words, numeric)
        ):
            return False
    return seen


def _names_candidate(head: str, gold_words: list[str], q_words: set[str], numeric: bool) -> bool:
    toks = _toks(head)
    if numeric:
        about_subject = bool(_PRONOUN_SUBJECT.match(head)) or bool({t.norm for t in toks} & (q_words - STOP_WORDS))
        others = [t.norm for t in toks if _is_number(t.norm) and t.norm not in gold_words]
        return about_subject and bool(others)
    first = toks[0] if toks else None
    return (
        first is not None
        and first.capital
        and first.norm not in _NOT_CANDIDATES
        and first.norm not in gold_words
        and first.norm not in q_words
    )
