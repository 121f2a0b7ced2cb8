"""Answer-text normalisation shared by the rule judge's two readings of a response.

`normalize_answer` is SQuAD's normalisation (what gold answers and responses are compared in);
`contained_gold` is the plain containment test built on it. The private helpers turn
punctuation into spaces (`_spaced`), drop a plural "s" (`_stem`) and lowercase with straightened
apostrophes (`_lower`). They sit apart because both `abstention_rules` (did the response
abstain?) and `gold_matching` (does it give a gold answer?) use them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles a/an/the, collapse spaces.

    Punctuation is every Unicode punctuation character (a superset of `string.punctuation`, so
    curly quotes and dashes go too); like SQuAD, it is deleted, not replaced by a space.
    """
    text = text.lower()
    text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _spaced(text: str) -> str:
    """Like `normalize_answer`, but punctuation becomes a space ("IIIE-Centaur" -> "iiie centaur")."""
    text = text.lower()
    text = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _stem(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def contained_gold(answer: str | None, gold_answers: Iterable[str]) -> str | None:
    """The first gold answer whose whole normalised form occurs in the answer on word boundaries.

    Gold "Rome" matches "It is Rome." but not "Romeo". Gold answers that normalise to nothing
    are ignored. Returns None when no gold answer is contained.
    """
    if not answer:
        return None
    padded = f" {normalize_answer(answer)} "
    for gold in gold_answers:
        norm = normalize_answer(gold)
        if norm and f" {norm} " in padded:
            return gold
    return None


def _lower(text: str) -> str:
    return text.lower().replace("\u2019", "'").replace("\u2018", "'")
