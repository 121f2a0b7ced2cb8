"""`branchpoint export inspect` and `export labels`: traces in other frameworks' log formats, and
a fork study's step labels as a training data set."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import FORK_SETTINGS_HELP, MIX_FORK_SETTINGS_HELP, console, friendly_errors
from branchpoint.defaults import DEFAULT_JUDGE

export_app = typer.Typer(
    help="Write branchpoint traces in other frameworks' log formats, and step labels for training.\n\n"
    "Example: branchpoint export inspect runs/quickstart --out inspect-logs && inspect view --log-dir inspect-logs\n\n"
    "Example: branchpoint export labels runs/fork-study --out labels.parquet",
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


@export_app.command("labels")
@friendly_errors
def export_labels(
    ctx: typer.Context,
    run: Path = typer.Argument(..., help="A fork study's run folder (or its forks.jsonl)."),
    out: Path = typer.Option(
        ..., "--out", help="FILE.parquet (or FILE.jsonl, or FILE): writes FILE.parquet, FILE.jsonl and FILE.meta.json."
    ),
    judge: str = typer.Option(DEFAULT_JUDGE, "--judge", help="rule (offline default) or given (labels in the traces)."),
    reward: str = typer.Option(
        "correct", "--reward", help="correct (0/1), set_f1 (collection answers), or a registered reward."
    ),
    pending_roles: str = typer.Option("STOP,SEARCH", "--pending-roles", help="T and S roles at pending_query."),
    level: float = typer.Option(0.95, "--level", help="Confidence level of the intervals of p and of the gain."),
    fork_settings: str | None = typer.Option(None, "--fork-settings", help=FORK_SETTINGS_HELP),
    mix_fork_settings: bool = typer.Option(False, "--mix-fork-settings", help=MIX_FORK_SETTINGS_HELP),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        help="Where the run's checkpoints live, when not its checkpoints.sqlite (a postgresql:// URL).",
    ),
) -> None:
    """Write a fork study's step labels, one row per scored state: the question, the prefix in
    the model's message format (the request the run's policy sends to decide there), the action
    the policy took, p̂ of THINK and SEARCH, the gain Δ̂ with its interval, the repeats, and
    whether search was needed, redundant or missing there (docs/training.md defines each).

    Settings start from the run's spec.yaml `value` section (judge, reward, roles, level), as
    for `branchpoint value`; the states are the ones `value` scores.

    Example: branchpoint export labels runs/fork-study --out labels.parquet
    """
    from pydantic import ValidationError

    from branchpoint.cli.common import csv_list
    from branchpoint.cli.study_options import given_settings
    from branchpoint.errors import InputError
    from branchpoint.evaluation.value import ValueConfig
    from branchpoint.experiments.label_files import write_label_files
    from branchpoint.experiments.step_labels import label_rows
    from branchpoint.experiments.study_settings import value_settings
    from branchpoint.provenance import collect, dump_block
    from branchpoint.traces import describe_validation_error

    cli = given_settings(
        ctx,
        {
            "judge": ("judge", judge),
            "reward": ("reward", reward),
            "pending_roles": ("pending_roles", [a.upper() for a in csv_list(pending_roles)]),
            "level": ("level", level),
            "fork_settings": ("fork_settings", fork_settings),
            "mix_fork_settings": ("mix_fork_settings", mix_fork_settings),
        },
    )
    settings = value_settings(run, cli)
    try:
        config = ValueConfig.model_validate(settings.values)
    except ValidationError as exc:
        raise InputError(f"label settings: {describe_validation_error(exc)}") from None
    rows = label_rows(run, config, checkpoints)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["label"]] = counts.get(row["label"], 0) + 1
    metadata = {
        "source": str(run),
        "states": len(rows),
        "labels": counts,
        "settings": {k: settings.values[k] for k in ("judge", "reward", "pending_roles", "level")} | settings.source(),
        "provenance": dump_block(collect("export labels")),
    }
    written = write_label_files(rows, out, metadata)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
    console.print(f"{len(rows)} states labelled ({summary})", soft_wrap=True, highlight=False)
    for path in written:
        console.print(f"  wrote {path}", soft_wrap=True, highlight=False)
