"""Write step-label rows as Parquet and JSONL, one row per state, with one fixed schema.

The Parquet file is what `datasets.load_dataset("parquet", data_files=...)` and pyarrow read; the
JSONL file holds the same rows as JSON objects (for `datasets.load_dataset("json", ...)` or any
reader). Both are written atomically, beside a `.meta.json` with the settings and provenance
(a row file has no room for them: every line is a state).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.traces import write_files_atomically

#: What `export labels --out FILE` accepts as FILE's suffix (the other file gets the other one).
SUFFIXES = (".parquet", ".jsonl")


def out_paths(out: Path) -> tuple[Path, Path, Path]:
    """(Parquet, JSONL, meta) paths for `--out FILE`: FILE with each suffix (FILE may end in
    .parquet or .jsonl, or have no suffix)."""
    out = Path(out)
    if out.suffix in SUFFIXES:
        out = out.with_suffix("")
    elif out.suffix:
        raise InputError(f"--out {out}: expected a file name ending in .parquet or .jsonl (or none), got {out.suffix}")
    return out.with_suffix(".parquet"), out.with_suffix(".jsonl"), out.with_suffix(".meta.json")


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq  # noqa: F401  (imported for its side: pa.parquet)
    except ImportError:
        raise InputError(
            "writing Parquet needs pyarrow: pip install 'branchpoint[training]' (or pip install pyarrow)"
        ) from None
    return pa


def label_schema() -> Any:
    """The Arrow schema of a step-label row (docs/training.md describes each column)."""
    pa = _pyarrow()
    interval = pa.list_(pa.float64())
    tool_call = pa.struct(
        [
            ("id", pa.string()),
            ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
        ]
    )
    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("tool_calls", pa.list_(tool_call)),
            ("tool_call_id", pa.string()),
        ]
    )
    fields: list[tuple[str, Any]] = [
        ("state_id", pa.string()),
        ("run_id", pa.string()),
        ("parent_execution_id", pa.string()),
        ("checkpoint_id", pa.string()),
        ("boundary", pa.string()),
        ("boundary_kind", pa.string()),
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("answerable", pa.bool_()),
        ("category", pa.string()),
        ("gold_answers", pa.list_(pa.string())),
        ("stratum", pa.string()),
        ("component", pa.string()),
        ("prompt_format", pa.string()),
        ("prompt_policy", pa.string()),
        ("messages", pa.list_(message)),
        ("tools", pa.string()),
        ("prompt_text", pa.string()),
        ("searches", pa.int64()),
        ("search_allowed", pa.bool_()),
        ("t_action", pa.string()),
        ("s_action", pa.string()),
        ("action_taken", pa.string()),
        ("searched", pa.bool_()),
        ("m_think", pa.int64()),
        ("m_search", pa.int64()),
        ("p_think", pa.float64()),
        ("p_search", pa.float64()),
        ("p_think_interval", interval),
        ("p_search_interval", interval),
        ("delta", pa.float64()),
        ("delta_interval", interval),
        ("tokens_think", pa.float64()),
        ("tokens_search", pa.float64()),
        ("search_needed", pa.bool_()),
        ("search_harmful", pa.bool_()),
        ("search_redundant", pa.bool_()),
        ("search_missing", pa.bool_()),
        ("label", pa.string()),
        ("level", pa.float64()),
        ("reward", pa.string()),
        ("judge", pa.string()),
    ]
    return pa.schema(fields)


def parquet_bytes(rows: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any]) -> bytes:
    """The rows as one Parquet file (schema `label_schema`, `metadata` under the key
    `branchpoint` of the file's key-value metadata)."""
    pa = _pyarrow()
    import pyarrow.parquet as pq

    schema = label_schema()
    names = set(schema.names)
    for i, row in enumerate(rows):
        if set(row) != names:
            raise InputError(f"label row {i}: columns {sorted(set(row) ^ names)} differ from the label schema")
    table = pa.Table.from_pylist([dict(r) for r in rows], schema=schema)
    table = table.replace_schema_metadata({"branchpoint": json.dumps(metadata)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def write_label_files(rows: Sequence[Mapping[str, Any]], out: Path, metadata: Mapping[str, Any]) -> list[Path]:
    """Write the rows to FILE.parquet and FILE.jsonl, and `metadata` to FILE.meta.json (see
    `out_paths`); the paths written."""
    parquet, jsonl, meta = out_paths(out)
    data = parquet_bytes(rows, metadata)
    text = "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows)
    parquet.parent.mkdir(parents=True, exist_ok=True)
    write_files_atomically({jsonl: text, meta: json.dumps(dict(metadata), indent=2) + "\n"})
    tmp = parquet.with_name(parquet.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(parquet)
    return [parquet, jsonl, meta]
