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
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Run every missing execution of a spec; rerunning a finished spec makes no model call.

    Example: branchpoint run experiments/quickstart.yaml --out runs/quickstart
    """
    from branchpoint.experiments.runner import run_experiment
    from branchpoint.experiments.spec import load_spec

    loaded = load_spec(spec)
    run_dir = out or Path("runs") / loaded.name
    summary = run_experiment(loaded, run_dir, progress=not no_progress, checkpoints=checkpoints)
    _print_summary(summary)
    if loaded.fork is not None:
        from branchpoint.experiments.forking import fork_run

        _print_fork_summary(fork_run(run_dir, loaded.fork, progress=not no_progress, checkpoints=checkpoints))


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


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@app.command()
@friendly_errors
def fork(
    run_dir: Path = typer.Argument(..., help="A run directory (from `branchpoint run`)."),
    boundaries: str = typer.Option(
        "initial,after_search_k,pending_query", "--boundaries", help="Boundary kinds to fork from."
    ),
    actions: str = typer.Option("THINK,SEARCH", "--actions", help="THINK, SEARCH, STOP, SWITCH (comma-separated)."),
    repeats: int = typer.Option(4, "--repeats", min=1, help="Executions per branch."),
    search_budget: int = typer.Option(3, "--search-budget", min=1, help="K: most searches a SEARCH/SWITCH branch adds."),
    switch_source: str | None = typer.Option(None, "--switch-source", help="Source SWITCH runs the pending query on."),
    execution: list[str] = typer.Option([], "--execution", help="Only these execution ids (prefixes); repeatable."),
    minimal_search: bool = typer.Option(
        False, "--minimal-search", help="Also find each correct execution's minimal searches (THINK forks)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Branches run at once."),
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Fork saved states into THINK / SEARCH / STOP / SWITCH continuations (RUN_DIR/forks.jsonl).

    Example: branchpoint fork runs/fork-study --actions THINK,SEARCH,STOP,SWITCH --repeats 4
    --switch-source demo_chunks --minimal-search
    """
    from branchpoint.experiments.forking import ForkPlan, fork_run

    plan = ForkPlan(
        boundaries=_csv(boundaries), actions=[a.upper() for a in _csv(actions)], repeats=repeats,
        search_budget=search_budget, switch_source=switch_source, executions=execution or None,
        minimal_search=minimal_search, concurrency=concurrency,
    )  # fmt: skip
    _print_fork_summary(fork_run(run_dir, plan, progress=not no_progress, checkpoints=checkpoints))


def _print_fork_summary(summary: Any) -> None:
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(summary.statuses.items())) or "none run"
    console.print(
        f"[bold]{summary.run_dir / 'forks.jsonl'}[/]: {summary.planned} branches planned, "
        f"{summary.skipped_done} already recorded, {summary.ran} run ({statuses}) in {summary.wall_s:.1f} s",
        soft_wrap=True,
    )
    if summary.illegal_skipped:
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(summary.illegal_skipped.items()))
        console.print(f"skipped actions illegal at their boundary: {skipped}", soft_wrap=True)
    if summary.minimal:
        pct = summary.over_search_pct
        console.print(
            f"minimal searches for {len(summary.minimal)} correct executions "
            f"(RUN_DIR/minimal_search.jsonl); over-search = {pct:.1f}%", soft_wrap=True,
        )


@checkpoints_app.command("ls")
@friendly_errors
def checkpoints_ls(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    execution: str | None = typer.Option(None, "--execution", help="Only this execution id."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
) -> None:
    """List the checkpoints at legal action boundaries of a run's executions.

    Example: branchpoint checkpoints ls runs/quickstart --execution 3f2a...
    """
    from rich.table import Table

    from branchpoint.checkpoints.listing import run_boundaries

    rows = run_boundaries(run_dir, execution, checkpoints)
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
