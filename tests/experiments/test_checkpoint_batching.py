"""Checkpoint saves batched across executions: one SQLite transaction per batch of records,
committed by the run's writer just before it appends them, so every state a record lists can be
read by another connection (the next process) before the record is there: after a run, after a
fork study, and after a run killed mid-batch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from branchpoint.checkpoints.store import SqliteCheckpointer, sqlite_checkpointer
from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.verify import verify_run
from branchpoint.experiments.verify_stores import read_only_checkpointer
from branchpoint.traces import read_records
from tests.experiments.conftest import CountingOpener
from tests.experiments.test_faults import kill_run_midway, spec_file
from tests.servers.openai_fault_server import FaultConfig, FaultServer


def unreadable_states(run_dir: Path, file: str = "executions.jsonl") -> list[str]:
    """The saved states that final records of `file` list and that a fresh connection to the
    run's checkpoint database cannot read back as that execution's state (what the next
    process would find)."""
    missing = []
    with read_only_checkpointer(run_dir / "checkpoints.sqlite") as saver:
        for rec in read_records(run_dir / file):
            if rec.status == "incomplete":
                continue
            for cid in rec.checkpoint_ids or []:
                config = {"configurable": {"thread_id": rec.execution_id, "checkpoint_ns": "", "checkpoint_id": cid}}
                found = saver.get_tuple(config)
                if found is None or found.checkpoint["channel_values"].get("question_id") != rec.question_id:
                    missing.append(f"{rec.execution_id[:12]}/{cid}")
    return missing


def rows(path: Path) -> int:
    """Checkpoint rows another connection sees (committed ones only)."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0])
    finally:
        conn.close()


def put(saver: SqliteCheckpointer, thread: str) -> None:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})


def test_a_batch_is_one_transaction_committed_by_commit_and_at_the_end(tmp_path):
    path = tmp_path / "checkpoints.sqlite"
    with sqlite_checkpointer(path) as saver:
        assert isinstance(saver, SqliteCheckpointer)
        with saver.batched() as commit:
            put(saver, "a")
            put(saver, "b")
            assert saver.get_tuple({"configurable": {"thread_id": "a", "checkpoint_ns": ""}}) is not None  # its own
            assert rows(path) == 0  # not committed yet: no other connection sees them
            commit()
            assert rows(path) == 2
            put(saver, "c")
            with pytest.raises(RuntimeError, match="already active"), saver.batched():
                pass
            assert rows(path) == 2
        assert rows(path) == 3  # what was left, committed when the batch ends
        put(saver, "d")
        assert rows(path) == 4  # outside a batch each save commits itself again


def test_every_state_a_record_lists_is_readable_after_a_run_and_a_fork(
    tmp_path, write_spec, isolated_cache, monkeypatch
):
    commits: list[int] = []
    saves: list[int] = []
    real_commit, real_cursor = SqliteCheckpointer.commit, SqliteCheckpointer.cursor

    def counted_commit(self):
        commits.append(1)
        real_commit(self)

    def counted_cursor(self, transaction=True):
        if transaction and self._batching:
            saves.append(1)
        return real_cursor(self, transaction)

    monkeypatch.setattr(SqliteCheckpointer, "commit", counted_commit)
    monkeypatch.setattr(SqliteCheckpointer, "cursor", counted_cursor)
    spec = load_spec(write_spec({"sweep": {"agent.search": [True, False], "model.seed": [0, 1]}}))
    run_dir = tmp_path / "run"
    summary = run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener(), concurrency=8)
    assert summary.ran == 24 and summary.statuses == {"ok": 24}
    records = read_records(run_dir / "executions.jsonl")
    assert all(r.checkpoint_ids for r in records)
    assert unreadable_states(run_dir) == []
    # batched: at most one commit per writer batch (one per record at worst) and one at the end,
    # for several saves (checkpoints and task writes) per execution
    assert len(commits) <= len(records) + 1 and len(saves) >= 3 * len(records)

    fork = fork_run(
        run_dir,
        ForkPlan(actions=["THINK", "STOP"], repeats=1, concurrency=8),
        progress=False,
        model_opener=CountingOpener(),
    )
    assert fork.ran > 0 and fork.statuses == {"ok": fork.ran}
    assert sum(len(r.checkpoint_ids or []) for r in read_records(run_dir / "forks.jsonl")) >= fork.ran // 2
    assert unreadable_states(run_dir, "forks.jsonl") == []
    assert verify_run(run_dir, sample=0).ok


def test_a_run_killed_mid_batch_leaves_no_record_without_its_states(tmp_path):
    """SIGKILL while executions are in flight (their saves in the open transaction): every record
    on disk has its states on disk, and the rerun redoes the rest exactly once, states and all."""
    with FaultServer(FaultConfig(latency_s=0.05)) as server:
        spec = spec_file(tmp_path, server.base_url, n=40, name="killed-batch")
        run_dir = tmp_path / "run"
        before = kill_run_midway(spec, run_dir, tmp_path / "cache", concurrency=8)
        assert 6 <= before < 40, "the kill landed mid-run"
        assert unreadable_states(run_dir) == []  # as the killed process left them
        summary = run_experiment(load_spec(spec), run_dir, progress=False, concurrency=8)
    assert summary.ran == 40 - summary.skipped and summary.skipped >= 6
    ids = [r.execution_id for r in RunStore(run_dir).records()]
    assert len(ids) == len(set(ids)) == 40
    assert unreadable_states(run_dir) == []
    assert verify_run(run_dir, sample=0).ok
