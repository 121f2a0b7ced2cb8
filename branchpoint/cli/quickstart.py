"""`branchpoint quickstart`: run, evaluate and report the quickstart spec in one command."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import (
    SAMPLE_HELP,
    SET_HELP,
    app,
    console,
    friendly_errors,
    load_spec_with,
    print_summary,
)
from branchpoint.traces import FIGURES_DIR, METRICS_FILE


def packaged_quickstart_spec() -> Path:
    """The quickstart spec shipped in the package (identical to experiments/quickstart.yaml, which
    users copy), so `branchpoint quickstart` needs no checkout."""
    from importlib.resources import files

    return Path(str(files("branchpoint") / "data" / "specs" / "quickstart.yaml"))


@app.command()
@friendly_errors
def quickstart(
    spec: Path | None = typer.Option(
        None,
        "--spec",
        help="The quickstart spec (default: the packaged copy of experiments/quickstart.yaml, so the command "
        "runs from any folder).",
    ),
    out: Path = typer.Option(Path("runs/quickstart"), "--out", help="Run directory."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    sample: str | None = typer.Option(None, "--sample", help=SAMPLE_HELP),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only N questions (balance kept)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Run the quickstart spec with and without search, evaluate, print the table, write report.md
    and its figures.

    Example: branchpoint quickstart

    Example: branchpoint quickstart --sample 3,3 --set agent.search_cap=1 --out runs/quick-small
    """
    from branchpoint.evaluation import MetricsConfig, comparison_table
    from branchpoint.evaluation import evaluate as run_evaluation
    from branchpoint.evaluation.report import write_report
    from branchpoint.experiments.runner import run_experiment

    loaded = load_spec_with(spec or packaged_quickstart_spec(), set_, sample, limit)
    summary = run_experiment(loaded, out, progress=not no_progress)
    print_summary(summary)
    cfg = MetricsConfig(lam=loaded.evaluation.lam, mu=loaded.evaluation.mu)
    metrics = run_evaluation(out, judge=loaded.evaluation.open_judge(out), cfg=cfg)
    console.print(comparison_table(metrics))
    report_path, _ = write_report(out, title=f"branchpoint quickstart: {loaded.name}")
    console.print(f"wrote {out / METRICS_FILE}, {report_path} and {out / FIGURES_DIR}")
