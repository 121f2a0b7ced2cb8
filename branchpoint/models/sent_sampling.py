"""The sampling an execution sent: taken from its request bodies, never from the plan.

A record's `sampling` says how its answer was drawn, so it must be what the server received: a
field in `model.extra_body`, a provider that ignores a setting, a LangChain model's own options
can all make the plan and the request disagree. `SentSampling` is a request sink (the
`write(endpoint, body)` of `RequestLog`), fed by every client that can log its requests
(OpenAI-compatible clients from the HTTP request itself: embedded llama.cpp, vLLM, the simulated
server, any OpenAI-compatible server, completion and chat; the LangChain client from the call
it makes; the scripted model from the request it is given). It keeps, per execution
(`current_execution`), the sampling fields of the last body it saw.
"""

from __future__ import annotations

import threading
from typing import Any

from branchpoint.errors import InputError
from branchpoint.models.request_log import current_execution

#: Request fields that shape how a reply is drawn (OpenAI, vLLM and llama.cpp names).
SAMPLING_FIELDS: tuple[str, ...] = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "repeat_penalty",
)

#: Sampling fields that runs and fork studies set themselves (`model.temperature`, `model.top_p`,
#: `model.seed`; a fork's `--temperature`, `--top-p` and per-branch seeds): `model.extra_body`
#: may not set them, or it would override them in the request while the record says otherwise.
OWNED_SAMPLING_FIELDS: tuple[str, ...] = ("temperature", "top_p", "seed")


def sampling_of(body: Any) -> dict[str, Any]:
    """The sampling fields of one request body as sent (absent and null fields left out)."""
    if not isinstance(body, dict):
        return {}
    return {k: body[k] for k in SAMPLING_FIELDS if body.get(k) is not None}


def check_extra_body(extra_body: dict[str, Any]) -> None:
    """Refuse an `extra_body` that sets a sampling field the run or a fork study sets (it would
    win in the request body, and records and the temperature-0 check would describe another draw)."""
    owned = [k for k in OWNED_SAMPLING_FIELDS if k in extra_body]
    if owned:
        names = " and ".join(owned)
        raise InputError(
            f"sets {names}, which runs and fork studies send themselves (model.temperature, model.top_p, "
            f"model.seed; fork --temperature / --top-p / --seed): set {' and '.join('model.' + k for k in owned)} "
            "instead of extra_body"
        )


class SentSampling:
    """A request sink that keeps the sampling fields of each execution's last request body."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str | None, dict[str, Any]] = {}

    def write(self, endpoint: str, body: Any) -> None:
        """Keep the sampling of this request as its execution's latest."""
        sampling = sampling_of(body)
        execution = current_execution.get()
        with self._lock:
            self._last[execution] = sampling

    def pop(self, execution_id: str) -> dict[str, Any] | None:
        """The sampling of the execution's last request, forgotten here; None when it sent none
        through this sink."""
        with self._lock:
            return self._last.pop(execution_id, None)

    def close(self) -> None:
        """Nothing to release (a sink may be closed like a `RequestLog`)."""
