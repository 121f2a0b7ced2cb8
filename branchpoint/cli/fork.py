"""`branchpoint fork`, `replay` and `checkpoints ls`: saved states and their continuations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from branchpoint.cli.common import (
    CACHE_HELP,
    NO_CACHE_HELP,
    app,
    cache_override,
    console,
    csv_list,
    exit_if_incomplete,
    friendly_errors,
    print_cache_line,
    sample_counts,
)
from branchpoint.defaults import FORK_TEMPERATURE, FORK_TOP_P
from branchpoint.traces import FORKS_FILE, REPLAYS_FILE

checkpoints_app = typer.Typer(
    help="Inspect saved agent states (legal action boundaries).\n\nExample: branchpoint checkpoints ls runs/quickstart",
    no_args_is_help=True,
)


def _sampling_options(
    temperature: float, top_p: float, seed: int, allow_identical_repeats: bool, concurrency: int
) -> dict[str, tuple[str, Any]]:
    """The sampling options fork and replay share, as (fork-plan field, value) by option name."""
    return {
        "temperature": ("temperature", temperature),
        "top_p": ("top_p", top_p),
        "seed": ("seed", seed),
        "allow_identical_repeats": ("allow_identical_repeats", allow_identical_repeats),
        "concurrency": ("concurrency", concurrency),
    }


TEMPERATURE_HELP = "Sampling temperature of every branch (repeats are independent draws)."
TOP_P_HELP = "Nucleus sampling of every branch."
SEED_HELP = (
    "Base of the per-branch seeds (each branch records its own); another base draws new branches of the "
    "same fork settings beside the recorded ones."
)
IDENTICAL_HELP = "Allow --repeats > 1 at --temperature 0 (copies of one draw)."
LOG_REQUESTS_HELP = (
    "Append every request body sent to the model to RUN_DIR/requests.jsonl (the HTTP body as sent, "
    "LangChain models' included; a model with no HTTP client: its call)."
)


@app.command()
@friendly_errors
def fork(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="A run directory (from `branchpoint run`); its spec.yaml is read first."),
    boundaries: str = typer.Option(
        "initial,after_search_k,pending_query", "--boundaries", help="Boundary kinds to fork from."
    ),
    actions: str = typer.Option("THINK,SEARCH", "--actions", help="THINK, SEARCH, STOP, SWITCH (comma-separated)."),
    repeats: int = typer.Option(4, "--repeats", min=1, help="Executions per branch."),
    search_budget: int = typer.Option(
        3, "--search-budget", min=1, help="K: most searches a SEARCH/SWITCH branch adds."
    ),
    switch_source: str | None = typer.Option(None, "--switch-source", help="Source SWITCH runs the pending query on."),
    execution: list[str] = typer.Option(
        [], "--execution", help="Only these execution ids (prefixes; a fork branch's id forks it again); repeatable."
    ),
    checkpoint: list[str] = typer.Option(
        [],
        "--checkpoint",
        help="Fork only these saved states, by checkpoint id (or a unique start or end of it); repeatable.",
    ),
    minimal_search: bool = typer.Option(
        False, "--minimal-search", help="Also find each correct execution's minimal searches (THINK forks)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Branches run at once."),
    temperature: float = typer.Option(FORK_TEMPERATURE, "--temperature", min=0.0, help=TEMPERATURE_HELP),
    top_p: float = typer.Option(FORK_TOP_P, "--top-p", min=0.0, max=1.0, help=TOP_P_HELP),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    allow_identical_repeats: bool = typer.Option(False, "--allow-identical-repeats", help=IDENTICAL_HELP),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    log_requests: bool = typer.Option(False, "--log-requests", help=LOG_REQUESTS_HELP),
    executor: str = typer.Option(
        "local", "--executor", help="local (this process) or ray (one Ray task per branch condition)."
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="--executor ray: cluster to join, e.g. auto or HOST:6379 (default: start a local one).",
    ),
    processes: int = typer.Option(
        1,
        "--processes",
        min=1,
        help="--executor local: split the branches over N processes sharing the model server "
        "(model.provider openai); --concurrency is the total.",
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Override a fork-plan setting: KEY=VALUE with a YAML value (search_budget=2, "
        "boundaries='\\[initial]'); repeatable, applied after the other options.",
    ),
    sample: str | None = typer.Option(
        None,
        "--sample",
        help="A,U: fork only the executions of a balanced seeded sample of A answerable and U "
        "unanswerable questions of the run.",
    ),
    cache: Path | None = typer.Option(None, "--cache", help=CACHE_HELP),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Fork saved states into THINK / SEARCH / STOP / SWITCH continuations (RUN_DIR/forks.jsonl).

    The run's spec.yaml `fork:` section gives the plan's defaults; options given here (and
    --set) override it. Each invocation's plan, and which settings came from the spec and which
    from the command line, is appended to RUN_DIR/fork_settings.jsonl. Branches sample (default
    temperature 0.6, top-p 0.95) with one recorded seed per repeat.

    Exit code 0: every planned branch is recorded; 3: some are incomplete (run the same command
    again); 2: bad input, or the run folder is in use by another writer.

    Example: branchpoint fork runs/fork-study --actions THINK,SEARCH,STOP,SWITCH --repeats 4
    --switch-source demo_chunks --minimal-search

    Example: branchpoint fork runs/fork-study --checkpoint 1f0c2a --actions THINK,SEARCH --repeats 8

    Example: branchpoint fork runs/quickstart --sample 2,2 --repeats 2 --set search_budget=1

    Example: branchpoint fork runs/vllm-study --repeats 8 --concurrency 256 --processes 4
    """
    from branchpoint.cli.study_options import given_settings
    from branchpoint.experiments.fork_options import fork_plan_from_options, record_fork_settings
    from branchpoint.experiments.forking import fork_run

    given = given_settings(
        ctx,
        {
            "boundaries": ("boundaries", csv_list(boundaries)),
            "actions": ("actions", [a.upper() for a in csv_list(actions)]),
            "repeats": ("repeats", repeats),
            "search_budget": ("search_budget", search_budget),
            "switch_source": ("switch_source", switch_source),
            "execution": ("executions", execution or None),
            "checkpoint": ("checkpoints", checkpoint or None),
            "minimal_search": ("minimal_search", minimal_search),
            **_sampling_options(temperature, top_p, seed, allow_identical_repeats, concurrency),
        },
    )
    counts = sample_counts(sample) if sample is not None else None
    plan, settings = fork_plan_from_options(run_dir, given, set_, counts)
    summary = fork_run(
        run_dir,
        plan,
        progress=not no_progress,
        checkpoints=checkpoints,
        log_requests=log_requests,
        executor=executor,
        ray_address=ray_address,
        processes=processes,
        response_cache=cache_override(cache, no_cache),
    )
    record_fork_settings(run_dir, "fork", plan, settings, summary)
    console.print(settings.describe(), soft_wrap=True, highlight=False)
    print_fork_summary(summary)
    exit_if_incomplete(summary.statuses.get("incomplete", 0), "branches", None, checkpoints)


def print_fork_summary(summary: Any, file: str = FORKS_FILE, what: str = "branches") -> None:
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(summary.statuses.items())) or "none run"
    console.print(
        f"[bold]{summary.run_dir / file}[/]: {summary.planned} {what} planned, "
        f"{summary.skipped_done} already recorded, {summary.ran} run ({statuses}) in {summary.wall_s:.1f} s",
        soft_wrap=True,
    )
    print_cache_line(summary)
    if summary.planned and summary.skipped_done == summary.planned:
        console.print(
            f"nothing drawn: all {summary.planned} planned {what} are recorded already, drawn with --seed "
            f"{summary.seed}; for more draws raise --repeats (above {summary.repeats}) or pass another --seed "
            "(new draws of the same fork settings, pooled with these by `value`)",
            soft_wrap=True,
        )
    illegal = {k: v for k, v in summary.illegal_skipped.items() if not k.endswith("@no-search")}
    no_search = {k: v for k, v in summary.illegal_skipped.items() if k.endswith("@no-search")}
    if illegal:
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(illegal.items()))
        console.print(f"skipped actions illegal at their boundary: {skipped}", soft_wrap=True)
    if no_search:
        skipped = ", ".join(f"{k.split('@')[0]}: {v}" for k, v in sorted(no_search.items()))
        console.print(f"skipped where the condition offers no search tool: {skipped}", soft_wrap=True)
    if summary.minimal:
        pct = summary.over_search_pct
        console.print(
            f"minimal searches for {len(summary.minimal)} correct executions "
            f"(RUN_DIR/minimal_search.jsonl); over-search = {pct:.1f}%",
            soft_wrap=True,
        )


@app.command()
@friendly_errors
def replay(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="A run directory (from `branchpoint run`); its spec.yaml is read first."),
    execution: str = typer.Option(..., "--execution", help="The execution (or fork branch) to replay: id or prefix."),
    checkpoint: str | None = typer.Option(
        None,
        "--checkpoint",
        help="The saved state to replay from (id, or a unique start or end of it; default: its initial state).",
    ),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Replays, each on its own new thread."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Replays run at once."),
    temperature: float = typer.Option(FORK_TEMPERATURE, "--temperature", min=0.0, help=TEMPERATURE_HELP),
    top_p: float = typer.Option(FORK_TOP_P, "--top-p", min=0.0, max=1.0, help=TOP_P_HELP),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    allow_identical_repeats: bool = typer.Option(False, "--allow-identical-repeats", help=IDENTICAL_HELP),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    log_requests: bool = typer.Option(False, "--log-requests", help=LOG_REQUESTS_HELP),
    cache: Path | None = typer.Option(None, "--cache", help=CACHE_HELP),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Replay an execution from a saved state: no forced action, the policy decides again.

    Each replay runs on its own new thread and is recorded in RUN_DIR/replays.jsonl (kind
    `replay`, parent = the saved state); the recorded thread is never written to. Sampling
    (temperature, top-p, seed) and concurrency default to the run's spec.yaml `fork:` section;
    options given here override it (recorded in RUN_DIR/fork_settings.jsonl).

    Example: branchpoint replay runs/quickstart --execution 3f2a --checkpoint 1f0c2a --repeats 4
    """
    from branchpoint.cli.study_options import given_settings
    from branchpoint.experiments.fork_options import fork_plan_from_options, record_fork_settings
    from branchpoint.experiments.forking import replay_run

    given = given_settings(
        ctx,
        {
            "repeats": ("repeats", repeats),
            "checkpoint": ("checkpoints", [checkpoint] if checkpoint else None),
            **_sampling_options(temperature, top_p, seed, allow_identical_repeats, concurrency),
        },
    )
    plan, settings = fork_plan_from_options(run_dir, given, [], replay=True)
    summary = replay_run(
        run_dir,
        execution,
        plan,
        progress=not no_progress,
        checkpoints=checkpoints,
        log_requests=log_requests,
        response_cache=cache_override(cache, no_cache),
    )
    record_fork_settings(run_dir, "replay", plan, settings, summary)
    console.print(settings.describe(), soft_wrap=True, highlight=False)
    print_fork_summary(summary, REPLAYS_FILE, "replays")


@checkpoints_app.command("ls")
@friendly_errors
def checkpoints_ls(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    execution: str | None = typer.Option(None, "--execution", help="Only this execution (or branch) id or prefix."),
    branches: bool = typer.Option(False, "--branches", help="Also list the saved states of fork branches."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line (full ids)."),
    wide: bool = typer.Option(False, "--wide", help="Full execution and checkpoint ids, and the condition."),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
) -> None:
    """List the saved states (checkpoints at legal action boundaries) of a run's executions, with
    each execution's question, condition and outcome (correct / abstained / wrong) and the
    searches and tokens spent by that state. Fork branches are listed with --branches.

    Example: branchpoint checkpoints ls runs/quickstart --wide

    Example: branchpoint fork runs/quickstart --checkpoint CHECKPOINT_ID --repeats 8
    """
    from branchpoint.experiments.states import saved_states

    rows = saved_states(run_dir, execution, checkpoints, branches=branches)
    if as_json:
        for row in rows:
            b = row.boundary
            typer.echo(
                json.dumps(
                    {
                        "execution_id": row.execution_id,
                        **b.model_dump(),
                        "question": row.question,
                        "condition": row.condition,
                        "outcome": row.verdict,  # the listing's key, as it has always been written
                        "branch": row.branch,
                        "parent_execution_id": row.parent_execution_id,
                    }
                )
            )
        return
    table = _wide_states_table(rows, branches) if wide else _states_table(rows, branches)
    console.print(table)
    if not wide and rows:
        console.print(
            "ids shortened; --wide or --json for full ids (fork/replay --checkpoint take an id or its shown end)"
        )


def _states_table(rows: list[Any], branches: bool) -> Any:
    """`checkpoints ls`: one row per saved state, ids shortened to 12 characters."""
    from rich.table import Table

    table = Table()
    for header in ("execution", *(["branch"] if branches else []), "question", "outcome", "boundary", "searches"):
        table.add_column(header, no_wrap=header not in ("question", "branch"))
    table.add_column("pending query")
    for header in ("tokens in/out", "checkpoint"):  # a checkpoint's shown end is what --checkpoint takes
        table.add_column(header, no_wrap=True)
    for row in rows:
        b = row.boundary
        table.add_row(
            row.execution_id[:12],
            *([row.branch or ""] if branches else []),
            _clip(row.question, 40),
            row.verdict,
            b.boundary,
            str(b.searches),
            b.pending_query or "",
            f"{b.input_tokens}/{b.output_tokens}",
            b.checkpoint_id[-12:],
        )
    return table


#: `checkpoints ls --wide`: the width of its first column (a checkpoint id, whole).
_IDS_WIDTH = 36


def _wide_states_table(rows: list[Any], branches: bool) -> Any:
    """`checkpoints ls --wide`: full ids, the question and the pending query stacked in a first
    column that never wraps an id (so 120 columns show every id whole), then the condition and
    the state's counts."""
    import textwrap

    from rich import box
    from rich.table import Table

    from branchpoint.evaluation.conditions import condition_label

    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("execution / checkpoint / question", no_wrap=True, min_width=_IDS_WIDTH)
    if branches:
        table.add_column("branch", no_wrap=True)
    table.add_column("condition", overflow="fold")
    for header in ("outcome", "boundary", "searches", "tokens in/out"):
        table.add_column(header, no_wrap=True)
    for row in rows:
        b = row.boundary
        width = max(_IDS_WIDTH, len(row.execution_id), len(b.checkpoint_id))
        text = [row.execution_id, b.checkpoint_id, textwrap.fill(_clip(row.question, 80), width)]
        if b.pending_query:
            text.append(textwrap.fill(f"pending: {_clip(b.pending_query, 80)}", width))
        table.add_row(
            "\n".join(text),
            *([row.branch or ""] if branches else []),
            condition_label(row.condition),
            row.verdict,
            b.boundary,
            str(b.searches),
            f"{b.input_tokens}/{b.output_tokens}",
        )
    return table


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
