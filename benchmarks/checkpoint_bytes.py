"""Checkpoint bytes per step and in total for one execution, and how the total grows with searches.

One execution per search count (scripted model that searches until the cap; an in-memory source
returning top-3 passages of ~100 words) runs through the runner's path (`run_one`, SQLite
checkpoints after every node). For each checkpoint of the thread it reads the stored sizes back
from the database: the checkpoint blob (every overwrite channel's value; `steps` and `evidence`
are delta channels, rebuilt from writes), its metadata, and the writes saved with it. Prints the per-step table of the 10-search execution, then the totals by
search count with total / searches and total / searches², and the evidence itself (the passages
the state holds at the end) for scale. Linear growth keeps total / searches flat; quadratic growth
keeps total / searches² flat.

    .venv/bin/python benchmarks/checkpoint_bytes.py [--searches 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.step_overhead import context
from branchpoint.agents import build_graph, resolve_policy
from branchpoint.checkpoints import sqlite_checkpointer
from branchpoint.checkpoints.values import checkpoint_values
from branchpoint.datasets.questions import Question
from branchpoint.experiments.planning import PlannedExecution
from branchpoint.experiments.runner import run_one
from branchpoint.experiments.spec import ExperimentSpec


def run(db: Path, searches: int) -> tuple[str, int]:
    """One execution with `searches` searches; (thread id, bytes of the final evidence as JSON)."""
    spec = ExperimentSpec(
        name="bytes", agent={"search_cap": searches, "top_k": 3}, retrieval={"default": "mem", "sources": {"mem": {}}}
    )
    q = Question(id="q", question="Which merchants traded amber?", answerable=True, gold_answers=["x"])
    thread = f"searches-{searches}"
    with sqlite_checkpointer(db) as saver:
        graph = build_graph(resolve_policy("constrained"), saver)
        rec = asyncio.run(run_one(graph, context(searches), PlannedExecution({}, spec, q, thread), "bytes"))
        assert rec.search_calls == searches
        evidence = checkpoint_values(saver, thread, rec.checkpoint_ids[-1])["evidence"]
    return thread, len(json.dumps(evidence).encode())


def sizes(db: Path, thread: str) -> list[dict]:
    """Per checkpoint, oldest first: step, source, boundary, checkpoint + metadata bytes, write bytes."""
    conn = sqlite3.connect(db)
    try:
        writes = dict(
            conn.execute(
                "SELECT checkpoint_id, SUM(LENGTH(value)) FROM writes WHERE thread_id = ? GROUP BY checkpoint_id",
                (thread,),
            ).fetchall()
        )
        rows = conn.execute(
            "SELECT checkpoint_id, LENGTH(checkpoint), LENGTH(metadata), json_extract(CAST(metadata AS TEXT), '$.step'), "
            "json_extract(CAST(metadata AS TEXT), '$.source') FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread,),
        ).fetchall()
    finally:
        conn.close()
    return [
        {"step": step, "source": source, "checkpoint": blob, "metadata": meta, "writes": writes.get(cid, 0)}
        for cid, blob, meta, step, source in rows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--searches", type=int, default=10)
    a = parser.parse_args()
    db = Path(tempfile.mkdtemp(prefix="bp-bytes-")) / "checkpoints.sqlite"
    totals = {}
    for s in sorted({1, 2, max(1, a.searches // 2), a.searches}):
        thread, evidence = run(db, s)
        rows = sizes(db, thread)
        totals[s] = (rows, evidence)
    rows, evidence = totals[a.searches]
    print(f"one execution, {a.searches} searches, top_k 3, ~100-word passages: {len(rows)} checkpoints")
    print(f"{'step':>5} {'source':<7}{'checkpoint B':>13}{'metadata B':>11}{'writes B':>10}{'cumulative B':>14}")
    cum = 0
    for r in rows:
        cum += r["checkpoint"] + r["metadata"] + r["writes"]
        print(f"{r['step']:>5} {r['source']:<7}{r['checkpoint']:>13}{r['metadata']:>11}{r['writes']:>10}{cum:>14}")
    print(f"evidence held at the end (JSON): {evidence} B")
    print()
    print(
        f"{'searches':>8}{'checkpoints':>12}{'total B':>10}{'B / search':>12}{'B / search²':>13}{'total / evidence':>18}"
    )
    for s, (rows, evidence) in totals.items():
        total = sum(r["checkpoint"] + r["metadata"] + r["writes"] for r in rows)
        print(f"{s:>8}{len(rows):>12}{total:>10}{total / s:>12.0f}{total / s**2:>13.0f}{total / evidence:>18.1f}")
    small, big = min(totals), max(totals)
    t_small = sum(r["checkpoint"] + r["metadata"] + r["writes"] for r in totals[small][0])
    t_big = sum(r["checkpoint"] + r["metadata"] + r["writes"] for r in totals[big][0])
    print(
        f"\n{big / small:.0f}x the searches -> {t_big / t_small:.1f}x the bytes "
        f"(linear: {big / small:.0f}x, quadratic: {(big / small) ** 2:.0f}x)"
    )


if __name__ == "__main__":
    main()
