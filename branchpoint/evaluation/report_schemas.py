"""JSON Schemas of what branchpoint writes and reads: traces, metrics.json, value.json, and the
lines of invocations.jsonl.

`branchpoint schema trace|metrics|value|invocation` prints them. Each is the model the file is
read and written through: `ExecutionRecord` (the trace contract), `metrics_file.MetricsReport`
and `value.value_file.ValueReport` (schema-versioned; objects allow additional keys, which later
minor versions may add), `provenance.InvocationRecord`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.value.value_file import ValueReport
from branchpoint.provenance import InvocationRecord
from branchpoint.traces import ExecutionRecord

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def json_schema(which: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `trace`, `metrics`, `value` or `invocation`."""
    models: dict[str, type[BaseModel]] = {
        "trace": ExecutionRecord,
        "metrics": MetricsReport,
        "value": ValueReport,
        "invocation": InvocationRecord,
    }
    if which not in models:
        raise ValueError(f"unknown schema {which!r} (expected one of: {', '.join(models)})")
    schema = models[which].model_json_schema(by_alias=True, mode="serialization")  # as written: "inf" strings too
    return {"$schema": _DRAFT, **schema}
