"""The report's provenance section: where the report, the files it reads and the run's traces
came from, one list item each (`branchpoint runs show RUN_DIR` prints every detail).

Items: the report itself, metrics.json and value.json (their `provenance` blocks), and each
invocation of invocations.jsonl (the run, fork, replay and import commands that wrote the
traces). A file written before provenance was recorded has no item.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.provenance import Provenance, code_version, command_line, read_invocations, server_label


def folder_provenance(
    folder: Path, metrics: Provenance | None = None, value: Provenance | None = None
) -> list[tuple[str, Provenance]]:
    """(label, block) of what a run folder's files record: metrics.json, value.json, and each
    invocation that wrote its traces (`executions.jsonl inv-…`)."""
    rows = [(name, p) for name, p in (("metrics.json", metrics), ("value.json", value)) if p is not None]
    rows += [(f"{inv.file} {inv.invocation_id}", inv.provenance) for inv in read_invocations(folder)]
    return rows


def provenance_line(label: str, p: Provenance) -> str:
    """One list item: the file, the command as typed, the time, the code, Python and platform,
    and the model servers it talked to."""
    servers = "; ".join(server_label(s) for s in p.model_servers) or "none"
    return (
        f"- **{label}**: `{command_line(p)}` at {p.created_at}; branchpoint {code_version(p)}; "
        f"Python {p.python} ({p.python_implementation}) on {p.platform}; model servers: {servers}"
    ).replace("\n", " ")


def provenance_section(rows: list[tuple[str, Provenance]], hint: str) -> list[str]:
    """The `## Provenance` section over `rows`; `hint` names where the full blocks are printed."""
    lines = ["## Provenance", "", *(provenance_line(label, p) for label, p in rows), ""]
    lines += [f"Package versions and the components used (with their modules and packages): `{hint}`.", ""]
    return lines
