"""How the recorded run beside this file was written: by the run store (`executions.jsonl`,
`forks.jsonl`, `passages.jsonl`: checksummed lines, passages by `text_ref`) and `write_records`
(`*.inline.jsonl`: the inline form every reader gives), with branchpoint at commit 390ccd9, when
the trace contract was one module (`branchpoint/traces.py`). tests/test_traces_recorded.py reads
them with today's code: the same records, the same bytes.

    PYTHONPATH=<a checkout of that commit> python tests/data/recorded_run/make.py tests/data/recorded_run
"""

import sys
from pathlib import Path

from branchpoint.experiments.store import RunStore
from branchpoint.traces import (
    DecisionLogprobs,
    ExecutionRecord,
    Judgment,
    ParentRef,
    RetrievedDoc,
    Step,
    TokenAlternative,
    Usage,
    execution_id,
    read_records,
    write_records,
)

out = Path(sys.argv[1])
docs = [
    RetrievedDoc(
        doc_id="d-canberra", score=0.91, text="Canberra is the capital of Australia.", title="Canberra", source="mem"
    ),
    RetrievedDoc(doc_id="d-sydney", score=0.42, text="Sydney is the largest city in Australia.", source="mem"),
]
cond = {"agent.policy": "constrained", "agent.search": True}
parent_id = execution_id("r-fixture", cond, "q1")
parent = ExecutionRecord(
    execution_id=parent_id,
    run_id="r-fixture",
    condition=cond,
    question_id="q1",
    question="What is the capital of Australia?",
    answerable=True,
    gold_answers=["Canberra"],
    stratum="geo",
    support_group="g1",
    status="ok",
    final_answer="Canberra",
    steps=[
        Step(
            kind="decide",
            action="search",
            text="capital of Australia",
            usage=Usage(input_tokens=120, output_tokens=9),
            latency_s=0.25,
            finish_reason="stop",
            raw='search", "text": "capital of Australia"}',
            logprobs=DecisionLogprobs(
                protocol="constrained",
                position=0,
                token="search",
                logprob=-0.105,
                top=[TokenAlternative(token="search", logprob=-0.105), TokenAlternative(token="answer", logprob=-2.3)],
                p_search=0.9,
                p_answer=0.1,
                top_mass=1.0,
                entropy=0.47,
            ),
        ),
        Step(
            kind="search", query="capital of Australia", source="mem", retrieved=docs, latency_s=0.01, cache_hit=False
        ),
        Step(
            kind="answer",
            action="answer",
            text="Canberra",
            usage=Usage(input_tokens=300, output_tokens=5, reasoning_tokens=3, reasoning_tokens_estimated=True),
            latency_s=0.3,
        ),
    ],
    search_calls=1,
    input_tokens=420,
    output_tokens=14,
    reasoning_tokens=3,
    wall_s=0.6,
    checkpoint_ids=["ck-initial", "ck-after-1"],
    judgments=[Judgment(judge="rule", kind="answer", label="CORRECT", raw="gold match")],
    request_fingerprint="f" * 16,
    invocation="inv-1",
    producer_note="a foreign field, kept",
)
branches = []
for branch, repeat in (("THINK", 0), ("SEARCH", 1), ("SWITCH", 0), ("STOP", 0)):
    pref = {"execution_id": parent_id, "checkpoint_id": "ck-after-1", "boundary": "after_search_1"}
    branches.append(
        ExecutionRecord(
            execution_id=execution_id("r-fixture", cond, "q1", pref, branch, repeat),
            run_id="r-fixture",
            condition=cond,
            question_id="q1",
            question=parent.question,
            answerable=True,
            gold_answers=["Canberra"],
            parent=ParentRef(**pref),
            branch=branch,
            repeat=repeat,
            sampling={"temperature": 0.6, "top_p": 0.95, "seed": 7 + repeat},
            fork_settings={"depth": 1, "search_budget": 1},
            fork_fingerprint="ab" * 8,
            status="ok" if branch != "STOP" else "length",
            final_answer="Canberra" if branch != "STOP" else None,
            steps=[
                Step(
                    kind="search",
                    query="Australia capital",
                    source="web" if branch == "SWITCH" else "mem",
                    retrieved=docs[:1],
                ),
                Step(kind="answer", action="answer", text="Canberra", usage=Usage(input_tokens=200, output_tokens=4)),
            ],
            search_calls=1,
            input_tokens=200,
            output_tokens=4,
            error=None,
        )
    )
replay = ExecutionRecord(
    execution_id=execution_id("r-fixture", cond, "q1", {"execution_id": parent_id}, None, 0),
    run_id="r-fixture",
    condition=cond,
    question_id="q1",
    question=parent.question,
    answerable=True,
    kind="replay",
    parent=ParentRef(execution_id=parent_id, checkpoint_id="ck-initial", boundary="initial"),
    status="incomplete",
    error="model server http://127.0.0.1:9/v1: connection refused",
)
unanswerable = ExecutionRecord(
    execution_id=execution_id("r-fixture", cond, "q2"),
    run_id="r-fixture",
    condition=cond,
    question_id="q2",
    question="What did the 1901 census record for the moon?",
    answerable=False,
    category="FP",
    final_answer="I don't know",
    steps=[Step(kind="reflect", text="nothing to find", usage=Usage(input_tokens=50, output_tokens=3))],
    judgments=[Judgment(judge="rule", kind="abstention", label="ABSTAINED")],
)
store = RunStore(out)
store.append_many([parent, unanswerable], "executions.jsonl")
store.append_many([*branches, replay], "forks.jsonl")
# the inline form every reader gives, as write_records writes it
write_records(out / "forks.inline.jsonl", read_records(out / "forks.jsonl"))
write_records(out / "executions.inline.jsonl", read_records(out / "executions.jsonl"))
print("wrote", sorted(p.name for p in out.iterdir()))
