"""The report's provenance section: where the report, the files it reads and the run's traces
came from, one table row each (`branchpoint runs show RUN_DIR` prints every detail).

Rows: the report itself, metrics.json and value.json (their `provenance` blocks), and each
invocation of invocations.jsonl (the run, fork, replay and import commands that wrote the
traces). Files written before provenance was recorded have no row; the section says so.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.evaluation.report_format import md_cell
from branchpoint.provenance import Provenance, code_version, command_line, read_invocations, server_label

COLUMNS = ("file", "command", "when (UTC)", "branchpoint", "Python, platform", "model servers")


def folder_provenance(
    folder: Path, metrics: Provenance | None = None, value: Provenance | None = None
) -> list[tuple[str, Provenance]]:
    """(label, block) of what a run folder's files record: metrics.json, value.json, and each
    invocation that wrote its traces (`executions.jsonl inv-…`)."""
    rows = [(name, p) for name, p in (("metrics.json", metrics), ("value.json", value)) if p is not None]
    rows += [(f"{inv.file} {inv.invocation_id}", inv.provenance) for inv in read_invocations(folder)]
    return rows


def provenance_row(label: str, p: Provenance) -> list[str]:
    """One table row: the file, the command as typed, the time, the code, Python and platform,
    and the model servers it talked to."""
    servers = "; ".join(server_label(s) for s in p.model_servers) or "—"
    cells = [label, f"`{command_line(p)}`", p.created_at, code_version(p)]
    cells += [f"{p.python} ({p.python_implementation}), {p.platform}", servers]
    return [md_cell(c.replace("\n", " ")) for c in cells]


def provenance_section(rows: list[tuple[str, Provenance]], hint: str) -> list[str]:
    """The `## Provenance` section over `rows`; `hint` names where the full blocks are printed."""
    lines = ["## Provenance", "", "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    lines += ["| " + " | ".join(provenance_row(label, p)) + " |" for label, p in rows]
    lines += [""]
    lines += [f"Package versions and the components used (with their modules and packages): `{hint}`.", ""]
    return lines
