"""The simulated model's tokenizer: /tokenize gives as many ids as `usage` counts tokens."""

from __future__ import annotations

from branchpoint.models.reasoning import estimate_tokens
from branchpoint.sim.tokens import VOCABULARY, count_tokens, reasoning_text, token_ids

TEXTS = [
    "",
    "Who painted it?",
    "internationalisation and counterrevolutionaries",  # letter runs longer than one token
    "In 1889, 42% of 7_000 voters said: no!",  # digits, punctuation, underscores
    "東京は日本の首都です。",  # CJK, one token a character
    "a  b\n\tc",
]


def test_token_ids_are_as_many_as_the_tokens_counted() -> None:
    for text in TEXTS:
        assert len(token_ids(text)) == count_tokens(text) == estimate_tokens(text), text


def test_token_ids_are_stable_and_in_the_vocabulary() -> None:
    ids = token_ids(TEXTS[2])
    assert ids == token_ids(TEXTS[2]) and all(0 <= i < VOCABULARY for i in ids)
    assert token_ids("painted") != token_ids("painter")


def test_reasoning_text_has_exactly_the_tokens_asked_for() -> None:
    for n in (0, 1, 7, 30, 31, 500):
        assert count_tokens(reasoning_text(n)) == n
