"""The `branchpoint` command line (typer + rich), one module per command group.

Bad input prints one clear line and exits 2 (`common.friendly_errors`). The command modules
register on the root `app` when imported here, in the order `branchpoint --help` lists them;
the sub-apps (`checkpoints`, `models`, `retrieval`, `runs`, `requests`, `import`, `export`, `index`) are added after.
"""

from __future__ import annotations

import importlib

from branchpoint.cli.common import app

# The command modules, in the order `branchpoint --help` lists their commands.
COMMAND_MODULES = (
    "run",
    "evaluate",
    "view",
    "quickstart",
    "fork",
    "value",
    "runs",
    "models",
    "validate",
    "builder",
    "imports",
    "training",
    "exports",
    "schema",
    "retrieval",
    "augment",
)
for _name in COMMAND_MODULES:
    importlib.import_module(f"branchpoint.cli.{_name}")

from branchpoint.cli import exports, fork, imports, models, request_logs, retrieval, runs  # noqa: E402  (imported above, in order)

app.add_typer(fork.checkpoints_app, name="checkpoints")
app.add_typer(models.models_app, name="models")
app.add_typer(retrieval.retrieval_app, name="retrieval")
app.add_typer(runs.runs_app, name="runs")
app.add_typer(request_logs.requests_app, name="requests")
app.add_typer(imports.import_app, name="import")
app.add_typer(exports.export_app, name="export")
app.add_typer(retrieval.index_app, name="index")


def main() -> None:
    """Run the command line (the `branchpoint` console script and `python -m branchpoint.cli`)."""
    app()


__all__ = ["app", "main"]
