"""Run directories for the viewer's tests and benchmark: executions with steps, checkpoints and
judgments, a fork study (THINK / SEARCH / STOP / SWITCH branches with repeats), replays,
metrics.json, value.json and a forecasts file, all written by the project's own code paths
(`evaluate`, `value_study`) where one exists.

`write_fork_study(run_dir, executions=N, forked=K)` scales from a handful of records (tests) to a
10,000-execution run (benchmarks/viewer_load.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import MetricsConfig, compute_metrics, metrics_json
from branchpoint.traces import (
    EXECUTIONS_FILE,
    FORKS_FILE,
    REPLAYS_FILE,
    ExecutionRecord,
    Judgment,
    RetrievedDoc,
    Step,
    Usage,
    dump_record,
    execution_id,
)
from tests.sim.models import sim_instruct_model

RUN_ID = "study"
QUESTIONS: tuple[tuple[str, bool, str | None, list[str]], ...] = (
    ("Who painted the Mona Lisa?", True, None, ["Leonardo da Vinci"]),
    ("What is the capital of Australia?", True, None, ["Canberra"]),
    ("Which element has the chemical symbol Fe?", True, None, ["iron"]),
    ("What did the mayor of Atlantis say in 2019?", False, "AU", []),
    ("Why did Einstein win the Nobel Prize for relativity?", False, "FP", []),
    ("How tall is the tower?", False, "UC", []),
)
ANSWERS = {
    "Leonardo da Vinci": ("Leonardo da Vinci", "Michelangelo"),
    "Canberra": ("Canberra", "Sydney"),
    "iron": ("Iron", "Gold"),
    None: ("I don't know.", "He said the city would rise again."),
}


def _ckpt(n: int, i: int) -> str:
    """A checkpoint id in LangGraph's time-ordered style."""
    return f"1f0c{n:08x}-{i:04x}-6b2e-8000-{n * 31 + i:012x}"


def _steps(
    rng: np.random.Generator,
    question: str,
    searches: int,
    answer: str,
    first_search: int = 0,
    decide_first: bool = True,
) -> list[Step]:
    steps: list[Step] = []
    for k in range(searches):
        query = f"{question.rstrip('?')} search {first_search + k + 1}"
        if decide_first or k > 0:
            steps.append(
                Step(
                    kind="decide",
                    action="search",
                    text=query,
                    usage=Usage(
                        input_tokens=int(180 + 350 * k),
                        output_tokens=int(rng.integers(12, 40)),
                        reasoning_tokens=int(rng.integers(5, 30)),
                    ),
                    latency_s=float(rng.uniform(0.3, 1.2)),
                    finish_reason="stop",
                    reasoning=f"I need evidence about: {question} (step {k + 1})",
                )
            )
        page = zlib.crc32(question.encode()) % 10_000
        docs = [
            RetrievedDoc(
                doc_id=f"doc-{page:04d}-{first_search + k}{j}",
                score=float(1.0 - 0.1 * j),
                title=f"Page {k}-{j}",
                text=f"Passage {j} about {question.lower()} ({'no record exists' if j == 2 else 'facts'}).",
            )
            for j in range(3)
        ]
        steps.append(
            Step(
                kind="search",
                query=query,
                source="wiki",
                retrieved=docs,
                latency_s=float(rng.uniform(0.01, 0.08)),
                cache_hit=bool(rng.random() < 0.4),
            )
        )
    steps.append(
        Step(
            kind="decide",
            action="answer",
            text=answer,
            usage=Usage(input_tokens=int(200 + 350 * searches), output_tokens=int(rng.integers(8, 30))),
            latency_s=float(rng.uniform(0.3, 1.0)),
            finish_reason="stop",
        )
    )
    return steps


def _totals(steps: list[Step]) -> dict[str, Any]:
    usages = [s.usage for s in steps if s.usage is not None]
    return {
        "search_calls": sum(s.kind == "search" for s in steps),
        "input_tokens": sum(u.input_tokens for u in usages),
        "output_tokens": sum(u.output_tokens for u in usages),
        "reasoning_tokens": sum(u.reasoning_tokens or 0 for u in usages),
        "wall_s": float(sum(s.latency_s for s in steps) + 0.05),
    }


def _answer(rng: np.random.Generator, gold: list[str], p_right: float) -> str:
    right, wrong = ANSWERS[gold[0] if gold else None]
    return right if rng.random() < p_right else wrong


def parent_records(n: int, seed: int = 0) -> list[ExecutionRecord]:
    """`n` executions over two conditions (search on / off), questions cycling through QUESTIONS."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        question, answerable, category, gold = QUESTIONS[(i // 2) % len(QUESTIONS)]
        cond = {"agent.search": i % 2 == 0, "model.name": "m1"}
        searches = int(rng.integers(1, 4)) if cond["agent.search"] else 0
        steps = _steps(rng, question, searches, _answer(rng, gold, 0.4 + 0.15 * searches))
        qid = f"q{i // 2:05d}"
        out.append(
            ExecutionRecord(
                execution_id=execution_id(RUN_ID, cond, qid),
                run_id=RUN_ID,
                condition=cond,
                question_id=qid,
                question=question if i < len(QUESTIONS) * 2 else f"{question} (#{i // 2})",
                answerable=answerable,
                category=category,
                gold_answers=gold,
                stratum="demo",
                support_group=f"page-{i % 7}",
                status="incomplete" if i % 23 == 11 else "ok",
                final_answer=None if i % 23 == 11 else steps[-1].text,
                steps=[] if i % 23 == 11 else steps,
                **(_totals(steps) if i % 23 != 11 else {}),
                checkpoint_ids=[_ckpt(i, j) for j in range(1 + 2 * searches)] if i % 23 != 11 else [],
                error="connection reset by peer" if i % 23 == 11 else None,
            )
        )
    return out


def legal_boundaries(record: ExecutionRecord) -> list[tuple[str, str]]:
    """(boundary, checkpoint id) of a parent: initial, then pending_query / after_search_k per search."""
    names = ["initial"]
    for k in range(1, record.search_calls + 1):
        names += ["pending_query", f"after_search_{k}"]
    return list(zip(names, record.checkpoint_ids or []))


def fork_records(parents: list[ExecutionRecord], repeats: int, seed: int = 0) -> list[ExecutionRecord]:
    """Branches of every parent at up to three boundaries: THINK / SEARCH at initial and
    after_search_k, STOP / SEARCH / SWITCH at the first pending_query; `repeats` each."""
    rng = np.random.default_rng(seed + 1)
    out = []
    n = 10_000 * len(parents)
    for parent in parents:
        boundaries = legal_boundaries(parent)
        picks = [b for b in boundaries if b[0] in ("initial", "after_search_1")] + [
            b for b in boundaries if b[0] == "pending_query"
        ][:1]
        for boundary, ckpt in picks:
            done = 1 if boundary == "after_search_1" else 0
            actions = ("STOP", "SEARCH", "SWITCH") if boundary == "pending_query" else ("THINK", "SEARCH")
            for action in actions:
                for rep in range(repeats):
                    ref = {"execution_id": parent.execution_id, "checkpoint_id": ckpt, "boundary": boundary}
                    searches = {"THINK": 0, "STOP": 0}.get(action, int(rng.integers(1, 3)))
                    p = 0.3 + 0.25 * (searches + done)
                    steps = _steps(
                        rng,
                        parent.question,
                        searches,
                        _answer(rng, parent.gold_answers, p),
                        first_search=done,
                        decide_first=boundary != "pending_query",
                    )
                    if action == "SWITCH":
                        for s in steps:
                            if s.kind == "search":
                                s.source = "news"
                    cond = {**parent.condition, "fork.search_budget": 2}
                    n += 1
                    # the runner's checkpoints: the inherited boundary (none after STOP), then a
                    # pending_query and an after_search_k per search (the first pending one inherited)
                    count = (
                        (0 if action == "STOP" else 1) + 2 * searches - (boundary == "pending_query" and searches > 0)
                    )
                    ids = [_ckpt(n, j) for j in range(count)]
                    out.append(
                        ExecutionRecord(
                            execution_id=execution_id(RUN_ID, cond, parent.question_id, ref, action, rep),
                            run_id=RUN_ID,
                            condition=cond,
                            question_id=parent.question_id,
                            question=parent.question,
                            answerable=parent.answerable,
                            category=parent.category,
                            gold_answers=parent.gold_answers,
                            stratum=parent.stratum,
                            support_group=parent.support_group,
                            parent=ref,
                            branch=action,
                            repeat=rep,
                            final_answer=steps[-1].text,
                            steps=steps,
                            **_totals(steps),
                            checkpoint_ids=ids,
                            prefix={
                                "steps": 0 if boundary == "initial" else 2 * done + 1,
                                "search_calls": done,
                                "input_tokens": 0,
                                "output_tokens": 0,
                            },
                            sampling={"temperature": 0.6, "top_p": 0.95, "seed": 1000 + rep},
                        )
                    )
    return out


def replay_records(parent: ExecutionRecord, repeats: int = 2, seed: int = 0) -> list[ExecutionRecord]:
    """Replays (the policy decides again) of a parent from its initial checkpoint, kind `replay`."""
    rng = np.random.default_rng(seed + 2)
    boundary, ckpt = legal_boundaries(parent)[0]
    ref = {"execution_id": parent.execution_id, "checkpoint_id": ckpt, "boundary": boundary}
    out = []
    for rep in range(repeats):
        steps = _steps(rng, parent.question, 1, _answer(rng, parent.gold_answers, 0.6))
        out.append(
            ExecutionRecord(
                execution_id=execution_id(RUN_ID, parent.condition, parent.question_id, ref, "replay", rep),
                run_id=RUN_ID,
                condition=parent.condition,
                question_id=parent.question_id,
                question=parent.question,
                answerable=parent.answerable,
                category=parent.category,
                gold_answers=parent.gold_answers,
                parent=ref,
                repeat=rep,
                final_answer=steps[-1].text,
                steps=steps,
                **_totals(steps),
                checkpoint_ids=[_ckpt(900_000 + 10 * seed + rep, j) for j in range(3)],
                kind="replay",
            )
        )
    return out


def _write_jsonl(path: Path, rows: list[Any]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write((dump_record(r) if isinstance(r, ExecutionRecord) else json.dumps(r)) + "\n")


def write_fork_study(
    run_dir: Path,
    *,
    executions: int = 12,
    forked: int = 4,
    repeats: int = 2,
    seed: int = 0,
    value: bool = True,
) -> dict[str, list[ExecutionRecord]]:
    """A run folder with executions.jsonl, judged.jsonl (rule labels + evidence labels of a judge
    "llm"), metrics.json, forks.jsonl (the first `forked` searching parents), replays.jsonl (of
    the first forked parent and the first unanswerable one),
    forecasts.jsonl and (when `value`) value.json from `value_study`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    parents = parent_records(executions, seed)
    _write_jsonl(run_dir / EXECUTIONS_FILE, parents)
    judged = judge_records(parents, "rule")
    for r in judged:
        for step in r.steps:
            for doc in step.retrieved if not r.answerable else []:
                label = "NEGATIVE" if "no record" in doc.text else "POSITIVE"
                r.judgments.append(Judgment(judge="llm", kind="evidence", label=label, doc_id=doc.doc_id))
    _write_jsonl(run_dir / "judged.jsonl", judged)
    cfg = MetricsConfig(bootstrap=0)
    (run_dir / "metrics.json").write_text(metrics_json(compute_metrics(judged, "rule", cfg)), encoding="utf-8")
    searching = [p for p in parents if p.search_calls >= 1 and p.status == "ok"][:forked]
    forks = fork_records(searching, repeats, seed)
    _write_jsonl(run_dir / FORKS_FILE, forks)
    replayed = searching[:1] + [p for p in searching[1:] if not p.answerable][:1]
    replays = [r for i, p in enumerate(replayed) for r in replay_records(p, seed=seed + 10 * i)]
    _write_jsonl(run_dir / REPLAYS_FILE, replays)
    states = sorted({(f.parent.execution_id, f.parent.checkpoint_id) for f in forks})
    rng = np.random.default_rng(seed + 3)
    _write_jsonl(
        run_dir / "forecasts.jsonl",
        [
            {
                "parent_execution_id": e,
                "checkpoint_id": c,
                "q_think": round(float(rng.uniform(0.2, 0.6)), 3),
                "q_search": round(float(rng.uniform(0.4, 0.9)), 3),
            }
            for e, c in states
        ],
    )
    if value and forks:
        from branchpoint.evaluation.value import ValueConfig, value_study

        value_study(
            run_dir, config=ValueConfig(resamples=50, dev_split=0.0), forecast_files=[run_dir / "forecasts.jsonl"]
        )
    return {"executions": parents, "judged": judged, "forks": forks, "replays": replays}


@contextmanager
def view_process(run_dir: Path, *args: str) -> Iterator[str]:
    """`branchpoint view RUN_DIR --port 0 ARGS` started as a user starts it (stopped on exit);
    yields the first line it prints (the URL)."""
    repo = Path(__file__).resolve().parents[3]
    cmd = [sys.executable, "-m", "branchpoint.cli", "view", str(run_dir), "--port", "0", *args]
    proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(10)


def write_rebuilt_run(run_dir: Path, logged: Path) -> None:
    """`write_logged_run`'s spec run again without --log-requests into `run_dir`, its requests
    then rebuilt from its checkpoints (`branchpoint requests rebuild`) into requests.rebuilt.jsonl."""
    from branchpoint.experiments.request_rebuild import rebuild_requests
    from branchpoint.experiments.runner import run_experiment
    from branchpoint.experiments.spec import load_spec
    from branchpoint.traces import SPEC_FILE

    run_experiment(load_spec(logged / SPEC_FILE, recorded=True), run_dir, progress=False)
    summary = rebuild_requests(run_dir)
    assert summary.failed == {} and summary.verified == summary.executions > 0


def write_logged_run(run_dir: Path, name: str = "logged", questions: int = 4) -> list[ExecutionRecord]:
    """A real run with its requests as sent: the known-truth simulated model (a real HTTP server
    in vLLM's wire format), the `native` policy over BM25 on the demo corpus, `--log-requests`,
    search cap 2, passages clipped to 12 words (`evidence_words`), then judged by an `LLMJudge`
    whose scripted model replies with reasoning text (as a reasoning model's server does);
    judged.jsonl holds its labels, raw outputs and reasoning."""
    from branchpoint.evaluation.llm_judges import LLMJudge
    from branchpoint.experiments.runner import run_experiment
    from branchpoint.experiments.spec import AgentSpec, BM25SourceSpec, ExperimentSpec, QuestionsSpec, RetrievalSpec
    from branchpoint.models.scripted import ScriptedModel
    from branchpoint.traces import JUDGED_FILE, read_records

    spec = ExperimentSpec(
        name=name,
        questions=QuestionsSpec(limit=questions),
        model=sim_instruct_model(),
        agent=AgentSpec(policy="native", search_cap=2, evidence_words=12),
        retrieval=RetrievalSpec(default="bm", sources={"bm": BM25SourceSpec()}),
    )
    run_experiment(spec, run_dir, progress=False, log_requests=True)
    records = read_records(run_dir / EXECUTIONS_FILE)

    def responder(prompt: str) -> dict[str, Any]:
        label = "CORRECT" if "Gold answers" in prompt else "ABSTAINED"
        return {"text": f"It matches.\nLABEL: {label}", "reasoning": f"Weighing the response: {label} fits best."}

    judge = LLMJudge(ScriptedModel(responder=responder, name="judge-model"), name="llm", evidence=False)
    judged = judge_records(records, judge)
    _write_jsonl(run_dir / JUDGED_FILE, judged)
    return records
