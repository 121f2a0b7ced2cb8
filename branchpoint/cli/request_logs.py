"""`branchpoint requests rebuild`: a run's requests rebuilt from its checkpoints, for the viewer."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import console, friendly_errors

requests_app = typer.Typer(
    help="The requests a run sent to its model.\n\nExample: branchpoint requests rebuild runs/quickstart",
    no_args_is_help=True,
)


@requests_app.command("rebuild")
@friendly_errors
def requests_rebuild(
    run_dir: Path = typer.Argument(..., help="A run directory with its checkpoints (from `branchpoint run`)."),
    execution: list[str] = typer.Option([], "--execution", help="Rebuild only executions with this id prefix."),
    include_logged: bool = typer.Option(
        False, "--include-logged", help="Also rebuild executions whose requests are in requests.jsonl."
    ),
    server_kind: str | None = typer.Option(
        None,
        "--server-kind",
        help="vllm, llamacpp or other: the server the run talked to, where its spec and provenance do not say.",
    ),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
) -> None:
    """Rebuild each model request of a run made without --log-requests from its checkpoints,
    into RUN_DIR/requests.rebuilt.jsonl (the --log-requests format, each line marked rebuilt),
    which `branchpoint view` shows as "rebuilt from checkpoint".

    The run's own policy builds each request again from the saved state, through the run's own
    model client, answered with the recorded replies: nothing is sent to a model server. Each
    execution whose rebuilt bodies hash to the fingerprint its record kept of what was sent is
    counted as verified.

    Example: branchpoint requests rebuild runs/quickstart
    """
    from branchpoint.errors import InputError
    from branchpoint.experiments.request_rebuild import rebuild_requests

    if server_kind is not None and server_kind not in ("vllm", "llamacpp", "other"):
        raise InputError(f"--server-kind {server_kind!r}: expected vllm, llamacpp or other")
    summary = rebuild_requests(
        run_dir,
        checkpoints=checkpoints,
        executions=execution or None,
        include_logged=include_logged,
        server_kind=server_kind,
    )
    print_rebuild(summary)


def print_rebuild(summary: object) -> None:
    """One line for a rebuild, then one per execution it could not rebuild or verify."""
    from branchpoint.experiments.request_rebuild import RebuildSummary

    assert isinstance(summary, RebuildSummary)
    skipped = [
        f"{n} {what}"
        for n, what in (
            (summary.logged, "with requests.jsonl lines"),
            (summary.incomplete, "incomplete"),
            (len(summary.failed), "not rebuilt"),
        )
        if n
    ]
    console.print(
        f"rebuilt {summary.requests} requests of {summary.executions} executions into {summary.out} "
        f"({summary.verified} verified against the recorded request fingerprint"
        + (f"; skipped: {', '.join(skipped)}" if skipped else "")
        + ")",
        soft_wrap=True,
        highlight=False,
    )
    for eid in summary.unverified:
        console.print(f"  {eid}: rebuilt, but differs from the fingerprint of what was sent", highlight=False)
    for eid, why in summary.failed.items():
        console.print(f"  {eid}: not rebuilt: {why}", highlight=False, soft_wrap=True)
