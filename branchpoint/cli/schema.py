"""`branchpoint schema`: the JSON Schemas of traces, metrics.json, value.json and invocations.jsonl lines."""

from __future__ import annotations

import typer

from branchpoint.cli.common import app, friendly_errors


@app.command("schema")
@friendly_errors
def schema(
    which: str = typer.Argument(
        ...,
        help="trace (one line of executions.jsonl / forks.jsonl), metrics (metrics.json), value (value.json) "
        "or invocation (one line of invocations.jsonl).",
    ),
) -> None:
    """Print the JSON Schema of a trace record, metrics.json, value.json or an invocations.jsonl line.

    Example: branchpoint schema trace > trace.schema.json
    """
    import json

    from branchpoint.errors import InputError
    from branchpoint.evaluation.report_schemas import json_schema

    try:
        text = json.dumps(json_schema(which), indent=2)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    typer.echo(text)
