"""`evaluate`: judge a run's traces, compute metrics, write metrics.json and judged.jsonl."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import MetricsConfig, compute_metrics, metrics_json
from branchpoint.traces import dump_record, read_records

EXECUTIONS_FILE = "executions.jsonl"
METRICS_FILE = "metrics.json"
JUDGED_FILE = "judged.jsonl"


def trace_path(path: Path) -> Path:
    """The trace file of a run directory (RUN_DIR/executions.jsonl) or the file itself."""
    path = Path(path)
    if path.is_dir():
        traces = path / EXECUTIONS_FILE
        if not traces.is_file():
            raise InputError(f"{traces}: not found (expected a run directory with {EXECUTIONS_FILE})")
        return traces
    if not path.is_file():
        raise InputError(f"{path}: not found (expected a run directory or a .jsonl trace file)")
    return path


def write_files_atomically(files: dict[Path, str]) -> None:
    """Write every file to a temporary sibling first, then rename each over its target."""
    tmps: dict[Path, Path] = {}
    try:
        for target, text in files.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp.{os.getpid()}")
            tmps[target] = tmp
            with tmp.open("w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for target, tmp in tmps.items():
            os.replace(tmp, target)
    finally:
        for tmp in tmps.values():
            if tmp.exists():
                tmp.unlink()


def evaluate(
    path: Path,
    judge: str = "rule",
    out_dir: Path | None = None,
    cfg: MetricsConfig = MetricsConfig(),
) -> dict[str, Any]:
    """Judge the traces at `path`, write metrics.json and judged.jsonl to `out_dir`, return metrics.

    `path` is a run directory (its executions.jsonl is read) or a trace file; `out_dir`
    defaults to the run directory or the trace file's folder. Nothing is written unless reading,
    judging and scoring all succeeded.
    """
    traces = trace_path(Path(path))
    records = read_records(traces)
    if not records:
        raise InputError(f"{traces}: no execution records to evaluate")
    judged = judge_records(records, judge)
    metrics = compute_metrics(judged, judge, cfg)
    out = Path(out_dir) if out_dir is not None else traces.parent
    write_files_atomically(
        {
            out / METRICS_FILE: metrics_json(metrics),
            out / JUDGED_FILE: "".join(dump_record(r) + "\n" for r in judged),
        }
    )
    return metrics
