"""Model specs: which server, which model, and how to call it (all from the experiment spec)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from branchpoint.spec_paths import PathSetting, SpecPath


def checked_base_url(url: str) -> str:
    """`url` if it is an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1); else a
    validation error saying what was expected."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise PydanticCustomError(
            "url", "not a URL ({why}): expected e.g. http://127.0.0.1:8000/v1", {"why": str(exc)}
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError(
            "url", "{url!r} is not an http(s) URL with a host: expected e.g. http://127.0.0.1:8000/v1", {"url": url}
        )
    return url.strip()


class EmbeddedServerSpec(BaseModel):
    """Settings of the embedded llama.cpp server (CPU, 127.0.0.1)."""

    model_config = ConfigDict(extra="forbid")

    gguf: Annotated[str | None, PathSetting()] = Field(
        None, description="Path to a GGUF file; default: the packaged Gemma 3 270M (Q4_K_M)."
    )
    n_ctx: int = Field(2048, ge=256)
    n_threads: int | None = Field(None, ge=1, description="Default: all cores.")
    host: str = "127.0.0.1"
    port: int | None = Field(None, description="Default: a free port.")
    startup_timeout_s: float = Field(120, gt=0)


#: Fields added after runs were recorded: left out of dumps while at their defaults, so condition
#: fingerprints (and so execution ids) of earlier specs do not change.
_MODEL_FIELDS_DUMPED_IF_SET: dict[str, Any] = {
    "server_kind": "auto",
    "factory": None,
    "options": {},
    "top_p": None,
    "response_cache": None,
    "logprobs": None,
}


def _without_defaults(data: Any, defaults: dict[str, Any]) -> Any:
    """A dump without the fields that are at their given defaults (fields added later are dumped
    only when set, so the dumps of existing specs, and the ids hashed from them, do not change)."""
    if isinstance(data, dict):
        for name, default in defaults.items():
            if name in data and data[name] == default:
                del data[name]
    return data


#: The same for the vLLM server flags of `model.sim`.
_SIM_FIELDS_DUMPED_IF_SET: dict[str, Any] = {
    "reasoning_parser": "qwen3",
    "enable_auto_tool_choice": True,
    "tool_call_parser": "hermes",
}


class SimServerSpec(BaseModel):
    """Settings of the simulated model server (provider `sim`; see `branchpoint.sim`)."""

    model_config = ConfigDict(extra="forbid")

    profile: Annotated[str, PathSetting(suffixes=(".yaml", ".yml", ".json"))] = Field(
        "instruct", description="A built-in profile name or a profile YAML / JSON file."
    )
    questions: SpecPath = Field(
        "demo",
        description="The question set it looks questions up in (a path or demo; in a run's spec, unset: the "
        "run's questions.path).",
    )
    seed: int = Field(0, description="Seed of the server's own generator (requests without a seed).")
    latency_scale: float = Field(1.0, ge=0, description="Multiplies the profile's latency model (0: no wait).")
    capacity: bool = Field(False, description="Capacity mode: continuous batching under a tokens/s ceiling.")
    reasoning_parser: str | None = Field(
        "qwen3",
        description="As vLLM's --reasoning-parser: reasoning comes back in message.reasoning and "
        "thinking_token_budget is honoured; null: reasoning stays in the content and a budget is refused (HTTP 400).",
    )
    enable_auto_tool_choice: bool = Field(
        True, description="As vLLM's --enable-auto-tool-choice: without it, tools with tool_choice auto are refused."
    )
    tool_call_parser: str | None = Field(
        "hermes",
        description="As vLLM's --tool-call-parser (needed by enable_auto_tool_choice and tool_choice required).",
    )
    host: str = "127.0.0.1"
    port: int | None = Field(None, description="Default: a free port.")
    startup_timeout_s: float = Field(60, gt=0)

    @model_validator(mode="after")
    def _auto_tools_need_a_parser(self) -> SimServerSpec:
        if self.enable_auto_tool_choice and not self.tool_call_parser:
            raise ValueError("enable_auto_tool_choice needs tool_call_parser (vLLM refuses to start without one)")
        return self

    @model_serializer(mode="wrap")
    def _dump_server_flags_if_set(self, handler: Any) -> Any:
        """The vLLM server flags are dumped only when set otherwise than their defaults: a spec
        that leaves them keeps the dump, and so the execution ids and fork seeds, it had before."""
        return _without_defaults(handler(self), _SIM_FIELDS_DUMPED_IF_SET)


class ModelSpec(BaseModel):
    """How to reach a model: the embedded llama.cpp default, any OpenAI-compatible server, any
    LangChain chat model (`provider: langchain`, `factory`, `options`), the simulated model with
    known truth (`sim`), or a script.

    `style` picks the endpoint: `completion` (few-shot text completion, for base models) or
    `chat` (chat completions, for instruct and reasoning models, e.g. served by vLLM).
    `reasoning_effort` is translated per model `family` into the fields that family's server and
    chat template read (see `branchpoint.models.reasoning`); it applies to chat calls only.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(
        "embedded",
        description="A registered model provider (kind `provider` of `branchpoint.registry`): embedded, openai, "
        "langchain, scripted, sim, a plug-in's, or package.module:function.",
        json_schema_extra={"examples": ["embedded", "openai", "langchain", "scripted", "sim"]},
    )
    name: str = Field("gemma-3-270m", description="Model name sent to the server.")
    base_url: str | None = Field(None, description="e.g. http://127.0.0.1:8000/v1 for vLLM.")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable that holds the API key (never the key)."
    )
    style: Literal["completion", "chat"] = "completion"
    temperature: float = Field(0.0, ge=0.0)
    top_p: float | None = Field(
        None, gt=0.0, le=1.0, description="Nucleus sampling; None sends nothing (server default)."
    )
    seed: int | None = 0
    max_tokens: int = Field(48, ge=1, description="Completion-token limit per model call.")
    logprobs: int | None = Field(
        None,
        ge=0,
        le=20,
        description="Top log probabilities per generated token to ask for (chat: logprobs: true, top_logprobs: N; "
        "completions: logprobs: N); decide steps then record the decision token's (see docs/search-value.md). "
        "None asks for none.",
    )
    timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(3, ge=0, description="Retries of a call after a transport fault.")
    max_connections: int | None = Field(
        None, ge=1, description="Most calls in flight to this server at once (default: --concurrency)."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra request fields for the server; they win over fields derived from reasoning_effort. "
        "temperature, top_p and seed are refused here (runs and forks send them: use model.temperature ...).",
    )
    reasoning_effort: Literal["low", "medium", "high"] | None = Field(
        None, description="Reasoning effort (chat only); None sends nothing and leaves the server's default."
    )
    family: Literal["auto", "gpt-oss", "qwen3", "generic"] = Field(
        "auto", description="How reasoning_effort is sent; auto infers it from the model name."
    )
    thinking_budget: dict[Literal["medium", "high"], Annotated[int, Field(ge=1)] | None] = Field(
        default_factory=dict,
        description=(
            "qwen3 family: thinking-token budget per effort, merged over the defaults "
            "{medium: 1024, high: None}; None means no budget."
        ),
    )
    server_kind: Literal["auto", "vllm", "llamacpp", "other"] = Field(
        "auto",
        description=(
            "Which server this is, for fields only some servers read (structured output: vLLM's "
            "structured_outputs vs llama.cpp's grammar); auto asks GET /version and /props once."
        ),
    )
    server: EmbeddedServerSpec = Field(default_factory=EmbeddedServerSpec)
    factory: str | None = Field(
        None,
        description=(
            "For provider `langchain`: package.module:function returning a LangChain BaseChatModel "
            "(e.g. langchain_openai:ChatOpenAI), called with `options` as keyword arguments."
        ),
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="For provider `langchain`: the factory's keyword arguments."
    )
    sim: SimServerSpec = Field(default_factory=SimServerSpec, description="For provider `sim`.")
    script: list[str] | None = Field(
        None, description="For provider `scripted`: replies returned in order (tests, demos)."
    )
    response_cache: Annotated[str | None, PathSetting()] = Field(
        None,
        description="A folder whose responses.sqlite answers every request sent before to this model (the "
        "body as sent, seed included, and the server's fingerprint); `--cache DIR` sets it. Default: off. "
        "Not part of any execution id.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, base_url: str | None) -> str | None:
        return None if base_url is None else checked_base_url(base_url)

    def api_key(self) -> str | None:
        """The API key from the environment variable `api_key_env` names (None when it names none;
        InputError when that variable is not set). Keys never live in specs."""
        import os

        from branchpoint.errors import InputError

        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise InputError(
                f"model.api_key_env: environment variable {self.api_key_env} is not set "
                "(export it, or remove api_key_env for a server that needs no key)"
            )
        return key

    def check_ready(self) -> None:
        """What opening this model needs beyond the spec, checked before a command writes anything:
        provider `openai` has a `base_url`, and the `api_key_env` variable is set (InputError)."""
        from branchpoint.errors import InputError

        if self.provider == "openai" and not self.base_url:
            raise InputError("model.base_url: required for provider 'openai' (e.g. http://127.0.0.1:8000/v1)")
        self.api_key()

    @field_validator("provider")
    @classmethod
    def _registered_provider(cls, provider: str) -> str:
        """Refuse a provider no module registers (the error lists the known ones)."""
        from branchpoint.errors import InputError
        from branchpoint.registry import REGISTRY

        try:
            REGISTRY.get("provider", provider)
        except InputError as exc:
            raise PydanticCustomError("provider", "{why}", {"why": str(exc)}) from None
        return provider

    @field_validator("extra_body")
    @classmethod
    def _no_owned_sampling(cls, extra_body: dict[str, Any]) -> dict[str, Any]:
        """Refuse sampling fields the run and fork studies set themselves (see `sent_sampling`)."""
        from branchpoint.errors import InputError
        from branchpoint.models.sent_sampling import check_extra_body

        try:
            check_extra_body(extra_body)
        except InputError as exc:
            raise PydanticCustomError("extra_body", "{why}", {"why": str(exc)}) from None
        return extra_body

    @model_serializer(mode="wrap")
    def _dump_new_fields_if_set(self, handler: Any) -> Any:
        return _without_defaults(handler(self), _MODEL_FIELDS_DUMPED_IF_SET)


def load_model_spec(model_spec: Path | None, overrides: dict[str, Any]) -> ModelSpec:
    """The ModelSpec from a YAML file (a ModelSpec mapping, or an experiment spec: its `model:`
    section) with `overrides` (None values ignored) on top; bad input is one InputError naming the file."""
    import yaml
    from pydantic import ValidationError

    from branchpoint.errors import InputError
    from branchpoint.traces import describe_validation_error

    data: dict[str, Any] = {}
    where = "model flags"
    if model_spec is not None:
        where = str(model_spec)
        if not model_spec.is_file():
            raise InputError(f"{model_spec}: model spec file not found")
        try:
            loaded = yaml.safe_load(model_spec.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise InputError(f"{model_spec}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
        except RecursionError:
            raise InputError(f"{model_spec}: nested too deeply to read (is this a model spec?)") from None
        if isinstance(loaded, dict) and isinstance(loaded.get("model"), dict):
            loaded = loaded["model"]  # an experiment spec: its model section
        if not isinstance(loaded, dict):
            raise InputError(f"{model_spec}: expected a mapping of model fields (provider, name, base_url, style ...)")
        data = dict(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{where}: {describe_validation_error(exc)}") from None
