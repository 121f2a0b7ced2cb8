"""Secrets out of server texts: API keys and `Bearer …` tokens never stored, logged or printed.

A model server or gateway may quote the request's Authorization header in an error body (a 401
or a 500 page). Every such text passes through `redact` before it reaches a trace record
(`error`), a judged file, a checkpoint (the exception a node raised), a log line or stderr. It
removes the exact keys it is given (the client's own key), the values of environment variables
whose names say they hold secrets (`*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`), any
`Bearer <token>`, OpenAI-style `sk-…` keys, `api_key=` / `"authorization": "…"` fields, and
the password of a URL (`postgresql://user:***@host/db`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

MASK = "***"
#: Environment variables whose values are treated as secrets wherever they appear.
SECRET_ENV_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)", re.IGNORECASE)
#: Shortest environment value treated as a secret (shorter ones would mask ordinary words).
MIN_SECRET_LEN = 8

_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+|%20)[A-Za-z0-9._~+/=\-]{6,}")
_KEY_LIKE = re.compile(r"\b(sk|pk|rk|key)-[A-Za-z0-9_\-]{8,}")
_DONE = (MASK, "Bearer", "bearer", "BEARER", "Basic", "basic")  # values the patterns above already masked
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/:@]*:)([^\s/@]+)@")
_KEY_FIELD = re.compile(
    r"(?i)((?:\"|')?(?:x-)?(?:api[_-]?key|authorization|access[_-]?token|auth[_-]?token|password|secret)"
    r"(?:\"|')?\s*[:=]\s*(?:\"|')?)([^\"'\s,;}&]+)"
)


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment variables that, by name, hold secrets (longest first)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if SECRET_ENV_NAME.search(k) and len(v.strip()) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact(text: str | None, secrets: Iterable[str | None] = (), environ: Mapping[str, str] | None = None) -> str:
    """`text` with every secret in it replaced by `***` (None gives "")."""
    if not text:
        return text or ""
    exact = [s for s in secrets if s and len(s) >= 4] + env_secrets(environ)
    for secret in sorted(set(exact), key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _KEY_LIKE.sub(MASK, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    return _KEY_FIELD.sub(lambda m: m.group(0) if m.group(2) in _DONE else m.group(1) + MASK, text)


def redact_optional(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """`redact` that keeps None as None (for optional record fields)."""
    return None if text is None else redact(text, secrets)
