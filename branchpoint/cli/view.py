"""`branchpoint view`: the run viewer."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import app, console, friendly_errors


@app.command()
@friendly_errors
def view(
    run_dir: Path = typer.Argument(..., help="A run directory (executions.jsonl, judged.jsonl, forks.jsonl, ...)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."),
    export: Path | None = typer.Option(
        None, "--export", help="Write the page as static files into this folder (no server; open its index.html)."
    ),
    judge: str | None = typer.Option(
        None, "--judge", help="Judge whose labels decide outcomes (default: metrics.json's judge, else rule)."
    ),
    forecasts: list[Path] = typer.Option([], "--forecasts", help="Forecasts files to show per state (value's format)."),
    no_token: bool = typer.Option(
        False,
        "--no-token",
        help="Serve without the per-start token in the URL (any local program can then read the run).",
    ),
) -> None:
    """Look at a run: executions table, timelines with checkpoints, fork trees (127.0.0.1 only).

    Reads the traces only (never the checkpoint database). The URL it prints carries a random
    token made at each start (as Jupyter's does); requests without it, and requests whose Host is
    not a loopback name (another site's page), are refused. Ctrl-C stops the server.

    Example: branchpoint view runs/quickstart --port 8765
    Example: branchpoint view runs/fork_study --export viewer/fork_study
    """
    from branchpoint.evaluation.viewer import RunIndex, ViewerState, bind, make_server, url_of
    from branchpoint.evaluation.viewer.export import export_run
    from branchpoint.loopback import new_token

    index = RunIndex.open(run_dir, judge=judge)
    state = ViewerState(index, list(forecasts))
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
        index.start()
        token = None if no_token else new_token()
        console.print(
            f"[bold green]viewing[/] {run_dir} at {url_of(sock, token)} (127.0.0.1 only); Ctrl-C stops it.",
            soft_wrap=True,
            highlight=False,
        )
        make_server(state, token=token).run(sockets=[sock])
    finally:
        sock.close()
