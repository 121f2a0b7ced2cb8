"""How `branchpoint runs show` prints a run's overview: the spec, the trace files, then one tree
per invocation and per JSON output with its provenance (`experiments.run_overview`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from branchpoint.experiments.run_overview import RunOverview
from branchpoint.provenance import (
    Provenance,
    code_version,
    command_line,
    component_label,
    server_label,
)


def print_overview(overview: RunOverview, console: Console) -> None:
    """Print the spec summary, the trace files and every provenance block of `overview`."""
    console.print(f"[bold]{escape(str(overview.run_dir))}[/]", soft_wrap=True)
    if overview.spec is not None:
        console.print(spec_table(overview.spec))
    if overview.traces:
        table = Table("trace file", "records", "by invocation", title="Traces")
        for name, count in overview.traces.items():
            parts = [f"{k or 'none named'}: {n}" for k, n in count.by_invocation.items()]
            table.add_row(name, str(count.records), escape(", ".join(parts)))
        console.print(table)
    for inv in overview.invocations:
        console.print(provenance_tree(f"{inv.invocation_id} → {inv.file}", inv.provenance))
    for name, block in overview.outputs.items():
        if isinstance(block, Provenance):
            console.print(provenance_tree(name, block))
        else:
            console.print(f"[bold]{name}[/]: {escape(block or 'no provenance (written before it was recorded)')}")
    if not overview.invocations and not any(isinstance(b, Provenance) for b in overview.outputs.values()):
        console.print("no provenance recorded in this folder (its files were written before it was recorded)")


def spec_table(spec: dict[str, Any]) -> Table:
    """The recorded spec's summary as a two-column table."""
    table = Table("spec", "", title="Spec", show_header=False)
    model = spec.get("model") or {}
    rows = {
        "name": spec.get("name"),
        "description": spec.get("description"),
        "model": ", ".join(f"{k} {v}" for k, v in model.items()),
        "policy": spec.get("policy"),
        "questions": ", ".join(f"{k} {v}" for k, v in (spec.get("questions") or {}).items()),
        "sweep": "; ".join(f"{k}: {v}" for k, v in (spec.get("sweep") or {}).items()) or "none",
        "conditions": spec.get("conditions"),
        "fork": spec.get("fork"),
    }
    for key, value in rows.items():
        if value not in (None, ""):
            table.add_row(key, escape(str(value)))
    return table


def provenance_tree(title: str, p: Provenance) -> Tree:
    """One provenance block as a tree: command, time, code, Python, packages, servers, components."""
    tree = Tree(f"[bold]{escape(title)}[/]: {escape(command_line(p))}")
    tree.add(f"at {p.created_at}")
    tree.add(f"branchpoint {escape(code_version(p))}")
    tree.add(f"Python {p.python} ({p.python_implementation}) on {escape(p.platform)}")
    tree.add("packages: " + escape(", ".join(f"{k} {v}" for k, v in p.packages.items())))
    if p.model_servers:
        servers = tree.add("model servers")
        for server in p.model_servers:
            at = f" at {server.base_url}" if server.base_url else ""
            servers.add(escape(server_label(server) + at))
    if p.components:
        components = tree.add("components")
        for component in p.components:
            components.add(escape(component_label(component)))
    return tree
