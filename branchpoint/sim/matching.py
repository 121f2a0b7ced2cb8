"""The simulated world's own reading of text: answer folding, gold containment, negative cues.

The simulator decides what a passage *is* (does it carry a gold answer? does it signal that the
answer is unknown?) and whether one of its own answers is a success. Those are rules of the
simulated world, so they live here and import nothing from `branchpoint.evaluation`: a judge
whose normaliser or cue list breaks must not break the truth it is checked against
(docs/validate.md, "Mutants"). They are written to agree with the rule judge on the demo corpus
and question set (`tests/sim/test_matching.py` checks it), not by calling it.

- `fold`: lowercase, Unicode punctuation deleted, the articles a / an / the dropped, spaces
  collapsed (the SQuAD convention answers are compared in).
- `holds_gold`: a gold answer occurs, folded, on word boundaries of the folded text.
- `negative_cue`: the first cue of uncertainty, contradiction or unknowability in a passage.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_ARTICLE = re.compile(r"\b(?:a|an|the)\b")


def fold(text: str) -> str:
    """The folded form of a text (see the module docstring)."""
    kept = "".join(ch for ch in text.lower() if not unicodedata.category(ch).startswith("P"))
    return " ".join(_ARTICLE.sub(" ", kept).split())


def holds_gold(text: str | None, gold_answers: Iterable[str]) -> bool:
    """Whether some gold answer (that folds to something) occurs in `text` on word boundaries."""
    if not text:
        return False
    padded = f" {fold(text)} "
    return any((g := fold(gold)) and f" {g} " in padded for gold in gold_answers)


def same_answer(a: str, b: str) -> bool:
    """Two answers the simulated world counts as the same (equal once folded, and not empty)."""
    fa = fold(a)
    return bool(fa) and fa == fold(b)


#: (name, pattern) of each cue, matched in this order against the lowercased passage (curly
#: apostrophes straightened); the first that matches names the passage negative.
NEGATIVE_CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("dont_know", r"\b(?:i|we) (?:do not|don't|dont|simply don't) know\b"),
        ("unknown", r"\bunknown\b"),
        ("cannot_be_determined", r"\b(?:cannot|can't|can not) be (?:determined|known|predicted|answered)\b"),
        ("no_reliable_information", r"\bno reliable information\b"),
        ("not_enough_information", r"\b(?:not enough|insufficient) information\b"),
        ("impossible_to_know", r"\bimpossible to know\b"),
        (
            "no_one_knows",
            r"\b(?:no one|no-one|nobody|none of us)\b[^.;!?]{0,20}"
            r"\b(?:knows?|can (?:\w+ )?(?:know|say|tell|predict)|could (?:know|say))\b",
        ),
        ("unanswerable", r"\bunanswerable\b"),
        ("no_record", r"\bno (?:surviving |known |reliable |written )?records?\b"),
        ("not_known", r"\b(?:not|never been) (?:known|recorded|documented|established)\b"),
        ("disputed", r"\b(?:disputed|contested|unclear|uncertain|unverified|unconfirmed)\b"),
        ("no_evidence", r"\bno (?:evidence|consensus|agreement)\b"),
        ("mystery", r"\b(?:mystery|remains unknown|lost to history)\b"),
        ("misconception", r"\b(?:myth|misconception|apocryphal|contrary to popular)\b"),
        ("never_happened", r"\b(?:never|did not|didn't) (?:happen|exist|occur|take place)\b"),
        ("ambiguous", r"\b(?:ambiguous|may refer to|can refer to|several (?:people|places|things))\b"),
    )
)


def negative_cue(text: str | None) -> str | None:
    """The name of the first negative cue in a passage's text, or None."""
    if not text:
        return None
    lowered = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    return next((name for name, pattern in NEGATIVE_CUES if pattern.search(lowered)), None)
