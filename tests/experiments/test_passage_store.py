"""The run's passage store: each retrieved passage's text stored once, resolved on read; the
writer enforces the readers' line limit with a clear error for that execution."""

from __future__ import annotations

import json

import pytest

from branchpoint.experiments import RunStore, load_spec, run_experiment
from branchpoint.experiments.verify import verify_run
from branchpoint.traces import (
    MAX_LINE_BYTES,
    PASSAGES_FILE,
    ExecutionRecord,
    RetrievedDoc,
    Step,
    TraceError,
    read_records,
)
from tests.experiments.conftest import CountingOpener, search_until_told_responder


def record(eid: str, texts: list[str], **fields) -> ExecutionRecord:
    docs = [RetrievedDoc(doc_id=f"d{i}", score=1.0, text=t, title=f"T{i}") for i, t in enumerate(texts)]
    return ExecutionRecord(
        execution_id=eid,
        run_id="r",
        question_id="q",
        question="Q?",
        answerable=True,
        steps=[Step(kind="search", query="q", retrieved=docs)],
        **fields,
    )


def test_passages_are_stored_once_and_resolved_on_read(tmp_path):
    store = RunStore(tmp_path)
    long = "Canberra is the capital city of Australia. " * 50
    for i in range(5):
        store.append(record(f"e{i}", [long, f"passage number {i}"]))
    raw = (tmp_path / "executions.jsonl").read_text()
    assert "Canberra" not in raw and raw.count('"text_ref"') == 10
    passages = [json.loads(line) for line in (tmp_path / PASSAGES_FILE).read_text().splitlines()]
    assert [p["text"] for p in passages].count(long) == 1 and len(passages) == 6
    for reader in (store.records(), read_records(tmp_path / "executions.jsonl")):
        assert [r.steps[0].retrieved[0].text for r in reader] == [long] * 5
        assert reader[3].steps[0].retrieved[1].text == "passage number 3"
        assert "text_ref" not in reader[0].steps[0].retrieved[0].model_dump()
    # a new writer (a rerun) does not store the same passage again
    RunStore(tmp_path).append(record("e9", [long]))
    assert (tmp_path / PASSAGES_FILE).read_text().count("Canberra") == 50


def test_inline_traces_are_still_read_and_a_missing_passage_is_named(tmp_path):
    inline = record("e1", ["inline text"])
    (tmp_path / "executions.jsonl").write_text(inline.model_dump_json() + "\n")
    assert RunStore(tmp_path).records()[0].steps[0].retrieved[0].text == "inline text"
    line = json.loads(inline.model_dump_json())
    line["steps"][0]["retrieved"][0].update(text="", text_ref="f" * 32)
    (tmp_path / "executions.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(TraceError, match="line 1: passage 'f{32}' is not in .*passages.jsonl"):
        read_records(tmp_path / "executions.jsonl")


def test_a_torn_passage_store_is_repaired_before_the_next_append(tmp_path):
    store = RunStore(tmp_path)
    store.append(record("e1", ["first"]))
    with (tmp_path / PASSAGES_FILE).open("a") as fh:
        fh.write('{"ref": "abc", "text": "half a li')  # a crash mid-append (its record never written)
    RunStore(tmp_path).append(record("e2", ["second"]))
    assert [r.steps[0].retrieved[0].text for r in RunStore(tmp_path).records()] == ["first", "second"]


def test_a_record_over_the_line_limit_is_an_incomplete_record_saying_why(tmp_path, caplog):
    store = RunStore(tmp_path)
    written = store.append(record("big", ["p"], final_answer="x" * (MAX_LINE_BYTES + 10)))
    store.append(record("small", ["p"], final_answer="ok"))
    assert written.status == "incomplete" and "more than the 16777216 bytes one trace line may have" in written.error
    assert "execution big" in caplog.text
    records = read_records(tmp_path / "executions.jsonl")  # the file stays readable
    assert [(r.execution_id, r.status) for r in records] == [("big", "incomplete"), ("small", "ok")]
    assert records[0].steps == [] and records[0].final_answer is None


def test_a_search_heavy_run_stores_each_passage_once(tmp_path, write_spec, isolated_cache):
    spec = load_spec(write_spec({"agent": {"policy": "constrained", "search_cap": 4, "top_k": 3}, "sweep": {}}))
    run_dir = tmp_path / "run"
    run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener(responder=search_until_told_responder))
    records = RunStore(run_dir).records()
    texts = [d.text for r in records for s in r.steps for d in s.retrieved]
    assert len(texts) > 20 and all(texts)
    stored = (run_dir / PASSAGES_FILE).read_text().splitlines()
    assert len(stored) == len(set(texts)) < len(texts)
    assert verify_run(run_dir, sample=0).ok


def test_an_over_long_branch_is_counted_as_the_incomplete_record_it_was_written_as(
    tmp_path, write_spec, isolated_cache
):
    from branchpoint.experiments.branch_planning import fork_records
    from branchpoint.experiments.forking import ForkPlan, fork_run

    spec = load_spec(
        write_spec(
            {
                "agent": {"policy": "constrained", "search_cap": 1, "top_k": 2},
                "sweep": {},
                "questions": {"path": "demo", "categories": ["answerable"], "limit": 1},
            }
        )
    )
    run_dir = tmp_path / "run"
    run_experiment(spec, run_dir, progress=False, model_opener=CountingOpener(responder=search_until_told_responder))

    def huge_answer(prompt, request=None):
        if request and request.get("grammar") and "search" not in request["grammar"]:
            return 'answer", "text": "' + "x" * (MAX_LINE_BYTES + 10) + '"}'
        return search_until_told_responder(prompt, request)

    summary = fork_run(
        run_dir,
        ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=1),
        progress=False,
        model_opener=CountingOpener(responder=huge_answer),
    )
    [branch] = fork_records(run_dir)
    assert branch.status == "incomplete" and summary.statuses == {"incomplete": 1}


def test_run_store_append_many_is_append_of_each_with_one_fsync(tmp_path, monkeypatch):
    import os

    from branchpoint.experiments.store import RunStore
    from branchpoint.traces import ExecutionRecord

    def rec(i: int) -> ExecutionRecord:
        return ExecutionRecord(
            execution_id=f"e{i}",
            run_id="r",
            question_id=f"q{i}",
            question="q?",
            answerable=True,
            status="ok",
            final_answer=str(i),
        )

    one, many = RunStore(tmp_path / "one"), RunStore(tmp_path / "many")
    for i in range(5):
        one.append(rec(i))
    fsyncs: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real(fd))[1])
    written = many.append_many([rec(i) for i in range(5)])
    assert [w.execution_id for w in written] == [f"e{i}" for i in range(5)]
    assert len(fsyncs) == 1  # no passages: the trace alone, once
    assert (tmp_path / "many" / "executions.jsonl").read_bytes() == (tmp_path / "one" / "executions.jsonl").read_bytes()
