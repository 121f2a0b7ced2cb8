"""Folding shard folders into the run folder: each record once, databases first, folders removed
after their fold, and kept (and named) when the fold fails."""

from __future__ import annotations

import pytest

from branchpoint.experiments import RunStore
from branchpoint.experiments.shard_fold import ShardFoldError, ShardMerger
from branchpoint.experiments.shards import SHARDS_DIR
from branchpoint.traces import ExecutionRecord

BASE = dict(run_id="r", condition={}, question_id="q", question="?", answerable=True)


def test_merger_folds_each_record_once(tmp_path):
    store = RunStore(tmp_path / "run")
    store.create({})
    first_try = ExecutionRecord(execution_id="e1", status="incomplete", error="timeout", **BASE)
    redone = ExecutionRecord(execution_id="e1", status="ok", final_answer="a", **BASE)
    other = ExecutionRecord(execution_id="e2", status="ok", final_answer="b", **BASE)
    merger = ShardMerger(store, None)
    assert merger.merge_records([first_try]) == [first_try]
    # a shard hands back its whole history: the incomplete try again, then the redone execution
    assert merger.merge_records([first_try, redone, other, redone]) == [redone, other]
    assert ShardMerger(store, None).merge_records([first_try, redone, other]) == []
    assert [(r.execution_id, r.status) for r in store.records()] == [("e1", "incomplete"), ("e1", "ok"), ("e2", "ok")]
    assert store.finished_ids() == {"e1", "e2"}


def test_folded_shard_folders_are_deleted(tmp_path):
    store = RunStore(tmp_path / "run")
    store.create({})
    shard = tmp_path / "run" / SHARDS_DIR / "s1"
    shard_store = RunStore(shard)
    shard_store.create({})
    shard_store.append(ExecutionRecord(execution_id="e1", status="ok", final_answer="a", **BASE))
    (shard / "checkpoints.sqlite").touch()  # its checkpoints (empty) are on this machine
    leftover = tmp_path / "run" / SHARDS_DIR / ".folded-s0-1234abcd"  # a removal cut short
    leftover.mkdir()
    (leftover / "executions.jsonl").write_text("")
    added = ShardMerger(store, "postgresql://x").recover()
    assert [r.execution_id for r in added] == ["e1"] and [r.execution_id for r in store.records()] == ["e1"]
    assert not (tmp_path / "run" / SHARDS_DIR).exists()  # the shard and the leftover are gone
    # a shard whose folder is not on this machine (another node's disk): records folded from the result
    other = ExecutionRecord(execution_id="e2", status="ok", final_answer="b", **BASE)
    added, found = ShardMerger(store, None).fold(tmp_path / "run" / SHARDS_DIR / "s2", [other])
    assert added == [other] and found is False


def test_a_shard_folder_without_its_checkpoint_file_is_folded_and_removed(tmp_path):
    """The same rule for every backend: a folded folder goes, whether or not it held checkpoints."""
    store = RunStore(tmp_path / "run")
    store.create({})
    shard = tmp_path / "run" / SHARDS_DIR / "local-0"
    RunStore(shard).create({})
    RunStore(shard).append(ExecutionRecord(execution_id="e1", status="ok", final_answer="a", **BASE))
    added, found = ShardMerger(store, None).fold(shard)
    assert [r.execution_id for r in added] == ["e1"] and found is False
    assert not shard.exists()


def test_a_failed_fold_keeps_the_shard_folder_and_names_it(tmp_path):
    store = RunStore(tmp_path / "run")
    store.create({})
    shard = tmp_path / "run" / SHARDS_DIR / "local-1"
    RunStore(shard).create({})
    RunStore(shard).append(ExecutionRecord(execution_id="e1", status="ok", final_answer="a", **BASE))
    with (shard / "executions.jsonl").open("a") as fh:
        fh.write("{not json\n")  # a complete line that is no record
    with pytest.raises(ShardFoldError, match=r"shard local-1: folding .*local-1 into the run failed .*line 2"):
        ShardMerger(store, None).fold(shard)
    assert (shard / "executions.jsonl").is_file()  # kept: nothing it recorded is lost
    assert ShardMerger(store, None).recover(strict=False) == [] and shard.is_dir()  # logged, kept
    lines = (shard / "executions.jsonl").read_text().splitlines(keepends=True)
    (shard / "executions.jsonl").write_text(lines[0])  # the cause fixed: the next fold takes it
    assert [r.execution_id for r in ShardMerger(store, None).recover()] == ["e1"]
    assert not shard.exists() and store.finished_ids() == {"e1"}
