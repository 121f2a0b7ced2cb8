"""What a shard of a run is: its name, the task that runs it, what it hands back, and how far it got.

A *shard* is a part of a run's missing executions that runs somewhere else than the driver (a
local process with `--processes`, a Ray task with `--executor ray`) with the ordinary runner,
into its own run folder `RUN_DIR/shards/<name>/` (spec, `executions.jsonl`,
`checkpoints.sqlite`, `retrieval_cache.sqlite`, server logs), so no two processes ever append to
one file or share one SQLite saver. The driver folds that folder into the run folder when the
shard is done (`shard_fold`). Every execution keeps the deterministic id of a local run.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchpoint.experiments.planning import PlannedExecution
from branchpoint.experiments.runner import run_experiment
from branchpoint.experiments.spec import ExperimentSpec, condition_fingerprint
from branchpoint.experiments.store import RunStore
from branchpoint.traces import dump_record

#: The folder of the run directory that holds one run folder per shard.
SHARDS_DIR = "shards"
#: The folder of the run directory that holds one folder per shard of a fork study (`fork_shards`).
FORK_SHARDS_DIR = "fork_shards"
#: Set on a worker machine to point its workers at that machine's model server.
MODEL_URL_ENV = "BRANCHPOINT_MODEL_BASE_URL"


def node_model_spec(spec: ExperimentSpec, environ: Mapping[str, str] = os.environ) -> ExperimentSpec:
    """The spec with `model.base_url` set to this machine's `BRANCHPOINT_MODEL_BASE_URL`, if any.

    Where a model is reached does not change an execution's id (see `condition_fingerprint`).
    """
    url = environ.get(MODEL_URL_ENV, "").strip()
    if not url:
        return spec
    return spec.model_copy(update={"model": spec.model.model_copy(update={"base_url": url})})


def shard_name(planned: PlannedExecution) -> str:
    """The stable name of a condition's shard: a hash of the condition and its settings.

    The same condition lands in the same shard folder on every run, so an execution that is
    redone finds its earlier checkpoints in the same place.
    """
    key = {**planned.condition, "_settings": condition_fingerprint(planned.spec)}
    return "cond-" + hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass
class ShardTask:
    """What one shard runs: these executions of the spec, into `RUN_DIR/shards/<shard>`."""

    spec: dict[str, Any]
    run_dir: str
    shard: str
    execution_ids: list[str]
    checkpoints: str | None
    concurrency: int
    cwd: str
    invocation: str | None = None

    @classmethod
    def of(
        cls,
        spec: ExperimentSpec,
        run_dir: Path,
        shard: str,
        execution_ids: list[str],
        checkpoints: str | None,
        concurrency: int,
        invocation: str | None = None,
    ) -> ShardTask:
        """The task as a worker in another process or on another node gets it: the spec as
        data, the run folder as an absolute path, the driver's working directory, and the
        driver's invocation (its records name it; the driver recorded its provenance)."""
        return cls(
            spec.model_dump(mode="json"),
            str(run_dir.resolve()),
            shard,
            execution_ids,
            checkpoints,
            concurrency,
            os.getcwd(),
            invocation,
        )


@dataclass
class ShardResult:
    """What a shard hands back: every record its shard holds for the ids it was given."""

    shard: str
    node: str
    ran: int
    records: list[str] = field(default_factory=list)
    wall_s: float = 0.0


@contextmanager
def working_directory(path: str) -> Iterator[None]:
    """Run in the driver's folder where this machine has it, so relative spec paths resolve."""
    before = os.getcwd()
    if os.path.isdir(path):
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_shard(task: ShardTask) -> ShardResult:
    """Run one shard with the ordinary runner (in a worker process or a Ray task) and return its records.

    The shard's own store skips what it already finished; its records for the given ids are
    all returned, so a driver that cannot see this machine's files still receives them.
    """
    with working_directory(task.cwd):
        spec = node_model_spec(ExperimentSpec.model_validate(task.spec))
        shard_dir = Path(task.run_dir) / SHARDS_DIR / task.shard
        summary = run_experiment(
            spec,
            shard_dir,
            progress=False,
            checkpoints=task.checkpoints,
            concurrency=task.concurrency,
            execution_ids=task.execution_ids,
            invocation_id=task.invocation,
        )
        wanted = set(task.execution_ids)
        lines = [dump_record(r) for r in RunStore(shard_dir).records() if r.execution_id in wanted]
    return ShardResult(task.shard, socket.gethostname(), summary.ran, lines, summary.wall_s)


class ShardProgress:
    """Counts the lines shards append to their trace files (where this machine can see them)."""

    def __init__(self) -> None:
        self._offsets: dict[Path, int] = {}
        self.counts: dict[str, int] = {}

    def watch(self, shard: str, path: Path) -> None:
        """Count the lines appended to `path` (shard `shard`'s trace file) from now on."""
        self._offsets[path] = path.stat().st_size if path.is_file() else 0
        self.counts[shard] = 0

    def poll(self) -> int:
        """The complete lines appended so far to every watched file."""
        for path, offset in list(self._offsets.items()):
            if path.is_file() and path.stat().st_size > offset:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
                done = data[: data.rfind(b"\n") + 1]
                self._offsets[path] = offset + len(done)
                self.counts[path.parent.name] += done.count(b"\n")
        return sum(self.counts.values())

    def forget(self, shard: str, path: Path) -> None:
        """Stop counting a shard (it is folded: its records now count as the run's)."""
        self._offsets.pop(path, None)
        self.counts.pop(shard, None)
