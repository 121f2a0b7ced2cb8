"""Run a spec on the executor the user chose: in this process, over several local processes
sharing the model server, or on Ray (one task per sweep condition).

The one place that checks which executor options go together (`check_executor_options`, for
`branchpoint run`, `fork` and `replay`) and picks the backend of a run (`run_spec`, called by
`branchpoint run`). Every backend runs the same flow (`driver.run_sharded`); this module sits
above them, so none of them imports it.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.errors import InputError
from branchpoint.experiments.driver import in_process, run_sharded
from branchpoint.experiments.process_executor import run_experiment_processes
from branchpoint.experiments.ray_executor import run_experiment_ray
from branchpoint.experiments.runner import RunSummary
from branchpoint.experiments.spec import ExperimentSpec

EXECUTORS = ("local", "ray")


def check_executor_options(executor: str, ray_address: str | None, processes: int, log_requests: bool) -> None:
    """Reject executor options that do not go together (before anything runs or is written)."""
    if executor not in EXECUTORS:
        raise InputError(f"--executor: expected local or ray, got {executor!r}")
    if ray_address is not None and executor != "ray":
        raise InputError("--ray-address applies to --executor ray only")
    if processes > 1 and executor != "local":
        raise InputError("--processes applies to --executor local only (Ray runs one task per condition)")
    if log_requests and (executor != "local" or processes > 1):
        raise InputError("--log-requests applies to a single local process (no --processes, no --executor ray)")


def run_spec(
    spec: ExperimentSpec,
    run_dir: str | Path,
    *,
    executor: str = "local",
    ray_address: str | None = None,
    processes: int = 1,
    concurrency: int = 1,
    checkpoints: str | None = None,
    log_requests: bool = False,
    progress: bool = True,
) -> RunSummary:
    """Run every missing execution of `spec` into `run_dir` on the chosen executor."""
    check_executor_options(executor, ray_address, processes, log_requests)
    if concurrency < 1:
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")
    if executor == "ray":
        return run_experiment_ray(
            spec, run_dir, progress=progress, checkpoints=checkpoints, concurrency=concurrency, address=ray_address
        )
    if processes > 1:
        return run_experiment_processes(
            spec, run_dir, processes=processes, progress=progress, checkpoints=checkpoints, concurrency=concurrency
        )
    return run_sharded(spec, run_dir, in_process(concurrency, log_requests), progress=progress, checkpoints=checkpoints)


__all__ = ["EXECUTORS", "check_executor_options", "run_spec"]
