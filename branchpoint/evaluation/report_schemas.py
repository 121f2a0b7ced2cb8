"""JSON Schemas of what branchpoint writes and reads: traces, metrics.json, value.json.

`branchpoint schema trace|metrics|value` prints them. Each is the model the file is read and
written through: `ExecutionRecord` (the trace contract), `metrics_file.MetricsReport` and
`value.value_file.ValueReport` (schema-versioned; objects allow additional keys, which later
minor versions may add).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from branchpoint.evaluation.metrics_file import MetricsReport
from branchpoint.evaluation.value.value_file import ValueReport
from branchpoint.traces import ExecutionRecord

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def json_schema(which: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `trace`, `metrics` or `value`."""
    models: dict[str, type[BaseModel]] = {"trace": ExecutionRecord, "metrics": MetricsReport, "value": ValueReport}
    if which not in models:
        raise ValueError(f"unknown schema {which!r} (expected one of: {', '.join(models)})")
    schema = models[which].model_json_schema(by_alias=True, mode="serialization")  # as written: "inf" strings too
    return {"$schema": _DRAFT, **schema}
