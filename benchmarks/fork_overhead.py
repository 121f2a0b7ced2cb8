"""Fork overhead: time and disk for 100 branches with the scripted model (no LLM cost).

Runs 5 demo questions (4 searches each) with a scripted model, then forks 100 branches
(THINK and SEARCH from every `initial` / `after_search_k` boundary, repeated) and prints the
per-branch wall time, the checkpoint database growth, and the checkpoint bytes per step.

    .venv/bin/python benchmarks/fork_overhead.py
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.models import ScriptedModel


def responder(prompt: str, request: dict | None = None) -> str:
    """Search whenever allowed; answer with the first passage's title when forced."""
    block = prompt.rsplit("Question: ", 1)[-1]
    if not (request and request.get("grammar") and "search" not in request["grammar"]):
        return f'search", "text": "{block.splitlines()[0]} {block.count(chr(91))}"}}'
    match = re.search(r'\[1\] "([^"]+)"', block)
    return f'answer", "text": "{match.group(1) if match else "I do not know"}"}}'


@contextmanager
def scripted(spec, run_dir):
    yield ScriptedModel(responder=responder)


def db_bytes(run_dir: Path) -> int:
    """Size of the checkpoint database with its WAL, after a checkpoint of the WAL."""
    db = run_dir / "checkpoints.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in run_dir.glob("checkpoints.sqlite*"))


def count_checkpoints(run_dir: Path) -> int:
    with sqlite3.connect(run_dir / "checkpoints.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bp-fork-bench-"))
    spec_path = tmp / "spec.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": "fork-bench",
                "questions": {"path": "demo", "categories": ["answerable"], "limit": 5},
                "model": {"provider": "scripted", "script": ["unused"]},
                "agent": {"policy": "constrained", "search_cap": 4, "top_k": 3},
            }
        )
    )
    run_dir = tmp / "run"
    run_experiment(load_spec(spec_path), run_dir, progress=False, model_opener=scripted)
    before_bytes, before_ckpts = db_bytes(run_dir), count_checkpoints(run_dir)
    # 5 executions x 5 boundaries (initial, after_search_1..4) x 2 actions x 2 repeats = 100
    plan = ForkPlan(
        boundaries=["initial", "after_search_k"], actions=["THINK", "SEARCH"], repeats=2, search_budget=1, concurrency=4
    )
    start = time.perf_counter()
    summary = fork_run(run_dir, plan, progress=False, model_opener=scripted)
    wall = time.perf_counter() - start
    branches = summary.ran
    after_bytes, after_ckpts = db_bytes(run_dir), count_checkpoints(run_dir)
    steps = sum(len(r.steps) for r in fork_records(run_dir))
    grown = after_bytes - before_bytes
    print(f"branches run:                {branches} (statuses {summary.statuses})")
    print(f"wall:                        {wall:.2f} s total, {1000 * wall / branches:.1f} ms per branch")
    print(f"checkpoint db growth:        {grown / 1e6:.2f} MB, {grown / branches / 1e3:.1f} kB per branch")
    print(
        f"checkpoints written:         {after_ckpts - before_ckpts} ({(after_ckpts - before_ckpts) / branches:.1f} per branch)"
    )
    print(
        f"checkpoint bytes per step:   {grown / max(after_ckpts - before_ckpts, 1) / 1e3:.1f} kB per checkpoint, "
        f"{grown / max(steps, 1) / 1e3:.1f} kB per recorded step"
    )
    print(f"forks.jsonl:                 {(run_dir / 'forks.jsonl').stat().st_size / 1e3:.0f} kB")
    print(f"(run dir: {run_dir})")


if __name__ == "__main__":
    main()
