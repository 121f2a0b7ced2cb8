"""`branchpoint import rollouts`: read rollout files of one format and write their traces."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.importers.rollouts import COUNT_ESTIMATED, DEFAULT_CORRECT_AT, TokenCounter, read_rollouts
from branchpoint.importers.searchr1 import parse_searchr1
from branchpoint.importers.verl import parse_verl
from branchpoint.traces import ExecutionRecord

#: Why rollouts of a format cannot be forked (None: they can, with --spec).
NOT_FORKABLE = {
    "verl": (
        "--spec: verl rollouts cannot be forked: their prompts are the run's own chat template applied to "
        "messages and tool schemas that the dump does not hold, and branchpoint's policies send other "
        "prompts, so no saved state would continue the rollout as its model saw it (Search-R1 rollouts "
        "can: --format searchr1 with agent.protocol searchr1)"
    ),
}


def load_rollouts(
    files: list[Path],
    fmt: str,
    *,
    steps: list[int | None] | None = None,
    tokenizer: Path | None = None,
    run_id: str = "rollouts",
    correct_at: float = DEFAULT_CORRECT_AT,
) -> list[tuple[ExecutionRecord, Any]]:
    """(record, parsed rollout) of every rollout of the files, in order."""
    counter = TokenCounter(tokenizer)
    if fmt == "searchr1":
        parse = parse_searchr1
    elif fmt == "verl":
        parse = partial(parse_verl, counter=counter)
    else:
        raise InputError(f"--format {fmt!r}: expected searchr1 or verl")
    return list(
        read_rollouts(
            [Path(f) for f in files],
            parse,
            fmt=fmt,
            run_id=run_id,
            counter=counter,
            steps=steps,
            correct_at=correct_at,
        )
    )


def import_rollout_files(
    files: list[Path],
    fmt: str,
    out: Path,
    *,
    steps: list[int | None] | None = None,
    tokenizer: Path | None = None,
    run_id: str = "rollouts",
    correct_at: float = DEFAULT_CORRECT_AT,
    spec: Path | None = None,
) -> str:
    """Write the traces of the rollout files to `out` (and, with `spec`, a forkable run folder
    around it); returns the line to print."""
    from branchpoint.experiments.invocations import record_import
    from branchpoint.traces import dump_record, write_files_atomically

    if spec is not None and fmt in NOT_FORKABLE:
        raise InputError(NOT_FORKABLE[fmt])
    loaded = load_rollouts(files, fmt, steps=steps, tokenizer=tokenizer, run_id=run_id, correct_at=correct_at)
    records = [r for r, _ in loaded]
    forkable = ""
    if spec is not None:
        from branchpoint.importers.rollout_states import write_forkable_run

        records, forkable = write_forkable_run(loaded, spec, out)
    invocation = record_import(out, f"import rollouts --format {fmt}")
    stamped = [r.model_copy(update={"invocation": invocation}) for r in records]
    if spec is not None:
        from branchpoint.traces import write_records

        write_records(out, stamped)
    else:
        write_files_atomically({out: "".join(dump_record(r) + "\n" for r in stamped)})
    counts = Counter(str((r.model_extra or {}).get("token_counts")) for r in records)
    steps_seen = sorted({s for r in records if (s := (r.model_extra or {}).get("training_step")) is not None})
    searches = sum(r.search_calls for r in records)
    note = ""
    if counts.get(COUNT_ESTIMATED):
        note = f"; token counts of {counts[COUNT_ESTIMATED]} estimated (4 characters a token: give --tokenizer to count them)"
    where = f" at steps {', '.join(map(str, steps_seen))}" if steps_seen else ""
    return f"wrote {len(records)} traces ({searches} search calls){where} to {out}{note}{forkable}"
