"""List the legal boundaries of a run's executions (`branchpoint checkpoints ls`)."""

from __future__ import annotations

from pathlib import Path

from branchpoint.checkpoints.boundaries import BoundaryInfo, list_boundaries
from branchpoint.checkpoints.store import open_checkpointer
from branchpoint.checkpoints.values import state_reader
from branchpoint.errors import InputError
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, read_records


def run_boundaries(
    run_dir: Path, execution: str | None = None, checkpoints: str | None = None
) -> list[tuple[str, BoundaryInfo]]:
    """(execution id, boundary) for every execution and fork branch of a run, or for one id."""
    run_dir = Path(run_dir)
    db = run_dir / "checkpoints.sqlite"
    traces = run_dir / EXECUTIONS_FILE
    if (checkpoints is None and not db.is_file()) or not traces.is_file():
        raise InputError(f"{run_dir}: not a run directory (expected executions.jsonl and checkpoints.sqlite)")
    records = read_records(traces)
    forks = run_dir / FORKS_FILE
    if forks.is_file():  # branches are executions too: their own boundaries can be forked again
        records += read_records(forks)
    ids = list(dict.fromkeys(r.execution_id for r in records))
    if execution is not None:
        matches = [i for i in ids if i.startswith(execution)]
        if len(matches) != 1:
            what = "no" if not matches else f"{len(matches)}"
            raise InputError(f"--execution {execution}: {what} executions of {run_dir} match")
        ids = matches
    rows = []
    with open_checkpointer(checkpoints or db) as saver:
        reader = state_reader(saver)
        for eid in ids:
            rows += [(eid, b) for b in list_boundaries(saver, eid, reader)]
    return rows
