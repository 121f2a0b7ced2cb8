"""`branchpoint export inspect`: branchpoint traces written in other frameworks' log formats."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import console, friendly_errors

export_app = typer.Typer(
    help="Write branchpoint traces in other frameworks' log formats.\n\n"
    "Example: branchpoint export inspect runs/quickstart --out inspect-logs && inspect view --log-dir inspect-logs",
    no_args_is_help=True,
)


@export_app.command("inspect")
@friendly_errors
def export_inspect_logs(
    run: Path = typer.Argument(
        ..., help="A run folder (its judged.jsonl when evaluated, else executions.jsonl) or a traces .jsonl file."
    ),
    out: Path = typer.Option(
        ..., "--out", help="The folder to write the inspect_ai logs into (one .eval per condition)."
    ),
) -> None:
    """Write a run as inspect_ai eval logs, for `inspect view` and `inspect_ai.log.read_eval_log`
    (needs inspect_ai: pip install inspect_ai==0.3.285).

    One log per condition: a sample per execution (question id, epoch = repeat + 1) with its
    messages, model and tool events, token usage, and one score per judge (C / I / N).

    Example: branchpoint evaluate runs/quickstart && branchpoint export inspect runs/quickstart --out inspect-logs && inspect view --log-dir inspect-logs
    """
    from branchpoint.importers.inspect_export import export_inspect

    written = export_inspect(run, out)
    console.print(f"wrote {len(written)} inspect_ai logs to {out}", soft_wrap=True, highlight=False)
    for path in written:
        console.print(f"  {path.name}", soft_wrap=True, highlight=False)
