"""The simulated model's tokenizer: how many tokens a text is, its token ids, and reasoning text
of an exact length.

Tokens are the word pieces of `branchpoint.models.reasoning` (`word_pieces`, counted by
`estimate_tokens`), so the counts the server reports in `usage` and from `/tokenize` agree with
the estimate a client makes when a server omits them.
"""

from __future__ import annotations

import hashlib

from branchpoint.models.reasoning import LETTERS_PER_TOKEN, estimate_tokens, word_pieces

#: How many token ids there are (the size of Qwen2's vocabulary).
VOCABULARY = 151_936

#: Words used to spell out reasoning text: each one a single token for `count_tokens`.
_REASONING_WORDS = [
    "the",
    "query",
    "asks",
    "about",
    "this",
    "so",
    "I",
    "check",
    "what",
    "the",
    "texts",
    "say",
    "and",
    "whether",
    "they",
    "answer",
    "it",
    "or",
    "if",
    "I",
    "need",
    "to",
    "search",
    "again",
    "before",
    "I",
    "give",
    "a",
    "short",
    "answer",
]


def count_tokens(text: str) -> int:
    """The simulator's tokenizer: word pieces (`branchpoint.models.reasoning.estimate_tokens`)."""
    return estimate_tokens(text) if text else 0


def token_ids(text: str) -> list[int]:
    """Token ids for /tokenize: a stable hash of each token (a vocabulary of `VOCABULARY`); as many
    ids as `count_tokens` counts."""
    ids = []
    for piece in word_pieces(text):
        parts = (
            [piece[i : i + LETTERS_PER_TOKEN] for i in range(0, len(piece), LETTERS_PER_TOKEN)]
            if (piece[0].isalpha() and len(piece) > 1)
            else [piece]
        )
        ids += [int.from_bytes(hashlib.blake2b(p.encode(), digest_size=4).digest()) % VOCABULARY for p in parts]
    return ids


def reasoning_text(n: int) -> str:
    """A reasoning text of exactly `n` tokens."""
    words = [_REASONING_WORDS[i % len(_REASONING_WORDS)] for i in range(n)]
    return " ".join(words)
