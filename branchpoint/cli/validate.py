"""`branchpoint validate`: whole studies on the simulated model, checked against the known truth."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import app, console, friendly_errors


@app.command()
@friendly_errors
def validate(
    out: Path = typer.Option(..., "--out", help="Folder for validation.json (and the studies' runs with --keep-runs)."),
    quick: bool = typer.Option(False, "--quick", help="A few small studies (under 2 minutes)."),
    profile: str = typer.Option("instruct", "--profile", help="Simulator profile: a built-in name or a YAML file."),
    policy: str = typer.Option("constrained", "--policy", help="A registered policy or package.module:function."),
    studies: int | None = typer.Option(None, "--studies", min=1, help="Number of studies (default: 3 quick, 40 full)."),
    seed: int = typer.Option(1, "--seed", help="Seed of the first study (study i uses seed + i)."),
    reasoning_effort: str | None = typer.Option(
        None, "--reasoning-effort", help="low | medium | high (chat policies)."
    ),
    keep_runs: bool = typer.Option(False, "--keep-runs", help="Keep each study's run folder under OUT/runs."),
    mutants: bool = typer.Option(
        False, "--mutants", help="Also evaluate every study with each planted bug; each must fail a check."
    ),
    mutant: list[str] | None = typer.Option(
        None, "--mutant", help="Plant only this mutant (repeatable; implies --mutants). Names: docs/validate.md."
    ),
) -> None:
    """Run whole studies on the simulated model and check every estimate against the known truth.

    Exits with code 1 when a check fails (or, with --mutants, when a planted bug passes every
    check). Example: branchpoint validate --quick --mutants --out val/
    """
    from branchpoint.errors import InputError
    from branchpoint.validation import format_table, mutants_table
    from branchpoint.validation import validate as run_validation
    from branchpoint.validation.mutants import mutant_named

    if reasoning_effort not in (None, "low", "medium", "high"):
        raise InputError(f"--reasoning-effort: expected low, medium or high, got {reasoning_effort!r}")
    for name in mutant or []:
        mutant_named(name)  # unknown: fail before any work
    report = run_validation(
        out,
        profile=profile,
        policy=policy,
        quick=quick,
        studies=studies,
        seed=seed,
        reasoning_effort=reasoning_effort,
        keep_runs=keep_runs,
        mutants=list(mutant) if mutant else mutants,
    )
    console.print(format_table(report))
    failed = [c for c in report["checks"] if not c["passed"]]
    verdict = "[bold green]all checks passed[/]" if not failed else f"[bold red]{len(failed)} check(s) failed[/]"
    if report["mutants"]:
        console.print(mutants_table(report))
        missed = [m["name"] for m in report["mutants"] if not m["caught"]]
        verdict += (
            f"; [bold green]every mutant caught[/] ({len(report['mutants'])})"
            if not missed
            else f"; [bold red]mutants no check caught: {', '.join(missed)}[/]"
        )
    console.print(f"{verdict}; {out / 'validation.json'} ({report['wall_s']:.0f} s)")
    if not report["passed"]:
        raise typer.Exit(code=1)
