"""The `branchpoint` command line (typer + rich). Bad input prints one clear line and exits 2."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from branchpoint.errors import BranchpointError
from branchpoint.traces import TraceError

app = typer.Typer(
    help="Experiments on search-augmented LLM agents: when should an agent search?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
checkpoints_app = typer.Typer(help="Inspect saved agent states (legal action boundaries).", no_args_is_help=True)
app.add_typer(checkpoints_app, name="checkpoints")

console = Console()
if not console.is_terminal:  # logs and pipes: wide enough that tables are not squeezed to 80
    console = Console(width=max(console.width, 120))
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(fn: F) -> F:
    """Print input and server errors as one red line and exit with code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (BranchpointError, TraceError) as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


def _print_summary(summary: Any) -> None:
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(summary.statuses.items())) or "none run"
    console.print(
        f"[bold]{summary.run_dir}[/]: {summary.planned} planned, {summary.skipped} already recorded, "
        f"{summary.ran} run ({statuses}) in {summary.wall_s:.1f} s",
        soft_wrap=True,
    )


@app.command()
@friendly_errors
def run(
    spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
    out: Path | None = typer.Option(None, "--out", help="Run directory (default: runs/<spec name>)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Run every missing execution of a spec; rerunning a finished spec makes no model call.

    Example: branchpoint run experiments/quickstart.yaml --out runs/quickstart
    """
    from branchpoint.experiments.runner import run_experiment
    from branchpoint.experiments.spec import load_spec

    loaded = load_spec(spec)
    summary = run_experiment(loaded, out or Path("runs") / loaded.name, progress=not no_progress)
    _print_summary(summary)


@app.command()
@friendly_errors
def evaluate(
    path: Path = typer.Argument(..., help="A run directory or a .jsonl trace file."),
    judge: str = typer.Option("rule", "--judge", help="rule (offline default) or given (labels in the traces)."),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: beside the traces)."),
    lam: float = typer.Option(0.25, "--lam", help="TPC weight of input tokens (λ)."),
    mu: float = typer.Option(500.0, "--mu", help="TPC weight of a search call (μ)."),
) -> None:
    """Judge traces and write metrics.json (and judged.jsonl); prints the comparison table.

    Example: branchpoint evaluate runs/quickstart --judge rule
    """
    from branchpoint.evaluation import MetricsConfig, comparison_table
    from branchpoint.evaluation import evaluate as run_evaluation

    metrics = run_evaluation(path, judge=judge, out_dir=out, cfg=MetricsConfig(lam=lam, mu=mu))
    console.print(comparison_table(metrics))
    target = out or (path if path.is_dir() else path.parent)
    console.print(f"wrote {target / 'metrics.json'}")


@app.command()
@friendly_errors
def quickstart(
    spec: Path = typer.Option(Path("experiments/quickstart.yaml"), "--spec", help="The quickstart spec."),
    out: Path = typer.Option(Path("runs/quickstart"), "--out", help="Run directory."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Run the quickstart spec with and without search, evaluate, print the table, write report.md.

    Example: branchpoint quickstart
    """
    from branchpoint.evaluation import MetricsConfig, comparison_table, markdown_report
    from branchpoint.evaluation import evaluate as run_evaluation
    from branchpoint.experiments.runner import run_experiment
    from branchpoint.experiments.spec import load_spec

    loaded = load_spec(spec)
    summary = run_experiment(loaded, out, progress=not no_progress)
    _print_summary(summary)
    cfg = MetricsConfig(lam=loaded.evaluation.lam, mu=loaded.evaluation.mu)
    metrics = run_evaluation(out, judge=loaded.evaluation.judge, cfg=cfg)
    console.print(comparison_table(metrics))
    report = out / "report.md"
    report.write_text(markdown_report(metrics, title=f"branchpoint quickstart: {loaded.name}"), encoding="utf-8")
    console.print(f"wrote {out / 'metrics.json'} and {report}")


@checkpoints_app.command("ls")
@friendly_errors
def checkpoints_ls(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    execution: str | None = typer.Option(None, "--execution", help="Only this execution id."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """List the checkpoints at legal action boundaries of a run's executions.

    Example: branchpoint checkpoints ls runs/quickstart --execution 3f2a...
    """
    from rich.table import Table

    from branchpoint.checkpoints.listing import run_boundaries

    rows = run_boundaries(run_dir, execution)
    if as_json:
        for eid, b in rows:
            typer.echo(json.dumps({"execution_id": eid, **b.model_dump()}))
        return
    table = Table("execution", "step", "boundary", "searches", "pending query", "tokens in/out", "checkpoint")
    for eid, b in rows:
        table.add_row(
            eid[:12], str(b.step), b.boundary, str(b.searches), b.pending_query or "",
            f"{b.input_tokens}/{b.output_tokens}", b.checkpoint_id,
        )  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    app()
