"""`branchpoint runs verify`, `runs repair` and `runs show`: check a run directory, move its
damaged trace lines aside, and say what it holds and where each part came from."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from branchpoint.cli.common import console, friendly_errors

runs_app = typer.Typer(
    help="Check, repair and show run directories.\n\n"
    "Example: branchpoint runs verify runs/quickstart; branchpoint runs show runs/quickstart",
    no_args_is_help=True,
)


@runs_app.command("verify")
@friendly_errors
def runs_verify(
    run_dir: Path = typer.Argument(..., help="A run directory (from `branchpoint run`)."),
    sample: int = typer.Option(
        20,
        "--sample",
        min=0,
        help="Executions per trace file whose checkpoints are listed, and cache entries decoded (0: all).",
    ),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as one JSON object."),
) -> None:
    """Check a run directory's integrity (read-only): schema of every trace line, duplicates,
    orphans, executions the spec plans but that are missing, checkpoints and retrieval cache.

    Exit code 0: no problems; 1: problems (each listed); 2: not a run directory.

    Example: branchpoint runs verify runs/quickstart --sample 0
    """
    from branchpoint.experiments.verify import print_verification, verify_run

    report = verify_run(run_dir, sample=sample, checkpoints=checkpoints)
    if as_json:
        typer.echo(json.dumps(report.to_json()))
    else:
        print_verification(report, console)
    if not report.ok:
        raise typer.Exit(code=1)


@runs_app.command("repair")
@friendly_errors
def runs_repair(
    run_dir: Path = typer.Argument(..., help="A run directory whose trace files hold damaged lines."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list the damaged lines; move nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print what was found (and moved) as one JSON object."),
) -> None:
    """Move the damaged lines of a run's trace files into RUN_DIR/quarantine.jsonl, byte for byte.

    A damaged line (not JSON, a failed checksum, not a record, a torn last line, a record whose
    passage is lost) makes run, fork and evaluate refuse the folder; after the repair they read
    it, and the next run (or fork) redoes the executions those lines held. Takes the run lock.

    Exit code 0: repaired, or nothing to repair; 2: not a run directory, or in use.

    Example: branchpoint runs repair runs/quickstart --dry-run
    """
    from rich.markup import escape

    from branchpoint.experiments.repair import repair_run
    from branchpoint.traces import QUARANTINE_FILE

    found = repair_run(run_dir, dry_run=dry_run)
    if as_json:
        typer.echo(json.dumps(found.to_json()))
        return
    if not found.damaged:
        counted = ", ".join(f"{name} {n} lines" for name, n in found.lines.items())
        console.print(f"[bold green]nothing to repair[/] in {escape(str(run_dir))} ({escape(counted)})", soft_wrap=True)
        return
    verb = "would move" if dry_run else "moved"
    for d in found.damaged[:50]:
        console.print(f"  {escape(d.file)} line {d.line} ({d.size} bytes): {escape(d.reason)}", soft_wrap=True)
    if len(found.damaged) > 50:
        console.print(f"  … and {len(found.damaged) - 50} more")
    by_file = ", ".join(
        f"{sum(1 for d in found.damaged if d.file == name)} of {name}"
        for name in found.lines
        if any(d.file == name for d in found.damaged)
    )
    console.print(
        f"[bold]{verb} {len(found.damaged)} damaged lines[/] ({escape(by_file)}) to "
        f"{escape(str(run_dir / QUARANTINE_FILE))}"
        + ("" if dry_run else "; the next run (or fork) redoes the executions they held"),
        soft_wrap=True,
    )


@runs_app.command("show")
@friendly_errors
def runs_show(
    run_dir: Path = typer.Argument(..., help="A run directory (or a folder of `validate`'s output)."),
    as_json: bool = typer.Option(False, "--json", help="Print the overview as one JSON object."),
) -> None:
    """Show a run: its spec, its trace files (records per invocation), and the provenance of each
    invocation (run, fork, replay, import) and of metrics.json, agreement.json, value.json and
    validation.json: branchpoint version and git revision, Python, platform, package versions,
    model servers, the components used (module, package, version) and the command line.

    Example: branchpoint runs show runs/quickstart
    """
    from branchpoint.cli.run_show import print_overview
    from branchpoint.experiments.run_overview import run_overview

    overview = run_overview(run_dir)
    if as_json:
        typer.echo(json.dumps(overview.to_json()))
    else:
        print_overview(overview, console)
