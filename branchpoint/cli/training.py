"""`branchpoint training-boundary`: the search boundary over RL training steps, from rollouts."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import app, console, friendly_errors
from branchpoint.defaults import DEFAULT_LAMBDA, DEFAULT_MU

#: What the command writes in its output folder.
BOUNDARY_FILE = "training_boundary.json"


@app.command("training-boundary")
@friendly_errors
def training_boundary_command(
    traces: list[Path] = typer.Argument(
        ..., help="Trace files of imported rollouts (`import rollouts`), any number of steps."
    ),
    out: Path = typer.Option(
        ..., "--out", help="Folder for training_boundary.json and figures/training_boundary.{png,svg,csv}."
    ),
    judge: str = typer.Option(
        "given",
        "--judge",
        help="given (the rollouts' rewards, as imported), rule (re-judged against the gold answers), or another judge taking no settings.",
    ),
    lam: float | None = typer.Option(
        None, "--lam", help=f"TPC weight of input tokens (λ). Default: {DEFAULT_LAMBDA:g}."
    ),
    mu: float | None = typer.Option(None, "--mu", help=f"TPC weight of a search call (μ). Default: {DEFAULT_MU:g}."),
    bootstrap: int = typer.Option(1000, "--bootstrap", min=0, help="Question resamples per step (0: no intervals)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
) -> None:
    """Per training step: share of questions answerable without search, redundant-search share and TPC, with intervals.

    Without forks, "answerable without search" is what the step's own rollouts show: a question
    counts when one of its rollouts answered correctly with no search (a lower bound); a search
    is redundant when its question counts so at that step. Intervals resample questions.

    Example: branchpoint training-boundary runs/rl/executions.jsonl --out runs/rl/boundary
    """
    from rich.table import Table

    from branchpoint.evaluation.cost import MetricsConfig
    from branchpoint.evaluation.judges import judge_records
    from branchpoint.evaluation.training_boundary import training_boundary
    from branchpoint.evaluation.training_figure import report_json, write_training_figure
    from branchpoint.traces import FIGURES_DIR, read_records, write_files_atomically

    records = [r for path in traces for r in read_records(path)]
    judged = judge_records(records, judge)
    weights = {k: v for k, v in {"lam": lam, "mu": mu}.items() if v is not None}  # None: MetricsConfig's default
    cfg = MetricsConfig(**weights, bootstrap=bootstrap, seed=seed)
    report = training_boundary(judged, judge, cfg)
    write_files_atomically({out / BOUNDARY_FILE: report_json(report)})
    figure = write_training_figure(report, out / FIGURES_DIR)

    def cell(value: float | None, ci: list[float] | None, pct: bool) -> str:
        if value is None:
            return "–"
        v = float(value)
        text = f"{100 * v:.1f}" if pct else ("inf" if v == float("inf") else f"{v:.0f}")
        if ci:
            lo, hi = (float(c) for c in ci)
            text += f" [{100 * lo:.1f}, {100 * hi:.1f}]" if pct else f" [{lo:.0f}, {hi:.0f}]"
        return text

    table = Table(title=f"The search boundary over training (judge {judge})")
    for name in (
        "step",
        "questions",
        "rollouts",
        "answerable w/o search %",
        "redundant searches %",
        "search rate %",
        "accuracy %",
        "TPC",
    ):
        table.add_column(name)
    for s in report["steps"]:
        table.add_row(
            str(s["step"]),
            str(s["questions"]),
            str(s["rollouts"]),
            cell(s["answerable_without_search"], s["answerable_without_search_ci"], True),
            cell(s["redundant_search_share"], s["redundant_search_share_ci"], True),
            cell(s["search_rate"], s["search_rate_ci"], True),
            cell(s["accuracy"], s["accuracy_ci"], True),
            cell(s["tpc"], s["tpc_ci"], False),
        )
    console.print(table)
    if report["no_step"]:
        console.print(f"{report['no_step']} records have no training step and were left out (import with --step)")
    console.print(
        f"wrote {out / BOUNDARY_FILE}" + (f" and {figure}" if figure else ""), soft_wrap=True, highlight=False
    )
