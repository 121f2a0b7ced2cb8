"""Run a spec's conditions as Ray tasks over a cluster (`branchpoint run --executor ray`): the Ray backend.

Each condition of the sweep is one shard (`shards.shard_name`); a Ray task runs the ordinary
runner for the executions of its shard that the run still lacks (`shards.run_shard`), into
`RUN_DIR/shards/<shard>/`, and hands back its records. The shared driver (`driver.run_sharded`,
`work_driver.drive`) folds each finished shard into the run folder and deletes its folder, as for
`--processes`; `evaluate`, `checkpoints ls` and `fork` then read the run folder as if it had run
locally. With `--checkpoints postgresql://...` every worker saves into that one database and no
checkpoint rows are copied.

Each worker talks to its own machine's model server: `BRANCHPOINT_MODEL_BASE_URL`, when set in
a worker's environment (the environment `ray start` was given on that node), replaces
`model.base_url`; the URL is not part of an execution's id.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from branchpoint.checkpoints.postgres import is_postgres_url
from branchpoint.errors import InputError
from branchpoint.experiments.driver import RunJob, run_sharded
from branchpoint.experiments.planning import PlannedExecution
from branchpoint.experiments.runner import RunSummary
from branchpoint.experiments.shards import SHARDS_DIR, ShardResult, ShardTask, run_shard, shard_name
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.work_driver import Shard, ShardOutcome
from branchpoint.traces import EXECUTIONS_FILE, ExecutionRecord

W = TypeVar("W")

#: The Ray release this module is tested with (the `ray` extra of pyproject.toml pins it).
RAY_REQUIREMENT = "ray==2.60.0"


def require_ray() -> ModuleType:
    """The `ray` module, or an error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError(
            f"--executor ray needs Ray, which is not installed here: pip install '{RAY_REQUIREMENT}' "
            "(or `make install`, or pip install -e '.[ray]')"
        ) from None
    return ray


_RAY_ENV = ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")
_TOKEN: list[str] = []


def _session_token() -> str:
    """This process's token for the local Ray clusters it starts (256 random bits, never on disk)."""
    if not _TOKEN:
        _TOKEN.append(secrets.token_hex(32))
    return _TOKEN[0]


@contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[ModuleType]:
    """Connect to a Ray cluster (`address`) or start a local one, leaving nothing behind.

    A local instance keeps its session files and logs in a temporary folder that is removed
    afterwards, and gets its auth token through the environment: nothing is written to `~/.ray`
    or `/tmp/ray`, no dashboard, no usage stats. With `address` (e.g. `auto`, `HOST:6379`) the
    cluster's own token is used as Ray finds it (`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH` or
    `~/.ray/auth_token`).
    A session the caller already opened is reused and left open.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    saved = {name: os.environ.get(name) for name in _RAY_ENV}
    tmp = tempfile.mkdtemp(prefix="bp-ray-")
    try:
        os.environ["RAY_TMPDIR"] = tmp
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        options: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.WARNING)
        if address is None:
            has_token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
            if os.environ.get("RAY_AUTH_MODE", "").lower() != "disabled" and not has_token:
                # A new local cluster turns token auth on and, lacking a token, writes one to
                # ~/.ray/auth_token; hand it one in the environment instead (inherited by Ray's
                # own processes). One token per process: Ray's loader caches the first it reads.
                os.environ["RAY_AUTH_TOKEN"] = _session_token()
            options.update(num_cpus=num_cpus, include_dashboard=False, _temp_dir=tmp)
        auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = auth_log.level
        auth_log.setLevel(logging.ERROR)  # "token authentication is enabled": as intended
        try:
            ray.init(address=address or "local", **options)
        finally:
            auth_log.setLevel(level)
        try:
            yield ray
        finally:
            ray.shutdown()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for _ in range(20):  # the last Ray processes may still be closing their logs
            shutil.rmtree(tmp, ignore_errors=True)
            if not os.path.exists(tmp):
                break
            time.sleep(0.25)


def run_experiment_ray(
    spec: ExperimentSpec,
    run_dir: str | Path,
    *,
    progress: bool = True,
    checkpoints: str | None = None,
    concurrency: int = 1,
    address: str | None = None,
    num_cpus: int | None = None,
) -> RunSummary:
    """Run every missing execution of a spec as Ray tasks, one per condition; as `run_experiment`.

    `concurrency` executions run at once inside each task. `address` is a Ray cluster to join
    (default: start a local instance with `num_cpus`, default all cores). `checkpoints` must be a
    `postgresql://` URL or None (each shard's own SQLite file, folded into the run's). No Ray
    session is opened when nothing is missing.
    """
    require_ray()
    if concurrency < 1:
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")
    check_ray_checkpoints(checkpoints)

    def backend(job: RunJob) -> RayBackend[PlannedExecution]:
        def task_of(shard: Shard[PlannedExecution], each: int) -> ShardTask:
            ids = [p.execution_id for p in shard.items]
            return ShardTask.of(job.spec, job.store.run_dir, shard.name, ids, job.checkpoints, each, job.invocation)

        return RayBackend(
            job.store.run_dir / SHARDS_DIR,
            concurrency,
            address,
            num_cpus,
            key=shard_name,
            where=lambda p: condition_label(p.condition),
            task_of=task_of,
            worker=run_shard,
        )

    return run_sharded(spec, run_dir, backend, progress=progress, checkpoints=checkpoints)


def check_ray_checkpoints(checkpoints: str | None) -> None:
    """`--checkpoints` with `--executor ray`: a PostgreSQL URL or nothing (one SQLite file per shard)."""
    if checkpoints is not None and not is_postgres_url(checkpoints):
        raise InputError(
            "--checkpoints with --executor ray: expected a postgresql:// URL (one SQLite file cannot "
            "take several processes' savers; leave it out for one SQLite file per shard)"
        )


class RayBackend(Generic[W]):
    """The missing work cut into shards by `key` (a run: one per condition, `shards.shard_name`),
    each one Ray task running `worker(task)` into `root/<key>`; its future is the task's.

    `task_of(shard, concurrency)` is the task a shard's Ray task gets; `where(item)` says what a
    shard holds in its errors (its condition).
    """

    in_place = False

    def __init__(
        self,
        root: Path,
        concurrency: int,
        address: str | None,
        num_cpus: int | None,
        *,
        key: Callable[[W], str],
        where: Callable[[W], str],
        task_of: Callable[[Shard[W], int], Any],
        worker: Callable[[Any], ShardResult],
        trace: str = EXECUTIONS_FILE,
    ) -> None:
        self.root = root
        self.concurrency = concurrency
        self.address = address
        self.num_cpus = num_cpus
        self.key = key
        self.where = where
        self.task_of = task_of
        self.worker = worker
        self.trace = trace
        self.description = "ray"
        self._refs: list[Any] = []

    def shards(self, todo: list[W]) -> list[Shard[W]]:
        """One shard per key (the same folder on every run)."""
        by_name: dict[str, list[W]] = {}
        for item in todo:
            by_name.setdefault(self.key(item), []).append(item)
        self.description = f"ray, {len(by_name)} shards"
        return [
            Shard(name, items, where=self.where(items[0]), folder=self.root / name, trace=self.trace)
            for name, items in by_name.items()
        ]

    def session(self) -> AbstractContextManager[Any]:
        """The Ray session the tasks run in (joined, or started and stopped here)."""
        return ray_session(self.address, self.num_cpus)

    def submit_all(self, shards: list[Shard[W]]) -> dict[Future[ShardOutcome], Shard[W]]:
        """One Ray task per shard (spread over the nodes), each with `concurrency` items at once."""
        ray = require_ray()
        remote = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(self.worker)
        out: dict[Future[ShardOutcome], Shard[W]] = {}
        for shard in shards:
            ref = remote.remote(self.task_of(shard, self.concurrency))
            self._refs.append(ref)
            out[_outcome(ref.future())] = shard
        return out

    def stop(self) -> None:
        """Cancel the tasks still running."""
        ray = require_ray()
        for ref in self._refs:
            ray.cancel(ref)


def condition_label(condition: dict[str, Any]) -> str:
    """A shard's condition in an error message: `condition {...}`, or `condition base`."""
    return f"condition {json.dumps(condition, default=str) if condition else 'base'}"


def _outcome(task: Future[ShardResult]) -> Future[ShardOutcome]:
    """A task's future, its result turned into the driver's `ShardOutcome` (the records it returned)."""
    out: Future[ShardOutcome] = Future()

    def done(f: Future[ShardResult]) -> None:
        try:
            result = f.result()
            records = [ExecutionRecord.model_validate_json(r) for r in result.records]
        except BaseException as exc:  # the task's error, raised by the driver naming the shard
            out.set_exception(exc)
        else:
            out.set_result(ShardOutcome(records=records, node=result.node, ran=result.ran))

    task.add_done_callback(done)
    return out


__all__ = [
    "RAY_REQUIREMENT",
    "RayBackend",
    "check_ray_checkpoints",
    "condition_label",
    "ray_session",
    "require_ray",
    "run_experiment_ray",
]
