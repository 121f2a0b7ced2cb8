"""What a run folder holds and where each part came from, for `branchpoint runs show RUN_DIR`.

Read-only and forgiving: the spec is summarised from its YAML as recorded (a question file that
has moved since does not stop it), trace files are counted line by line (records per
invocation), and each JSON output's `provenance` block is read (files written before provenance
was recorded show none). A folder that holds none of a run's files is an InputError.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from branchpoint.errors import InputError
from branchpoint.provenance import InvocationRecord, Provenance, provenance_of, read_invocations
from branchpoint.traces import (
    AGREEMENT_FILE,
    EXECUTIONS_FILE,
    FORKS_FILE,
    INVOCATIONS_FILE,
    METRICS_FILE,
    REPLAYS_FILE,
    SPEC_FILE,
    VALIDATION_FILE,
    VALUE_FILE,
    iter_raw_lines,
)

TRACE_FILES = (EXECUTIONS_FILE, FORKS_FILE, REPLAYS_FILE)
OUTPUT_FILES = (METRICS_FILE, AGREEMENT_FILE, VALUE_FILE, VALIDATION_FILE)


@dataclass
class TraceCount:
    """The complete lines of a trace file, and how many name each invocation (None: none named)."""

    records: int = 0
    by_invocation: dict[str | None, int] = field(default_factory=dict)


@dataclass
class RunOverview:
    """A run folder: its spec's summary, its trace files' counts, its invocations, and the
    provenance blocks of its JSON outputs (None: the file has none; a str: why it is unreadable)."""

    run_dir: Path
    spec: dict[str, Any] | None
    traces: dict[str, TraceCount]
    invocations: list[InvocationRecord]
    outputs: dict[str, Provenance | str | None]

    def to_json(self) -> dict[str, Any]:
        """The overview as one JSON object (`runs show --json`)."""
        return {
            "run_dir": str(self.run_dir),
            "spec": self.spec,
            "traces": {
                name: {"records": c.records, "by_invocation": {str(k): n for k, n in c.by_invocation.items()}}
                for name, c in self.traces.items()
            },
            "invocations": [inv.model_dump(mode="json", exclude_none=True) for inv in self.invocations],
            "outputs": {
                name: (p.model_dump(mode="json", exclude_none=True) if isinstance(p, Provenance) else p)
                for name, p in self.outputs.items()
            },
        }


def run_overview(run_dir: Path) -> RunOverview:
    """The overview of `run_dir` (see the module docstring)."""
    run_dir = Path(run_dir)
    known = (SPEC_FILE, INVOCATIONS_FILE, *TRACE_FILES, *OUTPUT_FILES)
    if not run_dir.is_dir() or not any((run_dir / name).is_file() for name in known):
        raise InputError(f"{run_dir}: not a run directory (expected {SPEC_FILE}, {EXECUTIONS_FILE} or {METRICS_FILE})")
    traces = {name: count_trace(run_dir / name) for name in TRACE_FILES if (run_dir / name).is_file()}
    outputs = {name: output_provenance(run_dir / name) for name in OUTPUT_FILES if (run_dir / name).is_file()}
    return RunOverview(run_dir, spec_summary(run_dir / SPEC_FILE), traces, read_invocations(run_dir), outputs)


def spec_summary(path: Path) -> dict[str, Any] | None:
    """Name, description, model, policy, questions, sweep axes and number of conditions of a
    recorded spec (None without one)."""
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not YAML ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping (an experiment spec)")
    model = data.get("model") or {}
    sweep = data.get("sweep") or {}
    sizes = [len(v) if isinstance(v, list) else 1 for v in sweep.values()] if isinstance(sweep, dict) else []
    questions = data.get("questions") or {}
    return {
        "name": data.get("name"),
        "description": data.get("description"),
        "model": {k: model.get(k) for k in ("provider", "name", "base_url", "style") if model.get(k) is not None},
        "policy": (data.get("agent") or {}).get("policy"),
        "questions": {k: questions.get(k) for k in ("path", "format", "sample", "limit") if questions.get(k)},
        "sweep": sweep if isinstance(sweep, dict) else {},
        "conditions": math.prod(sizes) if sizes else 1,
        "fork": data.get("fork"),
    }


def count_trace(path: Path) -> TraceCount:
    """Complete lines of a trace file, by the invocation each names (a torn or bad line is not counted)."""
    count = TraceCount()
    with path.open("rb") as fh:
        for _, raw in iter_raw_lines(fh, path, on_too_long=lambda _n: None):
            if not raw.endswith(b"\n") or not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            invocation = obj.get("invocation") if isinstance(obj, dict) else None
            count.records += 1
            count.by_invocation[invocation] = count.by_invocation.get(invocation, 0) + 1
    return count


def output_provenance(path: Path) -> Provenance | str | None:
    """The `provenance` block of a JSON output, None when it has none, or why it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"unreadable: {exc}"
    try:
        return provenance_of(data, path)
    except InputError as exc:
        return str(exc)
