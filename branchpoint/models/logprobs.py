"""Token log probabilities as OpenAI-compatible servers return them, read into one shape.

Asked for with `model.logprobs: N` (`ModelSpec.logprobs`): a chat request sends `logprobs: true,
top_logprobs: N`, a completion request `logprobs: N` (OpenAI, vLLM and llama.cpp's servers read
these names). Replies come in two shapes, both read here into a list of `TokenLogprob` (one per
generated token, in order):

- chat (OpenAI, vLLM's `ChatCompletionLogProbs`, llama.cpp): `choices[0].logprobs.content` is a
  list of `{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}`; vLLM lists every
  generated token, the reasoning and a tool call's text included (its parsers split them out of
  the message afterwards);
- completions (OpenAI's legacy `Logprobs`, vLLM's `CompletionLogProbs`): parallel lists
  `tokens`, `token_logprobs`, `top_logprobs` (a `{token: logprob}` object per token, vLLM's
  including the sampled token) and `text_offset`. A completion reply in the chat shape (some
  llama.cpp builds) is read as chat.

vLLM reports -9999.0 for a log probability of −inf and, by default (`--logprobs-mode
raw_logprobs`), the model's distribution before temperature and top-p reshape it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: What vLLM writes for a log probability of −inf (JSON has no infinity); read non-finite values as it.
NEG_INF_LOGPROB = -9999.0


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, its log probability, and the top alternatives at its
    position as (token, logprob) pairs, most probable first (the sampled token may be among them)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = field(default_factory=tuple)


def request_fields(n: int | None, *, chat: bool) -> dict[str, Any]:
    """The request fields that ask for `n` top log probabilities per token (none for None)."""
    if n is None:
        return {}
    return {"logprobs": True, "top_logprobs": n} if chat else {"logprobs": n}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else NEG_INF_LOGPROB


def _ranked(pairs: list[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(pairs, key=lambda p: -p[1]))


def read_chat_logprobs(raw: Any) -> list[TokenLogprob] | None:
    """The tokens of a chat choice's `logprobs` (`{"content": [...]}`); None when there are none
    (not asked for, or a server that returns `null`). Entries that are not token objects are skipped."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("content"), list):
        return None
    out = []
    for entry in raw["content"]:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
            continue
        lp = _number(entry.get("logprob"))
        if lp is None:
            continue
        top = []
        for alt in entry.get("top_logprobs") or []:
            if isinstance(alt, Mapping) and isinstance(alt.get("token"), str):
                alt_lp = _number(alt.get("logprob"))
                if alt_lp is not None:
                    top.append((alt["token"], alt_lp))
        out.append(TokenLogprob(entry["token"], lp, _ranked(top)))
    return out


def read_completion_logprobs(raw: Any) -> list[TokenLogprob] | None:
    """The tokens of a completion choice's `logprobs` (legacy parallel lists, or the chat shape);
    None when there are none."""
    if not isinstance(raw, Mapping):
        return None
    if isinstance(raw.get("content"), list):
        return read_chat_logprobs(raw)
    tokens, lps = raw.get("tokens"), raw.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(lps, list):
        return None
    given = raw.get("top_logprobs")
    tops: list[Any] = given if isinstance(given, list) else []
    out = []
    for i, (token, value) in enumerate(zip(tokens, lps)):
        lp = _number(value)
        if not isinstance(token, str) or lp is None:
            continue
        alts = tops[i] if i < len(tops) and isinstance(tops[i], Mapping) else {}
        top = [(str(t), v) for t, v in ((t, _number(x)) for t, x in alts.items()) if v is not None]
        out.append(TokenLogprob(token, lp, _ranked(top)))
    return out
