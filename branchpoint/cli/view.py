"""`branchpoint view`: the run viewer."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import app, console, friendly_errors


@app.command()
@friendly_errors
def view(
    run_dirs: list[Path] = typer.Argument(
        ...,
        help="One run directory (executions.jsonl, judged.jsonl, forks.jsonl, ...), or several to show side by side.",
    ),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."),
    export: Path | None = typer.Option(
        None,
        "--export",
        help="Write the page of one run as static files into this folder (no server; open its index.html).",
    ),
    judge: str | None = typer.Option(
        None, "--judge", help="Judge whose labels decide outcomes (default: each run's metrics.json judge, else rule)."
    ),
    forecasts: list[Path] = typer.Option([], "--forecasts", help="Forecasts files to show per state (value's format)."),
    no_token: bool = typer.Option(
        False,
        "--no-token",
        help="Serve without the per-start token in the URL (any local program can then read the run).",
    ),
    rebuild_requests: bool = typer.Option(
        False,
        "--rebuild-requests",
        help="First rebuild the requests of executions without requests.jsonl lines from the checkpoints "
        "(as `branchpoint requests rebuild`).",
    ),
) -> None:
    """Look at runs: executions table, timelines with each model call's request and reply,
    judge outputs, fork trees (127.0.0.1 only).

    Reads the traces only (never the checkpoint database); the requests as sent come from
    RUN/requests.jsonl (`run` / `fork` with --log-requests), else from RUN/requests.rebuilt.jsonl
    (`branchpoint requests rebuild`, or --rebuild-requests here), labelled as rebuilt. Several runs are shown in one table,
    with a run filter and their conditions side by side. While a run is still writing, the page
    adds its new records as they land. The URL it prints carries a random token made at each
    start (as Jupyter's does); requests without it, and requests whose Host is not a loopback
    name (another site's page), are refused. Ctrl-C stops the server.

    Example: branchpoint view runs/quickstart --port 8765
    Example: branchpoint view runs/native runs/tagged
    Example: branchpoint view runs/fork_study --export viewer/fork_study
    """
    from branchpoint.errors import InputError
    from branchpoint.evaluation.viewer import RunIndex, ViewerState, bind, make_server, url_of
    from branchpoint.evaluation.viewer.export import export_run
    from branchpoint.loopback import new_token

    seen: set[Path] = set()
    for run_dir in run_dirs:
        if run_dir.resolve() in seen:
            raise InputError(f"{run_dir}: given twice (each run directory once)")
        seen.add(run_dir.resolve())
    if export is not None and len(run_dirs) > 1:
        raise InputError(f"--export writes one run; {len(run_dirs)} were given (the server shows several together)")
    indexes = [RunIndex.open(run_dir, judge=judge) for run_dir in run_dirs]
    if rebuild_requests:
        from branchpoint.cli.request_logs import print_rebuild
        from branchpoint.experiments.request_rebuild import rebuild_requests as rebuild

        for run_dir in run_dirs:
            print_rebuild(rebuild(run_dir))
    state = ViewerState(indexes[0], list(forecasts), more=indexes[1:])
    if export is not None:
        counts = export_run(state, export)
        console.print(
            f"wrote {export}/index.html: {counts['rows']} records, {counts['trees']} fork trees"
            + (f", {counts['errors']} unreadable lines shown as error rows" if counts["errors"] else ""),
            soft_wrap=True,
        )
        return
    sock = bind(port)  # a port in use fails here, before the traces are read
    try:
        state.start()
        token = None if no_token else new_token()
        shown = str(run_dirs[0]) if len(run_dirs) == 1 else f"{len(run_dirs)} runs ({', '.join(map(str, run_dirs))})"
        console.print(
            f"[bold green]viewing[/] {shown} at {url_of(sock, token)} (127.0.0.1 only); Ctrl-C stops it.",
            soft_wrap=True,
            highlight=False,
        )
        make_server(state, token=token).run(sockets=[sock])
    finally:
        sock.close()
