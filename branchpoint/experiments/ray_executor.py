"""Run a spec's conditions as Ray tasks over a cluster (`branchpoint run --executor ray`).

Each condition of the sweep is one *shard*; a Ray task runs the ordinary runner for the
executions of its shard that the run still lacks, so every execution keeps the deterministic id
of a local run. A shard writes into its own run folder, `RUN_DIR/shards/<shard>/` (spec,
`executions.jsonl`, `checkpoints.sqlite`, `retrieval_cache.sqlite`, server logs), so no two
processes ever append to one file or share one SQLite saver. Only the driver writes the run's
own files: when a shard finishes it copies the shard's checkpoint and retrieval-cache rows into
`RUN_DIR/checkpoints.sqlite` and `RUN_DIR/retrieval_cache.sqlite`, then appends the shard's
records to `RUN_DIR/executions.jsonl`, each exactly once. `evaluate`, `checkpoints ls` and
`fork` then read the run folder as if it had run locally.

A folded shard folder is deleted (renamed, then removed), so every execution is stored once. A
killed driver loses nothing a shard recorded: the next run first folds every shard folder it
finds into the run folder, then plans only what is still missing. With `--checkpoints
postgresql://...` every worker saves into that one database and no checkpoint rows are copied.

Each worker talks to its own machine's model server: `BRANCHPOINT_MODEL_BASE_URL`, when set in
a worker's environment (the environment `ray start` was given on that node), replaces
`model.base_url`; the URL is not part of an execution's id.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import socket
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from branchpoint.checkpoints.postgres import is_postgres_url
from branchpoint.checkpoints.store import sqlite_checkpointer
from branchpoint.errors import BranchpointError, InputError
from branchpoint.experiments.runner import (
    PlannedExecution,
    RunSummary,
    check_run_dir,
    check_sources,
    missing_work,
    plan_executions,
    progress_bar,
    run_experiment,
    select_questions,
)
from branchpoint.experiments.spec import ExperimentSpec, condition_fingerprint
from branchpoint.experiments.store import RunStore, run_lock
from branchpoint.retrieval.cache import RetrievalCache
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    PASSAGES_FILE,
    RETRIEVAL_CACHE_FILE,
    ExecutionRecord,
    PassageResolver,
    TraceError,
    dump_record,
)

log = logging.getLogger(__name__)

#: The Ray release this module is tested with (the `ray` extra of pyproject.toml pins it).
RAY_REQUIREMENT = "ray==2.60.0"
#: Set on a worker machine to point its workers at that machine's model server.
MODEL_URL_ENV = "BRANCHPOINT_MODEL_BASE_URL"
#: The folder of the run directory that holds one run folder per shard.
SHARDS_DIR = "shards"

CHECKPOINT_TABLES = ("checkpoints", "writes")
CACHE_TABLES = ("retrieval_cache",)


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
    """What one Ray task runs: these executions of the spec, into `RUN_DIR/shards/<shard>`."""

    spec: dict[str, Any]
    run_dir: str
    shard: str
    execution_ids: list[str]
    checkpoints: str | None
    concurrency: int
    cwd: str


@dataclass
class ShardResult:
    """What a shard task hands back: every record its shard holds for the ids it was given."""

    shard: str
    node: str
    ran: int
    records: list[str] = field(default_factory=list)
    wall_s: float = 0.0


@contextmanager
def _working_directory(path: str) -> Iterator[None]:
    """Run in the driver's folder where this machine has it, so relative spec paths resolve."""
    before = os.getcwd()
    if os.path.isdir(path):
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_shard(task: ShardTask) -> ShardResult:
    """Run one shard with the ordinary runner (in a Ray worker) and return its records.

    The shard's own store skips what it already finished; its records for the given ids are
    all returned, so a driver that cannot see this machine's files still receives them.
    """
    with _working_directory(task.cwd):
        spec = node_model_spec(ExperimentSpec.model_validate(task.spec))
        shard_dir = Path(task.run_dir) / SHARDS_DIR / task.shard
        summary = run_experiment(
            spec,
            shard_dir,
            progress=False,
            checkpoints=task.checkpoints,
            concurrency=task.concurrency,
            execution_ids=task.execution_ids,
        )
        wanted = set(task.execution_ids)
        lines = [dump_record(r) for r in RunStore(shard_dir).records() if r.execution_id in wanted]
    return ShardResult(task.shard, socket.gethostname(), summary.ran, lines, summary.wall_s)


def complete_records(path: Path) -> list[ExecutionRecord]:
    """The records of a trace file's complete lines (a torn last line, still being written, is left)."""
    data = path.read_bytes() if path.is_file() else b""
    records = []
    resolver = PassageResolver(path.parent / PASSAGES_FILE)  # the shard's own passage store
    for lineno, raw in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), start=1):
        if raw.strip():
            try:
                obj = resolver.resolve(json.loads(raw), f"{path} line {lineno}")
                records.append(ExecutionRecord.model_validate(obj))
            except ValueError as exc:
                raise TraceError(f"{path} line {lineno}: not a valid record ({exc})") from None
    return records


def merge_sqlite_tables(
    target: Path,
    source: Path,
    tables: Iterable[str],
    conflict: str,
    replace_threads: bool = False,
    skip_threads: Iterable[str] = (),
) -> int:
    """Copy every row of `tables` from `source` into `target` (same schema); returns rows copied.

    `conflict` is `REPLACE` (the source wins) or `IGNORE` (what `target` holds wins). With
    `replace_threads`, every `thread_id` the source holds is first deleted from the target's
    tables: a shard's database is the whole truth about its threads (an execution redone there
    was cleared there first), so rows of an abandoned attempt folded earlier do not survive.
    Threads in `skip_threads` (executions the run already recorded from elsewhere, e.g. redone by
    a run without this shard) are left as the target has them, neither deleted nor copied.
    """
    conn = sqlite3.connect(str(target), timeout=30)
    try:
        conn.execute("ATTACH DATABASE ? AS shard", (str(source),))
        conn.execute("CREATE TEMP TABLE skip_threads (thread_id TEXT PRIMARY KEY)")
        conn.executemany("INSERT OR IGNORE INTO temp.skip_threads VALUES (?)", [(str(t),) for t in skip_threads])
        copied = 0
        with conn:
            present = [t for t in tables if conn.execute(f"PRAGMA shard.table_info({t})").fetchall()]
            threaded = {
                t for t in present if "thread_id" in {row[1] for row in conn.execute(f"PRAGMA shard.table_info({t})")}
            }
            keep = "thread_id NOT IN (SELECT thread_id FROM temp.skip_threads)"
            if replace_threads:
                threads = " UNION ".join(f"SELECT thread_id FROM shard.{t}" for t in present if t in threaded)
                for table in present if threads else ():
                    conn.execute(f"DELETE FROM main.{table} WHERE thread_id IN ({threads}) AND {keep}")
            for table in present:
                columns = [row[1] for row in conn.execute(f"PRAGMA shard.table_info({table})")]
                names = ", ".join(f'"{c}"' for c in columns)
                where = f" WHERE {keep}" if table in threaded else ""
                cur = conn.execute(
                    f"INSERT OR {conflict} INTO main.{table} ({names}) SELECT {names} FROM shard.{table}{where}"
                )
                copied += max(cur.rowcount, 0)
        conn.execute("DETACH DATABASE shard")
        return copied
    finally:
        conn.close()


class ShardMerger:
    """Folds shard folders into the run folder: database rows first, then each record once.

    A record is appended unless its execution already has a final record in the run, or the very
    same record (an `incomplete` one folded before) is already there.
    """

    def __init__(self, store: RunStore, checkpoints: str | None) -> None:
        self.store = store
        self.merge_checkpoints = checkpoints is None  # PostgreSQL: every shard saved into it already
        self._seen: set[str] = set()
        self._finished: set[str] = set()
        for rec in store.records():
            self._note(rec)
        self._ready: set[str] = set()

    def _note(self, rec: ExecutionRecord) -> None:
        self._seen.add(hashlib.sha256(dump_record(rec).encode()).hexdigest())
        if rec.status != "incomplete":
            self._finished.add(rec.execution_id)
        else:
            self._finished.discard(rec.execution_id)

    def finished_ids(self) -> set[str]:
        """Executions with a final record in the run (as `RunStore.finished_ids`)."""
        return set(self._finished)

    def merge_records(self, records: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
        """Append the records the run lacks, in order; returns those appended."""
        added = []
        for rec in records:
            digest = hashlib.sha256(dump_record(rec).encode()).hexdigest()
            if rec.execution_id in self._finished or digest in self._seen:
                continue
            self.store.append(rec)
            self._note(rec)
            added.append(rec)
        return added

    def _target(self, name: str) -> Path:
        """The run's own database `name`, its tables made by the code that owns them."""
        target = self.store.run_dir / name
        if name not in self._ready:
            if name == CHECKPOINTS_FILE:
                with sqlite_checkpointer(target):
                    pass
            else:
                RetrievalCache(target).close()
            self._ready.add(name)
        return target

    def merge_databases(self, shard_dir: Path) -> bool:
        """Copy a shard's checkpoint and cache rows into the run's; False if checkpoints were expected but absent."""
        found = True
        if self.merge_checkpoints:
            db = shard_dir / CHECKPOINTS_FILE
            found = db.is_file()
            if found:
                merge_sqlite_tables(
                    self._target(db.name),
                    db,
                    CHECKPOINT_TABLES,
                    "REPLACE",
                    replace_threads=True,
                    skip_threads=self._finished,
                )
        cache = shard_dir / RETRIEVAL_CACHE_FILE
        if cache.is_file():  # first writer wins, as within the cache itself
            merge_sqlite_tables(self._target(cache.name), cache, CACHE_TABLES, "IGNORE")
        return found

    def shard_dirs(self) -> list[Path]:
        """The shard folders present in the run folder (leftovers of an interrupted removal are
        removed here: their content was folded before they were renamed)."""
        root = self.store.run_dir / SHARDS_DIR
        if root.is_dir():
            for leftover in root.glob(".folded-*"):
                shutil.rmtree(leftover, ignore_errors=True)
        return self.shard_dirs_of(self.store)

    @staticmethod
    def shard_dirs_of(store: RunStore) -> list[Path]:
        """The shard folders present in a run folder (read-only; half-removed ones left out)."""
        root = store.run_dir / SHARDS_DIR
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []

    def remove(self, shard_dir: Path) -> None:
        """Delete a folded shard folder (renamed first, so a half-deleted one is never refolded)."""
        if not shard_dir.is_dir():
            return
        done = shard_dir.with_name(f".folded-{shard_dir.name}-{uuid.uuid4().hex[:8]}")
        os.rename(shard_dir, done)
        shutil.rmtree(done, ignore_errors=True)
        root = shard_dir.parent
        if root.is_dir() and not any(root.iterdir()):
            root.rmdir()

    def fold(self, shard_dir: Path, records: Iterable[ExecutionRecord] = ()) -> tuple[list[ExecutionRecord], bool]:
        """Fold a shard into the run: its databases, the records given (a Ray task's result) and
        those in its folder; then delete the folder, so no execution is stored twice. Returns the
        records added, and whether the folder's checkpoints were found (False: not on this machine)."""
        found = self.merge_databases(shard_dir)
        added = self.merge_records(records)
        if shard_dir.is_dir():
            added += self.merge_records(complete_records(shard_dir / EXECUTIONS_FILE))
            if found:
                self.remove(shard_dir)
        return added, found

    def recover(self) -> list[ExecutionRecord]:
        """Fold every shard folder present (work a killed driver did not fold); returns records added."""
        added = []
        for shard_dir in self.shard_dirs():
            added += self.fold(shard_dir)[0]
        return added


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


def _task_error(exc: BaseException, shard: str, condition: dict[str, Any]) -> BaseException:
    """A failed shard's error for people: an input or server error keeps its one-line form."""
    cause = getattr(exc, "cause", None)
    where = f"shard {shard} (condition {json.dumps(condition, default=str) if condition else 'base'})"
    if isinstance(cause, (BranchpointError, TraceError)):
        try:
            return type(cause)(f"{where}: {cause}")
        except TypeError:
            return cause
    return exc


class ShardProgress:
    """Counts the lines shards append to their files (where this machine can see them)."""

    def __init__(self) -> None:
        self._offsets: dict[Path, int] = {}
        self.counts: dict[str, int] = {}

    def watch(self, shard: str, path: Path) -> None:
        self._offsets[path] = path.stat().st_size if path.is_file() else 0
        self.counts[shard] = 0

    def poll(self) -> int:
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
        self._offsets.pop(path, None)
        self.counts.pop(shard, None)


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
    `postgresql://` URL or None (each shard's own SQLite file, folded into the run's).
    """
    ray = require_ray()
    if concurrency < 1:
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")
    if checkpoints is not None and not is_postgres_url(checkpoints):
        raise InputError(
            "--checkpoints with --executor ray: expected a postgresql:// URL (one SQLite file cannot "
            "take several processes' savers; leave it out for one SQLite file per shard)"
        )
    started = time.perf_counter()
    plan = plan_executions(spec, select_questions(spec))  # validates names before anything is written
    store = RunStore(run_dir)
    with run_lock(store.run_dir) as lock:  # one writer per run folder; the shards write their own folders
        check_run_dir(store, spec, checkpoints)
        done = store.finished_ids()
        missing = [p for p in plan if p.execution_id not in done]
        if not missing and not ShardMerger.shard_dirs_of(store):
            return missing_work(plan, done, store.run_dir, started)[1]
        check_sources(missing)
        lock.committed = True
        store.create(spec.model_dump(mode="json"))
        return _run_ray_locked(ray, spec, store, plan, progress, checkpoints, concurrency, address, num_cpus, started)


def _run_ray_locked(
    ray: Any,
    spec: ExperimentSpec,
    store: RunStore,
    plan: list[PlannedExecution],
    progress: bool,
    checkpoints: str | None,
    concurrency: int,
    address: str | None,
    num_cpus: int | None,
    started: float,
) -> RunSummary:
    """`run_experiment_ray` once the run folder is locked and its spec written."""
    merger = ShardMerger(store, checkpoints)
    merger.recover()
    todo, summary = missing_work(plan, merger.finished_ids(), store.run_dir, started)
    if not todo:
        return summary

    shards: dict[str, list[PlannedExecution]] = {}
    for p in todo:
        shards.setdefault(shard_name(p), []).append(p)
    spec_data = spec.model_dump(mode="json")
    run_abs = str(store.run_dir.resolve())
    with ray_session(address, num_cpus), progress_bar(progress) as bar:
        bar_task = bar.add_task(f"{spec.name} (ray, {len(shards)} shards)", total=len(todo), rate="")
        remote = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(run_shard)
        watcher = ShardProgress()
        pending: dict[Any, str] = {}
        for name, items in shards.items():
            watcher.watch(name, store.run_dir / SHARDS_DIR / name / EXECUTIONS_FILE)
            task = ShardTask(
                spec_data, run_abs, name, [p.execution_id for p in items], checkpoints, concurrency, os.getcwd()
            )
            pending[remote.remote(task)] = name
        unseen: list[str] = []
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                for ref in ready:
                    name = pending.pop(ref)
                    try:
                        result: ShardResult = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        raise _task_error(exc, name, shards[name][0].condition) from None
                    watcher.forget(name, store.run_dir / SHARDS_DIR / name / EXECUTIONS_FILE)
                    added, found = merger.fold(
                        store.run_dir / SHARDS_DIR / name,
                        (ExecutionRecord.model_validate_json(r) for r in result.records),
                    )
                    if not found:
                        unseen.append(f"{name} on {result.node}")
                    for rec in added:
                        summary.ran += 1
                        summary.statuses[rec.status] = summary.statuses.get(rec.status, 0) + 1
                running = watcher.poll()
                elapsed = time.perf_counter() - started
                bar.update(
                    bar_task,
                    completed=min(summary.ran + running, len(todo)),
                    rate=f"{(summary.ran + running) / max(elapsed, 1e-9) * 60:.1f}/min",
                )
        except BaseException:
            for ref in pending:
                ray.cancel(ref)
            merger.recover()  # keep what the shards recorded before the failure
            raise
    if unseen:
        log.warning(
            "checkpoints of %d shards are not visible from this machine (%s): use a shared run "
            "folder or --checkpoints postgresql://... to fork them",
            len(unseen),
            ", ".join(unseen),
        )
    summary.wall_s = time.perf_counter() - started
    return summary


__all__ = [
    "MODEL_URL_ENV",
    "RAY_REQUIREMENT",
    "ShardMerger",
    "node_model_spec",
    "ray_session",
    "require_ray",
    "run_experiment_ray",
    "run_shard",
    "shard_name",
]
