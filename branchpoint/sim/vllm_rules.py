"""What vLLM refuses, ignores and cuts, as the simulated server mirrors it (vLLM 0.33.0).

Each rule cites the vLLM 0.33.0 source it mirrors (the PyPI wheel, `vllm/_version.py`:
`0.33.0`, commit `g4ba787ec9`; paths are inside the `vllm` package):

- `GET /version` answers `{"version": VLLM_VERSION}`: `entrypoints/serve/instrumentator/basic.py:53-56`.
  The simulator answers the version it mirrors with a local label (`VERSION`), so branchpoint's
  server detection (`server_kind.detect_server_kind`) takes it for vLLM and sends what vLLM reads.
- Unknown request fields are ignored with HTTP 200 (`extra="allow"`,
  `entrypoints/serve/engine/protocol.py:37-76`), the removed `guided_*` fields among them
  (`protocol.py:24-33`, a warning at 63-71), and llama.cpp's top-level `grammar`: only
  `structured_outputs` (one constraint of json / regex / choice / grammar / json_object /
  structural_tag, `sampling_params.py:102-141`) and `response_format` constrain the output.
  `ignored_fields` names what a request sent that vLLM drops.
- `thinking_token_budget`: not a non-negative integer (or -1, unlimited) → 400 naming the
  parameter (`sampling_params.py:65-85`; the message gains ` (parameter=..., value=...)`,
  `exceptions.py:49-56`; status and type from `entrypoints/serve/exception_handling/
  error_response.py:43-46`); a budget on a server without a reasoning parser / config → 400
  (`v1/engine/input_processor.py:203-211`). With one, reasoning stops after the budget
  (`v1/sample/thinking_budget_state.py`, which forces the reasoning end after `budget` tokens).
- Tools: `tools: []` → 400 (`entrypoints/openai/chat_completion/protocol.py:980-985`); tools
  without `tool_choice` mean `auto` (989-991); `tool_choice` without tools → 400 (998-1003);
  `auto` without `--enable-auto-tool-choice` → 400, `required` or a named tool without a tool
  parser → 400 (`renderers/online_renderer.py:269-289`); `--enable-auto-tool-choice` without
  `--tool-call-parser` stops the server at start-up (`entrypoints/common/cli_args.py:553-554`).
- Stop strings (`stop`, both endpoints): the output ends at the stop string that completes
  earliest in the text (ties: list order), cut before it, or after it with
  `include_stop_str_in_output` (`v1/engine/detokenizer.py:321-372`); `finish_reason` is
  `stop` and `stop_reason` the string (`v1/engine/output_processor.py:825-830`).
- `continue_final_message` with `add_generation_prompt` (both true) → 400 (the chat request's
  `check_generation_prompt` validator); with `add_generation_prompt: false` the final assistant
  message is continued (the `searchr1` protocol's sequence).
- Reasoning is split out (`message.reasoning`, `usage.completion_tokens_details.
  reasoning_tokens`) only by a server with a reasoning parser
  (`entrypoints/openai/chat_completion/serving.py:165`); without one it stays in the content.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from branchpoint.errors import InputError

#: The vLLM release whose wire behaviour the simulator mirrors.
VLLM_VERSION = "0.33.0"
#: What `GET /version` answers: vLLM's version, with a local label saying it is the simulator.
VERSION = f"{VLLM_VERSION}+branchpoint.sim"

#: Request fields vLLM no longer reads (`entrypoints/serve/engine/protocol.py:24-33`), and
#: llama.cpp's grammar field: all ignored with HTTP 200.
IGNORED_FIELDS: tuple[str, ...] = (
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_decoding_backend",
    "guided_whitespace_pattern",
    "grammar",
)

#: `structured_outputs` constraints, of which a request names exactly one (`sampling_params.py:122-141`).
CONSTRAINTS: tuple[str, ...] = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")

BUDGET_MESSAGE = "`thinking_token_budget` must be a non-negative integer or -1 for unlimited."
NO_REASONING_CONFIG = (
    "thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser "
    "and/or --reasoning-config to use thinking_token_budget."
)
AUTO_TOOLS_MESSAGE = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'


@dataclass(frozen=True)
class ServerFlags:
    """The `vllm serve` flags the simulator honours: a reasoning parser (None: none) and tool calling."""

    reasoning_parser: str | None = "qwen3"
    enable_auto_tool_choice: bool = True
    tool_call_parser: str | None = "hermes"

    def __post_init__(self) -> None:
        if self.enable_auto_tool_choice and not self.tool_call_parser:
            # vLLM: "Error: --enable-auto-tool-choice requires --tool-call-parser" (cli_args.py:553-554)
            raise InputError("--enable-auto-tool-choice requires --tool-call-parser (as vLLM refuses to start)")

    @property
    def tool_parser(self) -> bool:
        """Whether vLLM would load a tool parser: only with both flags (`parser/parser_manager.py:34`)."""
        return self.enable_auto_tool_choice and bool(self.tool_call_parser)

    def args(self) -> list[str]:
        """These flags on the simulator's (and vLLM's) command line."""
        out = ["--reasoning-parser", self.reasoning_parser] if self.reasoning_parser else []
        if self.tool_call_parser:
            out += ["--tool-call-parser", self.tool_call_parser]
        if self.enable_auto_tool_choice:
            out.append("--enable-auto-tool-choice")
        return out


def error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> JSONResponse:
    """An error reply in vLLM's shape (`ErrorResponse`: message, type, param, code)."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status
    )


def _validation_error(message: str, parameter: str | None = None, value: Any = None) -> JSONResponse:
    """vLLM's `VLLMValidationError` as a reply: 400 BadRequestError, the parameter and value appended."""
    extras = [f"parameter={parameter}"] if parameter is not None else []
    if value is not None:
        extras.append(f"value={value}")
    return error(400, f"{message} ({', '.join(extras)})" if extras else message, param=parameter)


def thinking_budget(body: Mapping[str, Any]) -> int | None:
    """The request's reasoning budget once validated (-1 and null: none)."""
    value = body.get("thinking_token_budget")
    return None if value is None or value == -1 else int(value)


def _budget_value_refusal(body: Mapping[str, Any]) -> JSONResponse | None:
    value = body.get("thinking_token_budget")
    if value is None:
        return None
    if isinstance(value, (bool, float)) or not isinstance(value, int) or value < -1:
        return _validation_error(BUDGET_MESSAGE, "thinking_token_budget", value)
    return None


def _budget_config_refusal(body: Mapping[str, Any], flags: ServerFlags) -> JSONResponse | None:
    if thinking_budget(body) is not None and not flags.reasoning_parser:
        return _validation_error(NO_REASONING_CONFIG)
    return None


def _structured_refusal(body: Mapping[str, Any]) -> JSONResponse | None:
    so = body.get("structured_outputs")
    if so is None:
        return None
    if not isinstance(so, dict):
        return error(400, "structured_outputs: expected an object", param="structured_outputs")
    named = [k for k in CONSTRAINTS if so.get(k) is not None]
    if len(named) > 1:
        return _validation_error(
            f"You can only use one kind of structured outputs constraint but multiple are specified: {dict(so)}"
        )
    if not named:
        return _validation_error(
            f"You must use one kind of structured outputs constraint but none are specified: {dict(so)}"
        )
    return None


def tool_choice(body: Mapping[str, Any]) -> Any:
    """The request's tool choice as vLLM reads it: `auto` when tools come without one, else `none`."""
    if "tool_choice" not in body:
        return "auto" if body.get("tools") else "none"
    return body["tool_choice"]


def _tools_refusal(body: Mapping[str, Any]) -> JSONResponse | None:
    """The request validation of tools (`chat_completion/protocol.py:972-1020`)."""
    if body.get("tools") == []:
        return _validation_error(
            "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.",
            "tools",
        )
    choice = tool_choice(body)
    if choice in (None, "none"):
        return None
    if not body.get("tools"):
        return _validation_error("When using `tool_choice`, `tools` must be set.", "tool_choice")
    if choice not in ("auto", "required") and not isinstance(choice, dict):
        return _validation_error(
            f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" or "required" are supported.',
            "tool_choice",
        )
    return None


def _tool_parser_refusal(body: Mapping[str, Any], flags: ServerFlags) -> JSONResponse | None:
    """The renderer's check that a tool choice has a tool parser (`renderers/online_renderer.py:269-289`)."""
    choice = tool_choice(body)
    if flags.tool_parser or choice in (None, "none"):
        return None
    if choice == "auto":
        return None if flags.enable_auto_tool_choice else error(400, AUTO_TOOLS_MESSAGE)
    desc = f'function "{(choice.get("function") or {}).get("name")}"' if isinstance(choice, dict) else f'"{choice}"'
    return error(400, f"tool_choice={desc} requires --tool-call-parser to be set")


def _generation_prompt_refusal(body: Mapping[str, Any]) -> JSONResponse | None:
    """The chat request's `check_generation_prompt` validator: `continue_final_message` and
    `add_generation_prompt` both true is refused, read from the raw body (so an absent
    `add_generation_prompt`, whose default is true, passes)."""
    if body.get("continue_final_message") and body.get("add_generation_prompt"):
        return _validation_error("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
    return None


def refusal(body: Mapping[str, Any], flags: ServerFlags, *, chat: bool) -> JSONResponse | None:
    """vLLM's reply to a request it refuses (None: it serves it), in vLLM's order: the request's
    validation (tools, structured outputs, the budget's value), the renderer's tool-parser check,
    then the engine's reasoning-config check for a budget."""
    if chat and (refused := _tools_refusal(body)) is not None:
        return refused
    if chat and (refused := _generation_prompt_refusal(body)) is not None:
        return refused
    if (refused := _structured_refusal(body)) is not None:
        return refused
    if (refused := _budget_value_refusal(body)) is not None:
        return refused
    if chat and (refused := _tool_parser_refusal(body, flags)) is not None:
        return refused
    return _budget_config_refusal(body, flags)


def ignored_fields(body: Mapping[str, Any]) -> list[str]:
    """The fields of a request that vLLM ignores (removed `guided_*`, llama.cpp's `grammar`)."""
    return [k for k in IGNORED_FIELDS if body.get(k) is not None]


def stop_strings(body: Mapping[str, Any]) -> list[str]:
    """The request's `stop` as a list (vLLM's `StopParam`: a string, a list, or null)."""
    stop = body.get("stop")
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else [str(s) for s in stop]


def apply_stop(text: str, stop: list[str], include_in_output: bool) -> tuple[str, str | None]:
    """`text` as vLLM returns it under `stop` (`v1/engine/detokenizer.py:321-372`): cut at the stop
    string that completes earliest (ties: list order), before it or, with `include_in_output`,
    after it; and the stop string matched (None: no match, text unchanged)."""
    best: str | None = None
    best_start, best_end = 0, sys.maxsize
    for s in stop:
        i = text.find(s) if s else -1
        if i == -1:
            continue
        if i + len(s) < best_end:
            best, best_start, best_end = s, i, i + len(s)
    if best is None:
        return text, None
    return (text[:best_end] if include_in_output else text[:best_start]), best
