"""Reasoning effort per model family, and reasoning-token counts when the server reports none.

Effort → request fields (chat calls only; `reasoning_effort: null` sends nothing):

| family    | low                                  | medium                                   | high                                  |
|-----------|--------------------------------------|------------------------------------------|---------------------------------------|
| `gpt-oss` | `reasoning_effort: low`              | `reasoning_effort: medium`               | `reasoning_effort: high`              |
| `qwen3`   | `chat_template_kwargs.enable_thinking: false` | `enable_thinking: true` + `thinking_token_budget: 1024` | `enable_thinking: true`, no budget |
| `generic` | `reasoning_effort: low`              | `reasoning_effort: medium`               | `reasoning_effort: high`              |

- gpt-oss reads `reasoning_effort` itself (vLLM passes it to the harmony prompt).
- Qwen3 has no effort levels, only thinking on/off (`enable_thinking`, read by its chat template),
  so effort is mapped to off / on with a budget / on without a budget. The budget is sent as vLLM's
  `thinking_token_budget` request field; vLLM enforces it where it supports it (recent releases,
  with the reasoning delimiters known to the server, e.g. `--reasoning-config
  '{"reasoning_start_str": "<think>", "reasoning_end_str": "</think>"}'`) and otherwise logs the
  field as ignored, so thinking is then simply on. Budgets are set per effort with the spec's
  `thinking_budget` (merged over `DEFAULT_THINKING_BUDGET`; `null` removes a budget).
  Qwen3 "-Instruct-2507" models never think and "-Thinking-2507" models always do: for them
  only the budget has an effect.
- `generic` sends the OpenAI field `reasoning_effort`; it matters only to servers or chat templates
  that read it.
- `family: auto` infers the family from the model name (`gpt-oss` or `qwen3` in it; else generic).
- Fields in the spec's `extra_body` win over these (one level deep for `chat_template_kwargs`).

Reasoning tokens: vLLM counts reasoning inside `completion_tokens`, and only recent versions report
`completion_tokens_details.reasoning_tokens`. When that is missing but reasoning text came back,
`ServerTokenCounter` tokenises the text with the server's own tokenizer (vLLM `POST /tokenize`,
llama-cpp-python `POST /extras/tokenize/count`). The re-tokenised text lacks the reasoning delimiters
the parser stripped (`<think>`, `</think>`: a token or two). Where no tokenizer endpoint answers,
`estimate_tokens` gives a word-piece estimate and the usage says `reasoning_tokens_estimated: true`.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from branchpoint.models.spec import ModelSpec

Effort = Literal["low", "medium", "high"]
Family = Literal["gpt-oss", "qwen3", "generic"]

#: Qwen3 thinking-token budget per effort (None: thinking without a budget). `low` turns thinking off.
DEFAULT_THINKING_BUDGET: dict[str, int | None] = {"medium": 1024, "high": None}


def infer_family(model_name: str) -> Family:
    """The reasoning family a model name belongs to: `gpt-oss`, `qwen3` (Qwen3, Qwen3.5 ...), else generic."""
    name = model_name.lower()
    if "gpt-oss" in name or "gpt_oss" in name:
        return "gpt-oss"
    if "qwen3" in name:
        return "qwen3"
    return "generic"


def resolve_family(spec: ModelSpec) -> Family:
    """The spec's family, inferred from the model name when it says `auto`."""
    return infer_family(spec.name) if spec.family == "auto" else spec.family


def thinking_budget(spec: ModelSpec, effort: Effort) -> int | None:
    """The qwen3 thinking-token budget for `effort` (spec's `thinking_budget` over the defaults)."""
    budgets: dict[str, int | None] = {**DEFAULT_THINKING_BUDGET}
    budgets.update({str(k): v for k, v in spec.thinking_budget.items()})
    return budgets.get(effort)


def reasoning_fields(spec: ModelSpec) -> dict[str, Any]:
    """Request-body fields that carry the spec's reasoning effort to its model family's server."""
    effort = spec.reasoning_effort
    if effort is None:
        return {}
    family = resolve_family(spec)
    if family == "qwen3":
        if effort == "low":
            return {"chat_template_kwargs": {"enable_thinking": False}}
        fields: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": True}}
        budget = thinking_budget(spec, effort)
        if budget is not None:
            fields["thinking_token_budget"] = budget
        return fields
    return {"reasoning_effort": effort}  # gpt-oss and generic


def merge_body(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` over `base`; where both hold a dict (e.g. `chat_template_kwargs`) the dicts merge."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


# --- counting reasoning tokens ---------------------------------------------------------------------

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_PIECES = re.compile(rf"[{_CJK}]|[^\W\d_{_CJK}]+|\d|[^\w\s]|_")
#: Letters per token of a long word in the estimate (BPE vocabularies of 150k-260k entries).
LETTERS_PER_TOKEN = 7


def word_pieces(text: str) -> list[str]:
    """The word pieces `estimate_tokens` counts, in order: each run of letters, digit, punctuation
    mark, underscore and CJK character of `text` (whitespace dropped). The simulated server's
    tokenizer (`branchpoint.sim.tokens`) is built on the same pieces so that its counts agree."""
    return _PIECES.findall(text)


def estimate_tokens(text: str) -> int:
    """An estimate of a text's token count for when no tokenizer is at hand (not a tokenizer).

    Word pieces: a run of letters counts ceil(len / 7) tokens (most English words are one token in
    large BPE vocabularies, long ones split), every digit, punctuation mark and CJK character one.
    Against Gemma 3's tokenizer on English reasoning text it is within about 20%.
    """
    count = 0
    for piece in word_pieces(text):
        count += math.ceil(len(piece) / LETTERS_PER_TOKEN) if piece[0].isalpha() and len(piece) > 1 else 1
    return count


def server_root(base_url: str) -> str:
    """The server's root URL from an OpenAI base URL (`http://h:8000/v1` → `http://h:8000`)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


@dataclass(frozen=True)
class TokenCount:
    """How many tokens a text is, and whether that is an estimate rather than the server's count."""

    tokens: int
    estimated: bool


@dataclass(frozen=True)
class TokenizeRoute:
    """A server's tokenize endpoint: path, the request field that holds the text, fixed fields."""

    name: str
    path: str
    text_field: str
    fixed: tuple[tuple[str, Any], ...] = ()
    #: True when the endpoint always adds special tokens (BOS): a baseline count of "" is subtracted.
    adds_special_tokens: bool = False


TOKENIZE_ROUTES = (
    # vLLM: POST /tokenize {"model", "prompt", "add_special_tokens"} -> {"count", "tokens", ...}
    TokenizeRoute("vllm", "/tokenize", "prompt", (("add_special_tokens", False),)),
    # llama-cpp-python: POST /extras/tokenize/count {"model", "input"} -> {"count"} (BOS included)
    TokenizeRoute("llama-cpp-python", "/extras/tokenize/count", "input", adds_special_tokens=True),
)


class _NotThisRoute(Exception):
    """The server answered, but not as this route expects (404, 405, 422, another body)."""


class ServerTokenCounter:
    """Counts a text's tokens with the server's own tokenizer, else estimates them.

    The first count tries the known tokenize endpoints in order and remembers the one that answers
    (or that none does, and estimates from then on). A transport fault, 429 or 5xx makes that one
    count an estimate and leaves the choice open for the next. Safe to share between threads and
    between clients of the same server (`with_seed`).
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 10.0) -> None:
        self.root = server_root(base_url)
        self.model = model
        self.timeout_s = timeout_s
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()
        self._probed = False
        self.route: TokenizeRoute | None = None
        self._baseline = 0

    def count(self, text: str) -> TokenCount:
        """The token count of `text` (the server's if it can tokenise, else `estimate_tokens`)."""
        if not text:
            return TokenCount(0, estimated=False)
        try:
            tokens = self._count_on_server(text)
        except httpx.HTTPError:
            tokens = None
        if tokens is None:
            return TokenCount(estimate_tokens(text), estimated=True)
        return TokenCount(tokens, estimated=False)

    def _count_on_server(self, text: str) -> int | None:
        with self._lock:
            probed, route, baseline = self._probed, self.route, self._baseline
        if probed:
            if route is None:
                return None
            try:
                return max(0, self._request(route, text) - baseline)
            except _NotThisRoute:
                return None
        for route in TOKENIZE_ROUTES:
            try:
                tokens = self._request(route, text)
                baseline = self._request(route, "") if route.adds_special_tokens else 0
            except _NotThisRoute:
                continue
            with self._lock:
                self.route, self._baseline, self._probed = route, baseline, True
            return max(0, tokens - baseline)
        with self._lock:
            self._probed = True  # every endpoint answered, none can tokenise: estimate from now on
        return None

    def _request(self, route: TokenizeRoute, text: str) -> int:
        body = {"model": self.model, route.text_field: text, **dict(route.fixed)}
        if self._http is None:
            # Plain HTTP (a local server) needs no TLS context, whose CA bundle is slow to load.
            verify = not self.root.startswith("http://")
            self._http = httpx.Client(timeout=self.timeout_s, headers=self._headers, verify=verify)
        response = self._http.post(f"{self.root}{route.path}", json=body)
        if response.status_code == 429 or response.status_code >= 500:
            response.raise_for_status()  # transient: an httpx.HTTPStatusError
        if response.status_code != 200:
            raise _NotThisRoute(f"{route.path}: HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError as exc:
            raise _NotThisRoute(f"{route.path}: not JSON") from exc
        if isinstance(data, dict) and isinstance(data.get("count"), int):
            return int(data["count"])
        if isinstance(data, dict) and isinstance(data.get("tokens"), list):
            return len(data["tokens"])
        raise _NotThisRoute(f"{route.path}: no count in {str(data)[:80]}")
