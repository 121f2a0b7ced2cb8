"""A synthetic run directory with every kind of study in it (for report and CLI tests).

Two models; m1 with and without search and a search-cap sweep (1, 2, 4), plus multi-turn
conditions; m2 with reasoning efforts (low / medium / high) with search and low without; m3 an
effort × search-cap grid (low / high × 1 / 3). Labels
come from a pretend judge "human" (evidence labels included), so the `given` judge can score it;
a minimal_search.jsonl sits beside the traces.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.traces import ExecutionRecord, Judgment, RetrievedDoc, Step, execution_id, write_records

CATEGORIES = ("AU", "FP", "UC")


def conditions() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"model.name": "m1", "agent.search": False, "agent.search_cap": 2}]
    out += [{"model.name": "m1", "agent.search": True, "agent.search_cap": c} for c in (1, 2, 4)]
    out += [
        {"model.name": "m1", "multi_turn.context": ctx, "multi_turn.preceding": p}
        for ctx in ("answerable", "mixed", "unanswerable")
        for p in (0, 2, 4)
    ]
    out += [{"model.name": "m2", "agent.search": True, "model.reasoning_effort": e} for e in ("low", "medium", "high")]
    out += [{"model.name": "m2", "agent.search": False, "model.reasoning_effort": "low"}]
    out += [
        {"model.name": "m3", "agent.search": True, "model.reasoning_effort": e, "agent.search_cap": c}
        for e in ("low", "high")
        for c in (1, 3)
    ]
    return out


def answerable_evidence_label(doc_id: str) -> str:
    """The pretend judge's evidence label of a document retrieved for an answerable question."""
    return "NEGATIVE" if zlib.crc32(doc_id.encode()) % 8 == 0 else "POSITIVE"


def _record(
    rng: np.random.Generator, cond: dict[str, Any], qid: str, answerable: bool, category: str | None
) -> ExecutionRecord:
    searching = cond.get("agent.search", True)
    cap = int(cond.get("agent.search_cap", 3)) if searching else 0
    searches = int(rng.integers(0, cap + 1)) if cap else 0
    correct = bool(rng.random() < (0.6 if answerable else 0.3 + 0.1 * searches))
    steps: list[Step] = []
    judgments: list[Judgment] = []
    for k in range(searches):
        docs = [RetrievedDoc(doc_id=f"{qid}-d{k}{j}", score=1.0, text=f"passage {k}{j}") for j in range(2)]
        steps += [
            Step(kind="decide", latency_s=float(rng.uniform(0.2, 1.0))),
            Step(kind="search", query=f"query {k}", retrieved=docs, latency_s=0.05),
        ]
        if not answerable:
            judgments += [
                Judgment(
                    judge="human",
                    kind="evidence",
                    doc_id=d.doc_id,
                    label="NEGATIVE" if rng.random() < 0.2 else "POSITIVE",
                )
                for d in docs
            ]
        else:  # answerable documents: NEGATIVE for one doc_id in eight (by hash, so rng draws stay as they were)
            judgments += [
                Judgment(judge="human", kind="evidence", doc_id=d.doc_id, label=answerable_evidence_label(d.doc_id))
                for d in docs
            ]
    steps.append(Step(kind="answer", latency_s=float(rng.uniform(0.2, 1.0))))
    kind = "answer" if answerable else "abstention"
    label = ("CORRECT" if correct else "INCORRECT") if answerable else ("ABSTAINED" if correct else "ANSWERED")
    judgments.insert(0, Judgment(judge="human", kind=kind, label=label))
    return ExecutionRecord(
        execution_id=execution_id("synthetic", cond, qid),
        run_id="synthetic",
        condition=cond,
        question_id=qid,
        question=f"question {qid}?",
        answerable=answerable,
        category=category,
        gold_answers=["x"] if answerable else [],
        final_answer="x" if correct else "y",
        steps=steps,
        search_calls=searches,
        input_tokens=int(200 + 400 * searches),
        output_tokens=int(rng.integers(20, 80)),
        reasoning_tokens={"low": 10, "medium": 40, "high": 120}.get(cond.get("model.reasoning_effort"), 0),
        wall_s=float(sum(s.latency_s for s in steps) + 0.1),
        judgments=judgments,
    )


def synthetic_records(seed: int = 0, per_kind: int = 6) -> list[ExecutionRecord]:
    rng = np.random.default_rng(seed)
    records = []
    for cond in conditions():
        for i in range(per_kind):
            records.append(_record(rng, cond, f"a{i}", True, None))
        for i in range(per_kind):
            records.append(_record(rng, cond, f"u{i}", False, CATEGORIES[i % 3]))
    return records


def write_synthetic_run(run_dir: Path, seed: int = 0) -> list[ExecutionRecord]:
    """executions.jsonl and minimal_search.jsonl in `run_dir`; returns the records."""
    records = synthetic_records(seed)
    write_records(run_dir / "executions.jsonl", records)
    rows = [
        {
            "execution_id": r.execution_id,
            "question_id": r.question_id,
            "condition": r.condition,
            "searches": r.search_calls,
            "minimal_searches": r.search_calls // 2,
            "judge": "rule",
        }
        for r in records
        if r.search_calls and r.judgments[0].label in ("CORRECT", "ABSTAINED")
    ]
    (run_dir / "minimal_search.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return records
