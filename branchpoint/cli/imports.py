"""`branchpoint import inspect`: other frameworks' logs as branchpoint traces."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import console, friendly_errors

import_app = typer.Typer(
    help="Import other frameworks' logs as branchpoint traces.\n\n"
    "Example: branchpoint import inspect logs/my-eval.eval --out runs/imported/executions.jsonl",
    no_args_is_help=True,
)


@import_app.command("inspect")
@friendly_errors
def import_inspect(
    log: Path = typer.Argument(..., help="An inspect_ai eval log (.eval or .json), as inspect_ai wrote it."),
    out: Path = typer.Option(
        ..., "--out", help="The traces file to write (JSON lines, one record per sample and epoch)."
    ),
    search_tool: list[str] = typer.Option(
        [],
        "--search-tool",
        help="Tool names that are searches (default: search, web_search, retrieve, wikipedia_search); repeatable.",
    ),
    scorer: str | None = typer.Option(
        None,
        "--scorer",
        help="The scorer whose scores become the judgments (required when the log has several; the error lists them).",
    ),
) -> None:
    """Turn an inspect_ai eval log into branchpoint traces (needs pip install 'branchpoint\\[inspect]').

    Model calls of the scorers (an LLM grader such as model_graded_qa: the events inside a
    scorer's span) are not agent steps: they count in no step or token total. The import's
    provenance is a line of invocations.jsonl beside the traces file.

    Example: branchpoint import inspect logs/2026-12-01T08-23_task.eval --scorer model_graded_qa --out traces.jsonl && branchpoint evaluate traces.jsonl --judge given
    """
    from branchpoint.experiments.invocations import record_import
    from branchpoint.importers.inspect_log import SEARCH_TOOLS, read_inspect_log
    from branchpoint.traces import dump_record, write_files_atomically

    records = list(read_inspect_log(log, search_tool or SEARCH_TOOLS, scorer))
    invocation = record_import(out, "import inspect")  # its provenance, in invocations.jsonl beside `out`
    stamped = [r.model_copy(update={"invocation": invocation}) for r in records]
    write_files_atomically({out: "".join(dump_record(r) + "\n" for r in stamped)})
    searches = sum(r.search_calls for r in records)
    console.print(f"wrote {len(records)} traces ({searches} search calls) to {out}", soft_wrap=True, highlight=False)


#: The rollout formats `import rollouts` reads.
ROLLOUT_FORMATS = ("searchr1", "verl")


@import_app.command("rollouts")
@friendly_errors
def import_rollouts(
    files: list[Path] = typer.Argument(..., help="Rollout dumps (JSON lines), one or more; in training order."),
    fmt: str = typer.Option(
        ..., "--format", help="searchr1 (Search-R1's tagged sequences) or verl (rollout dumps, agent-loop outputs)."
    ),
    out: Path = typer.Option(..., "--out", help="The traces file to write (JSON lines, one record per rollout)."),
    step: list[int] = typer.Option(
        [],
        "--step",
        help="The training step of each file, in order (one per file; default: the dump's own `step` field).",
    ),
    tokenizer: Path | None = typer.Option(
        None,
        "--tokenizer",
        help="The run's tokenizer (tokenizer.json or a model folder): counts tokens of text dumps exactly and "
        "decodes agent-loop ids. Without it, text token counts are estimated (4 characters a token).",
    ),
    run_id: str = typer.Option("rollouts", "--run-id", help="The run id the records carry."),
    correct_at: float = typer.Option(
        1.0, "--correct-at", help="The reward at or above which a rollout counts as CORRECT (its judgment)."
    ),
    spec: Path | None = typer.Option(
        None,
        "--spec",
        help="--format searchr1: write a forkable run folder at --out's folder (spec.yaml from this spec, "
        "checkpoints.sqlite with every rebuildable state) so `branchpoint fork` can branch from the rollouts.",
    ),
) -> None:
    """Turn training rollouts (Search-R1's, verl's) into branchpoint traces.

    Evaluate them (`--judge given` uses the rollouts' rewards; `--judge rule` re-judges against the
    gold answers), compute TPC, view them, and follow the boundary over training with
    `branchpoint training-boundary`. With --spec (searchr1 only), the states are saved too, and
    `branchpoint fork` branches from them.

    Example: branchpoint import rollouts rollouts/10.jsonl rollouts/20.jsonl --format verl --out runs/rl/executions.jsonl && branchpoint evaluate runs/rl/executions.jsonl --judge given
    """
    from branchpoint.errors import InputError
    from branchpoint.importers.rollout_import import import_rollout_files

    if fmt not in ROLLOUT_FORMATS:
        raise InputError(f"--format {fmt!r}: expected one of {', '.join(ROLLOUT_FORMATS)}")
    if step and len(step) != len(files):
        raise InputError(f"--step: {len(step)} given for {len(files)} files (give one per file, in order)")
    summary = import_rollout_files(
        files, fmt, out, steps=list(step) or None, tokenizer=tokenizer, run_id=run_id, correct_at=correct_at, spec=spec
    )
    console.print(summary, soft_wrap=True, highlight=False)


@import_app.command("examples")
@friendly_errors
def import_examples(
    folder: Path = typer.Argument(..., help="Where to write the example rollout dumps (made if missing)."),
) -> None:
    """Write the example rollout dumps that ship with branchpoint (Search-R1 at steps 10, 50, 100; verl's
    rollout dumps at steps 10 and 100, its agent-loop outputs at step 100, and their tokenizer).

    Example: branchpoint import examples rollouts && branchpoint import rollouts rollouts/searchr1_step10.jsonl --format searchr1 --out traces.jsonl
    """
    from importlib.resources import files

    written = []
    for item in sorted(files("branchpoint").joinpath("data", "rollouts").iterdir(), key=lambda p: p.name):
        if item.name.endswith((".jsonl", ".json", ".yaml")):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / item.name).write_bytes(item.read_bytes())
            written.append(item.name)
    console.print(f"wrote {len(written)} files to {folder}: {', '.join(written)}", soft_wrap=True, highlight=False)
