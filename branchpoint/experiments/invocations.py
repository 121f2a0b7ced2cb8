"""Each `run`, `fork`, `replay` or import that writes records is one invocation: its provenance
is one line of RUN_DIR/invocations.jsonl, and every record it writes names that line's id in
its `invocation` field (the run store fills it in; see `branchpoint.provenance`).

A record does not embed the 1-2 kB block itself: a fork study of 10 000 branches would repeat
it 10 000 times. The trace contract keeps the field optional, so foreign traces stay valid.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.store import RunStore
from branchpoint.models.server_info import describe_model
from branchpoint.provenance import (
    InvocationRecord,
    ModelServer,
    Provenance,
    append_invocation,
    collect,
    new_invocation_id,
)


def model_servers(specs: Iterable[ExperimentSpec]) -> list[ModelServer]:
    """The model servers the specs (a run's conditions) talk to, each described once."""
    seen: dict[str, ModelServer] = {}
    for spec in specs:
        model = spec.model
        key = model.model_dump_json(include={"provider", "name", "base_url", "factory"})
        if key not in seen:
            seen[key] = describe_model(model)
    return list(seen.values())


def invocation_provenance(command: str, specs: Iterable[ExperimentSpec]) -> Provenance:
    """The provenance of an invocation of `command` over these condition specs."""
    return collect(command, model_servers=model_servers(specs))


def record_invocation(store: RunStore, file: str, provenance: Provenance) -> str:
    """Append the invocation's line to RUN_DIR/invocations.jsonl and make `store` stamp its id
    on every record it appends from now on; returns the id."""
    invocation = new_invocation_id()
    append_invocation(store.run_dir, InvocationRecord(invocation_id=invocation, file=file, provenance=provenance))
    store.invocation_id = invocation
    return invocation


def begin_invocation(
    store: RunStore, file: str, command: str, specs: Iterable[ExperimentSpec], invocation_id: str | None = None
) -> str:
    """Make `store` stamp the invocation's id on what it appends: `invocation_id` when the
    invocation is recorded already (a shard of a run, a driver's in-process backend), else a
    new line describing this one (`command` over the condition specs); returns the id."""
    if invocation_id is not None:
        store.invocation_id = invocation_id
        return invocation_id
    return record_invocation(store, file, invocation_provenance(command, specs))


def record_import(out: Path, command: str) -> str:
    """The invocation line of an import writing the traces file `out` (in its folder); returns the id."""
    invocation = new_invocation_id()
    append_invocation(
        out.parent, InvocationRecord(invocation_id=invocation, file=out.name, provenance=collect(command))
    )
    return invocation
