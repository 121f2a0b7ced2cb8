"""A run recorded before the trace contract became a package (tests/data/recorded_run, written by
the run store and `write_records` of that time; see its make.py) reads and writes back byte for
byte: the split into modules and the rename of the fork action type changed no record on disk."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from branchpoint.traces import (
    FORK_ACTIONS,
    LINE_CHECKSUM_FIELD,
    ForkAction,
    TraceError,
    read_records,
    write_records,
)

RECORDED = Path(__file__).parent / "data" / "recorded_run"


@pytest.mark.parametrize("name", ["executions", "forks"])
def test_a_recorded_run_reads_and_writes_back_byte_for_byte(tmp_path: Path, name: str) -> None:
    inline = (RECORDED / f"{name}.inline.jsonl").read_bytes()
    stored = read_records(RECORDED / f"{name}.jsonl")  # the run store's lines: checksums, passage refs
    assert read_records(RECORDED / f"{name}.inline.jsonl") == stored
    out = tmp_path / f"{name}.jsonl"
    write_records(out, stored)
    assert out.read_bytes() == inline
    for line in inline.decode().splitlines():  # checksummed, passages inline
        obj = json.loads(line)
        assert list(obj)[-1] == LINE_CHECKSUM_FIELD
        assert all("text" in d and "text_ref" not in d for s in obj["steps"] for d in s["retrieved"])


def test_the_recorded_branches_are_the_fork_actions_as_written() -> None:
    records = read_records(RECORDED / "forks.jsonl")
    assert {r.branch for r in records} == {*FORK_ACTIONS, None}  # four branches and a replay
    assert set(typing.get_args(ForkAction)) == set(FORK_ACTIONS)
    parent = read_records(RECORDED / "executions.jsonl")[0]
    assert parent.model_extra == {"producer_note": "a foreign field, kept"}
    assert parent.steps[0].logprobs is not None and parent.steps[1].logprobs is None


def test_a_branch_that_is_no_fork_action_names_its_file_line_and_field(tmp_path: Path) -> None:
    lines = (RECORDED / "forks.inline.jsonl").read_text().splitlines()
    obj = json.loads(lines[1])
    obj.pop(LINE_CHECKSUM_FIELD)
    obj["branch"] = "search"  # a policy's decision, not a fork action
    bad = tmp_path / "forks.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(obj)]) + "\n")
    with pytest.raises(TraceError, match=r'forks.jsonl line 2: field "branch"'):
        read_records(bad)
