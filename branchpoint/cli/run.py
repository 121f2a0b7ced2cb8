"""`branchpoint run`: run every missing execution of a spec."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import (
    CACHE_HELP,
    NO_CACHE_HELP,
    SAMPLE_HELP,
    SET_HELP,
    STRICT_CONDITIONS_HELP,
    app,
    cache_override,
    exit_if_incomplete,
    friendly_errors,
    load_spec_with,
    print_summary,
    warn_identical_before,
)


@app.command()
@friendly_errors
def run(
    spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
    out: Path | None = typer.Option(None, "--out", help="Run directory (default: runs/<spec name>)."),
    concurrency: int = typer.Option(
        1, "--concurrency", min=1, help="Executions at once (keeps a vLLM server's batch full)."
    ),
    limit: int | None = typer.Option(
        None,
        "--limit",
        min=1,
        help="Only N questions of the spec's selection (keeping its answerable / unanswerable balance).",
    ),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    sample: str | None = typer.Option(None, "--sample", help=SAMPLE_HELP),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="local (one asyncio event loop in this process, or one per --processes) or ray (one Ray task per "
        "sweep condition).",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="--executor ray: cluster to join, e.g. auto or HOST:6379 (default: start a local one).",
    ),
    processes: int = typer.Option(
        1,
        "--processes",
        min=1,
        help="--executor local: split the executions over N processes sharing the model server "
        "(model.provider openai); --concurrency is the total.",
    ),
    log_requests: bool = typer.Option(
        False,
        "--log-requests",
        help="Append every request body sent to the model to RUN_DIR/requests.jsonl (the HTTP body as sent, "
        "LangChain models' included; a model with no HTTP client: its call).",
    ),
    cache: Path | None = typer.Option(None, "--cache", help=CACHE_HELP),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    strict_conditions: bool = typer.Option(False, "--strict-conditions", help=STRICT_CONDITIONS_HELP),
) -> None:
    """Run every missing execution of a spec; rerunning a finished spec makes no model call.

    Exit code 0: every planned execution is recorded; 3: some are incomplete (transport faults),
    the printed command resumes them; 2: bad input (nothing written), or the run folder is in use
    by another writer.

    Example: branchpoint run experiments/quickstart.yaml --out runs/quickstart

    Example: branchpoint run experiments/search_cap_sweep.yaml --sample 4,4 --set 'sweep.agent.search_cap=[0, 2, 5]'

    Example: branchpoint run experiments/search_cap_sweep.yaml --executor ray --ray-address auto --concurrency 32

    Example: branchpoint run experiments/vllm_qwen3.yaml --concurrency 128 --processes 4

    Example: branchpoint run experiments/quickstart.yaml --out runs/again --cache ~/.cache/branchpoint/responses
    """
    from branchpoint.experiments.executors import run_spec

    response_cache = cache_override(cache, no_cache)
    # a quick look at a big study: --limit / --sample; the response cache is written into the run's spec
    loaded = load_spec_with(spec, set_, sample, limit).with_response_cache(response_cache)
    run_dir = out or Path("runs") / loaded.name
    warn_identical_before(loaded, strict=strict_conditions)  # from the first requests, before anything runs
    summary = run_spec(
        loaded,
        run_dir,
        executor=executor,
        ray_address=ray_address,
        processes=processes,
        concurrency=concurrency,
        checkpoints=checkpoints,
        log_requests=log_requests,
        progress=not no_progress,
    )
    print_summary(summary)
    incomplete = summary.statuses.get("incomplete", 0)
    if loaded.fork is not None:
        from branchpoint.cli.fork import print_fork_summary
        from branchpoint.experiments.fork_options import record_fork_settings
        from branchpoint.experiments.forking import fork_run
        from branchpoint.experiments.study_settings import fork_settings

        fork_summary = fork_run(  # on the same executor as the run
            run_dir,
            loaded.fork,
            progress=not no_progress,
            checkpoints=checkpoints,
            log_requests=log_requests,
            executor=executor,
            ray_address=ray_address,
            processes=processes,
            response_cache=response_cache,
        )
        record_fork_settings(run_dir, "run", loaded.fork, fork_settings(run_dir, {}), fork_summary)
        print_fork_summary(fork_summary)
        incomplete += fork_summary.statuses.get("incomplete", 0)
    resume = ["branchpoint", "run", str(spec), "--out", str(run_dir)]
    resume += [
        *(["--limit", str(limit)] if limit else []),
        *(["--concurrency", str(concurrency)] if concurrency > 1 else []),
    ]
    resume += [
        *(["--executor", executor] if executor != "local" else []),
        *(["--processes", str(processes)] if processes > 1 else []),
        *(["--cache", str(response_cache)] if response_cache else ["--no-cache"] if no_cache else []),
    ]
    exit_if_incomplete(incomplete, "executions", resume, checkpoints)
