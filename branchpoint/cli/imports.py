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
