"""LangGraph's saves in the calling thread (`inline_saves`): same checkpoints, no thread pool."""

from __future__ import annotations

import contextlib
import threading

from langgraph.checkpoint.memory import InMemorySaver

from branchpoint.agents import AgentContext, build_graph, initial_state, resolve_policy
from branchpoint.checkpoints import sqlite_checkpointer
from branchpoint.experiments import load_spec, run_experiment, runner
from branchpoint.experiments.inline_saves import InlineExecutor, inline_saves, installed
from branchpoint.models import ScriptedModel
from branchpoint.traces import read_records
from tests.experiments.conftest import CountingOpener


class ThreadRecordingSaver(InMemorySaver):
    """An in-memory saver that notes which thread made each save."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def put(self, *args, **kwargs):
        self.threads.append(threading.get_ident())
        return super().put(*args, **kwargs)

    def put_writes(self, *args, **kwargs):
        self.threads.append(threading.get_ident())
        return super().put_writes(*args, **kwargs)


def test_the_hook_is_in_place_with_the_pinned_langgraph():
    assert installed()


def test_saves_run_in_the_calling_thread_only_inside_the_block():
    saver = ThreadRecordingSaver()
    graph = build_graph(resolve_policy("no_search"), saver)
    ctx = AgentContext(
        model=ScriptedModel(replies=["Paris"], cycle=True), search=None, search_cap=0, max_tokens=8, answer_max_tokens=8
    )
    state = initial_state("q", "Capital of France?", None, [])
    with inline_saves():
        list(graph.stream(state, {"configurable": {"thread_id": "in"}}, context=ctx, durability="sync"))
    inside, saver.threads = saver.threads, []
    list(graph.stream(state, {"configurable": {"thread_id": "out"}}, context=ctx, durability="sync"))
    assert inside and set(inside) == {threading.get_ident()}
    assert saver.threads and threading.get_ident() not in saver.threads  # LangGraph's own pool outside


def test_inline_executor_keeps_exceptions_in_the_future():
    ok = InlineExecutor().submit(lambda x: x + 1, 1)
    failed = InlineExecutor().submit(lambda: 1 / 0)
    assert ok.done() and ok.result() == 2
    assert failed.done() and isinstance(failed.exception(), ZeroDivisionError)


def _checkpoints(path) -> dict[str, list[tuple]]:
    """Per thread, its checkpoints oldest first: (source, step, values), without ids or times."""
    with sqlite_checkpointer(path) as saver:
        by_thread: dict[str, list[tuple]] = {}
        for t in saver.list(None):
            by_thread.setdefault(t.config["configurable"]["thread_id"], []).append(
                (t.metadata.get("source"), t.metadata.get("step"), t.checkpoint["channel_values"])
            )
    return {k: sorted(v, key=lambda c: c[1]) for k, v in by_thread.items()}


def _comparable(record) -> dict:
    data = record.model_dump(exclude={"wall_s", "checkpoint_ids"})
    for step in data["steps"]:
        step.pop("latency_s", None)
    return data


def test_a_run_writes_the_same_checkpoints_and_records_with_and_without(
    tmp_path, write_spec, isolated_cache, monkeypatch
):
    spec = load_spec(write_spec())
    run_experiment(spec, tmp_path / "inline", progress=False, model_opener=CountingOpener(), concurrency=4)
    monkeypatch.setattr(runner, "inline_saves", contextlib.nullcontext)
    run_experiment(spec, tmp_path / "pooled", progress=False, model_opener=CountingOpener(), concurrency=4)
    inline = {r.execution_id: r for r in read_records(tmp_path / "inline" / "executions.jsonl")}
    pooled = {r.execution_id: r for r in read_records(tmp_path / "pooled" / "executions.jsonl")}
    assert inline.keys() == pooled.keys() and len(inline) == 12
    assert {k: _comparable(r) for k, r in inline.items()} == {k: _comparable(r) for k, r in pooled.items()}
    assert {k: len(r.checkpoint_ids) for k, r in inline.items()} == {
        k: len(r.checkpoint_ids) for k, r in pooled.items()
    }
    assert _checkpoints(tmp_path / "inline" / "checkpoints.sqlite") == _checkpoints(
        tmp_path / "pooled" / "checkpoints.sqlite"
    )
