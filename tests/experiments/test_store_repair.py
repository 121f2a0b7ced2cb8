"""The run store cuts a torn last line (a crash mid-append) by reading backwards from the end."""

from __future__ import annotations

import pytest

from branchpoint.experiments.store import RunStore


@pytest.mark.parametrize(
    "content, kept",
    [
        (b"", b""),
        (b'{"a": 1}\n', b'{"a": 1}\n'),
        (b'{"a": 1}\n{"b": 2', b'{"a": 1}\n'),
        (b'{"torn": "no newline at all', b""),
        (b'{"a": 1}\n' + b"x" * 200_000, b'{"a": 1}\n'),  # a torn line longer than one read chunk
        (b"y" * 70_000 + b"\n" + b"z" * 70_000, b"y" * 70_000 + b"\n"),
    ],
)
def test_repair_torn_tail(tmp_path, content, kept):
    store = RunStore(tmp_path)
    for name in ("executions.jsonl", "forks.jsonl"):
        (tmp_path / name).write_bytes(content)
        assert store.repair_torn_tail(name) == len(content) - len(kept)
        assert (tmp_path / name).read_bytes() == kept


def test_repair_of_a_missing_file_is_a_no_op(tmp_path):
    assert RunStore(tmp_path).repair_torn_tail("forks.jsonl") == 0
    assert not (tmp_path / "forks.jsonl").exists()
