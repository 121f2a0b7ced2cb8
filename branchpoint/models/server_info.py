"""What model server a spec talks to, for the provenance of what a command wrote (`ModelServer`).

A server that runs elsewhere (provider `openai`) is asked, a short GET each:
- `GET /version` (vLLM: `{"version": "0.x.y"}`; SGLang too),
- `GET /props` (llama.cpp's `llama-server`: its `build_info`),
- `GET /v1/models` (every OpenAI-compatible server: the served ids, and `owned_by`, which
  names vLLM, llama.cpp, SGLang or branchpoint's simulated server).
A server branchpoint starts itself is described without asking: `embedded` is llama-cpp-python
(its installed version), `sim` is the simulated server of this branchpoint. A server that does
not answer is recorded with the error, never refused: provenance must not stop a run.
"""

from __future__ import annotations

import importlib.metadata as metadata
from typing import Any

import httpx

import branchpoint
from branchpoint.models.server_kind import server_root
from branchpoint.models.spec import ModelSpec
from branchpoint.provenance import ModelServer
from branchpoint.redact import redact

#: Seconds each probe may take (a server that is down must not hold a command up for long).
PROBE_TIMEOUT_S = 3.0
#: `owned_by` values of /v1/models that name the server kind.
OWNERS = {"vllm": "vllm", "llamacpp": "llamacpp", "sglang": "sglang", "branchpoint-sim": "branchpoint-sim"}


def describe_model(spec: ModelSpec, timeout_s: float = PROBE_TIMEOUT_S) -> ModelServer:
    """The model server of `spec`: asked over HTTP for provider `openai`, else from what
    branchpoint starts itself (see the module docstring)."""
    base = {"provider": spec.provider, "model": spec.name}
    if spec.provider == "openai" and spec.base_url:
        return ModelServer(**base, **probe_server(spec.base_url, timeout_s))
    if spec.provider == "embedded":
        return ModelServer(**base, kind="llama-cpp-python", version=_version("llama-cpp-python"))
    if spec.provider == "sim":
        return ModelServer(**base, kind="branchpoint-sim", version=branchpoint.__version__)
    if spec.provider == "langchain":
        return ModelServer(**base, kind=f"langchain:{spec.factory}", version=_version("langchain-core"))
    return ModelServer(**base, kind=spec.provider)


def probe_server(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """Kind, version and served model ids of the OpenAI-compatible server at `base_url` (fields
    of `ModelServer`; `error` when it does not answer)."""
    root = server_root(base_url)
    found: dict[str, Any] = {"base_url": redact(base_url)}
    with httpx.Client(timeout=timeout_s) as http:
        listed, error = _get(http, f"{root}/v1/models")
        if error is not None:
            found["error"] = error
            return found
        version, _ = _get(http, f"{root}/version")
        props, _ = _get(http, f"{root}/props")
    models = listed.get("data") if isinstance(listed, dict) else None
    models = [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    found["served_models"] = [str(m.get("id")) for m in models if m.get("id") is not None]
    owners = {str(m.get("owned_by")) for m in models}
    kind = next((OWNERS[o] for o in owners if o in OWNERS), None)
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        found["version"] = version["version"]
        kind = kind or "vllm"
    elif isinstance(props, dict) and ("default_generation_settings" in props or "build_info" in props):
        kind = kind or "llamacpp"
        if isinstance(props.get("build_info"), str):
            found["version"] = props["build_info"]
    if kind == "branchpoint-sim":
        found["version"] = branchpoint.__version__
    found["kind"] = kind or "other"
    return found


def _get(http: httpx.Client, url: str) -> tuple[Any, str | None]:
    """The JSON a GET returns (None when it is not JSON or not 200), and the error when the
    server could not be reached at all."""
    try:
        response = http.get(url)
    except httpx.HTTPError as exc:
        return None, redact(f"{type(exc).__name__}: {exc}")
    if response.status_code != 200:
        return None, None
    try:
        return response.json(), None
    except ValueError:
        return None, None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def describe_client(client: Any, timeout_s: float = PROBE_TIMEOUT_S) -> ModelServer | None:
    """The model server a client object talks to (an OpenAI-compatible or LangChain client: its
    spec, at the address it uses), or None for an object with no model spec (a scripted model)."""
    spec = getattr(client, "spec", None)
    if not isinstance(spec, ModelSpec):
        return None
    base_url = getattr(client, "base_url", None)
    if isinstance(base_url, str) and spec.provider == "openai":
        spec = spec.model_copy(update={"base_url": base_url})
    return describe_model(spec, timeout_s)
