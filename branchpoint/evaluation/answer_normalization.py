"""Answer-text normalisation shared by the rule judge's two readings of a response.

`normalize_answer` is SQuAD's normalisation (what gold answers and responses are compared in);
`contained_gold` is the plain containment test built on it. The rest serve the rule judge's
readings: `normalize_spaced` turns punctuation into spaces, `stem_plural` drops a plural "s",
`lower_straight_quotes` lowercases with straightened apostrophes, and `STOP_WORDS` are the
function words a content-word comparison skips. They sit apart because both `abstention_rules`
(did the response abstain?) and `gold_matching` (does it give a gold answer?) use them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
#: Function words a content-word comparison skips (articles, pronouns, auxiliaries, question words).
STOP_WORDS: frozenset[str] = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "many",
        "much",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "as",
        "about",
        "into",
        "than",
        "then",
        "there",
        "their",
        "they",
        "them",
        "he",
        "she",
        "his",
        "her",
        "you",
        "your",
        "we",
        "our",
        "i",
        "me",
        "my",
    ]
)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles a/an/the, collapse spaces.

    Punctuation is every Unicode punctuation character (a superset of `string.punctuation`, so
    curly quotes and dashes go too); like SQuAD, it is deleted, not replaced by a space.
    """
    text = text.lower()
    text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def normalize_spaced(text: str) -> str:
    """Like `normalize_answer`, but punctuation becomes a space ("IIIE-Centaur" -> "iiie centaur")."""
    text = text.lower()
    text = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def stem_plural(token: str) -> str:
    """The token without a plural "s" ("eggs" -> "egg"; not "ss" endings, not words of 3 letters or fewer)."""
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


def lower_straight_quotes(text: str) -> str:
    """Lowercase, with curly apostrophes straightened (what the abstention cues are matched against)."""
    return text.lower().replace("\u2019", "'").replace("\u2018", "'")
