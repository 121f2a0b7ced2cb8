"""Which OpenAI-compatible server a base URL is, and the request fields only some servers read.

Detection (`detect_server_kind`), one GET each, in order:
- vLLM answers `GET /version` with `{"version": "0.x.y"}`;
- llama.cpp's `llama-server` answers `GET /props` with its generation settings
  (`default_generation_settings`, `total_slots`);
- anything else (llama-cpp-python's server, the embedded default, SGLang, hosted APIs) is "other".

Structured output (`structured_output_fields`): vLLM reads `structured_outputs: {"grammar": GBNF}`
(its older `guided_grammar` is gone) and ignores unknown fields with HTTP 200, so llama.cpp's
`grammar` field would be dropped silently; llama.cpp and llama-cpp-python read `grammar`. A
server of kind "other" gets `grammar`.

Refusals worth one line (`explain_refusal`): current vLLM answers HTTP 400 to
`thinking_token_budget` when it runs without a reasoning parser / reasoning config; the line
says which server flag is missing and how to send no budget instead.
"""

from __future__ import annotations

import httpx

SERVER_KINDS = ("vllm", "llamacpp", "other")

#: What vLLM needs for `thinking_token_budget` (Qwen3's delimiters as the example).
REASONING_FLAGS = (
    "--reasoning-parser qwen3 --reasoning-config "
    '\'{"reasoning_start_str": "<think>", "reasoning_end_str": "</think>"}\''
)


def server_root(base_url: str) -> str:
    """The server's root URL: `base_url` without a trailing `/v1`."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def detect_server_kind(base_url: str, timeout_s: float = 10.0, client: httpx.Client | None = None) -> str:
    """vllm, llamacpp or other, from `GET /version` and `GET /props` (see the module docstring)."""
    root = server_root(base_url)
    own = client is None
    http = client or httpx.Client(timeout=timeout_s)
    try:
        version = _get_json(http, f"{root}/version")
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            return "vllm"
        props = _get_json(http, f"{root}/props")
        if isinstance(props, dict) and ("default_generation_settings" in props or "total_slots" in props):
            return "llamacpp"
        return "other"
    finally:
        if own:
            http.close()


def _get_json(client: httpx.Client, url: str) -> object:
    try:
        response = client.get(url)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def structured_output_fields(kind: str, grammar: str) -> dict[str, object]:
    """The request fields that carry a GBNF grammar to a server of `kind`."""
    if kind == "vllm":
        return {"structured_outputs": {"grammar": grammar}}
    return {"grammar": grammar}


def explain_refusal(status: int, message: str) -> str | None:
    """One line for a refusal whose cause is a missing server flag, else None."""
    if status == 400 and "thinking_token_budget" in message:
        return (
            "refused thinking_token_budget (HTTP 400): the server runs without a reasoning parser / "
            f"reasoning config; start vLLM with {REASONING_FLAGS}, or send no budget "
            "(model.thinking_budget: {medium: null})"
        )
    return None
