"""Fingerprints of what each execution actually sent to the model, for honest sweeps.

A sweep axis that changes nothing the model receives (a prompt variant the policy ignores,
reasoning effort on a completion-style model, a self-evaluation call that never happens) gives
identical traces under different labels. `RequestFingerprints` is a request sink with the same
`write(endpoint, body)` as `RequestLog`, so every client that can log its requests
(`.with_request_log(sink)`) feeds it: it hashes each execution's request bodies, in order, into
one fingerprint per execution (`current_execution` names the execution). The runner stores it in
the record (`request_fingerprint`), and `branchpoint.evaluation.sameness` compares conditions.

Left out of the hash: the sampling `seed` (a per-execution or per-repeat draw, not a setting the
sweep compares). Everything else stays in, repeats included: an agent may legitimately send the
same prompt twice (its shown evidence unchanged after a search), so a repeat counts. A transport
retry that resends a body therefore makes its execution's fingerprint differ from its twin's; that
errs on the safe side (two conditions are only ever reported identical when they are). Sampling
settings (temperature, top-p) stay in: the model does receive them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from typing import Any

from branchpoint.models.request_log import current_execution

#: Top-level request fields that never enter a fingerprint.
UNFINGERPRINTED_FIELDS = frozenset({"seed"})


def canonical_request(endpoint: str, body: Any) -> str:
    """One request as canonical JSON (sorted keys), without the fields that are not compared."""
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in UNFINGERPRINTED_FIELDS}
    return json.dumps([endpoint, body], sort_keys=True, ensure_ascii=False, default=str)


class RequestFingerprints:
    """A request sink that keeps one running SHA-256 per execution of every body it is given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hashes: dict[str | None, Any] = {}

    def write(self, endpoint: str, body: Any) -> None:
        """Add one request to the fingerprint of the execution running in this thread."""
        line = canonical_request(endpoint, body)
        execution = current_execution.get()
        with self._lock:
            self._hashes.setdefault(execution, hashlib.sha256()).update(line.encode() + b"\n")

    def pop(self, execution_id: str) -> str | None:
        """The fingerprint of an execution's requests (16 hex digits), forgotten here; None when
        it sent nothing through this sink."""
        with self._lock:
            digest = self._hashes.pop(execution_id, None)
        return None if digest is None else digest.hexdigest()[:16]

    def close(self) -> None:
        """Nothing to release (a sink may be closed like a `RequestLog`)."""


class RequestSinks:
    """Several request sinks as one (a `RequestLog` and `RequestFingerprints` side by side)."""

    def __init__(self, sinks: Iterable[Any]) -> None:
        self.sinks = list(sinks)

    def write(self, endpoint: str, body: Any) -> None:
        """Hand the request to every sink."""
        for sink in self.sinks:
            sink.write(endpoint, body)

    def close(self) -> None:
        """Close every sink."""
        for sink in self.sinks:
            sink.close()
