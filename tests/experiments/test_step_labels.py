"""`branchpoint export labels` on a small fork study of the simulated model: the rows read back
with pyarrow, `datasets.load_dataset` (Parquet and JSON) and as JSONL; every label recomputed
here from forks.jsonl, the parent records and the requests the parents sent."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.tally import is_correct
from branchpoint.traces import read_records

Z95 = 1.959963984540054

SPEC = {
    "name": "labels",
    "seed": 0,
    "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 1}},
    "model": {"provider": "sim", "sim": {"latency_scale": 0}, "style": "chat", "max_tokens": 256},
    "agent": {"policy": "native", "search_cap": 2, "top_k": 2},
    "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
    "fork": {
        "boundaries": ["initial", "after_search_k"],
        "actions": ["THINK", "SEARCH"],
        "repeats": 4,
        "search_budget": 1,
        "minimal_search": False,
    },
}


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path]:
    """(run folder, label files' stem) of a fork study of 3 demo questions, 4 repeats a branch."""
    root = tmp_path_factory.mktemp("labels")
    mp = pytest.MonkeyPatch()
    mp.setenv("BRANCHPOINT_CACHE", str(root / "cache"))
    mp.setenv("HF_DATASETS_OFFLINE", "1")
    mp.setenv("HF_HOME", str(root / "hf"))
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    run_dir = root / "runs" / "labels"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(spec), "--out", str(run_dir), "--log-requests", "--no-progress"])
    assert result.exit_code == 0, result.output
    out = root / "out" / "labels.parquet"
    result = runner.invoke(app, ["export", "labels", str(run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    yield run_dir, out.with_suffix("")
    mp.undo()


def jsonl_rows(stem: Path) -> list[dict]:
    return [json.loads(line) for line in stem.with_suffix(".jsonl").read_text().splitlines()]


def wilson_by_roots(k: float, n: int) -> tuple[float, float]:
    """Wilson's interval as the two roots p of (p̂ − p)² = z²·p(1 − p)/n (a different route to it
    than the closed form the package uses)."""
    p_hat, z2 = k / n, Z95 * Z95
    roots = np.roots([1 + z2 / n, -(2 * p_hat + z2 / n), p_hat * p_hat])
    lo, hi = sorted(float(np.real(r)) for r in roots)
    return max(0.0, lo), min(1.0, hi)


def expected_labels(run_dir: Path) -> dict[str, dict]:
    """Per state id, the labels recomputed from forks.jsonl and executions.jsonl alone."""
    forks = [r for r in read_records(run_dir / "forks.jsonl") if r.status != "incomplete"]
    parents = {r.execution_id: r for r in read_records(run_dir / "executions.jsonl")}
    judged = judge_records(forks, "rule")
    y: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    prefix_searches: dict[str, int] = {}
    for r in judged:
        sid = f"{r.parent.execution_id}:{r.parent.checkpoint_id}"
        y[sid][r.branch].append(float(is_correct(r, "rule")))
        prefix_searches[sid] = int((r.model_extra or {})["prefix"]["search_calls"])
    out = {}
    for sid, by in y.items():
        if len(by["THINK"]) < 2 or len(by["SEARCH"]) < 2:
            continue
        pt, ps = np.mean(by["THINK"]), np.mean(by["SEARCH"])
        lt, ut = wilson_by_roots(sum(by["THINK"]), len(by["THINK"]))
        ls, us = wilson_by_roots(sum(by["SEARCH"]), len(by["SEARCH"]))
        lower = (ps - pt) - math.hypot(ps - ls, ut - pt)
        upper = (ps - pt) + math.hypot(us - ps, pt - lt)
        needed = lower > 0
        searched = parents[sid.split(":")[0]].search_calls > prefix_searches[sid]
        label = ("needed" if needed else "redundant") if searched else ("missing" if needed else "not_needed")
        out[sid] = {
            "m_think": len(by["THINK"]),
            "m_search": len(by["SEARCH"]),
            "p_think": pt,
            "p_search": ps,
            "delta_interval": [lower, upper],
            "searched": searched,
            "label": label,
            "searches": prefix_searches[sid],
        }
    return out


def test_labels_match_an_independent_computation(study):
    run_dir, stem = study
    rows = {r["state_id"]: r for r in jsonl_rows(stem)}
    expected = expected_labels(run_dir)
    assert set(rows) == set(expected) and len(rows) >= 4
    for sid, exp in expected.items():
        row = rows[sid]
        for key in ("m_think", "m_search", "searched", "label", "searches"):
            assert row[key] == exp[key], (sid, key, row[key], exp[key])
        for key in ("p_think", "p_search"):
            assert row[key] == pytest.approx(exp[key])
        assert row["delta"] == pytest.approx(exp["p_search"] - exp["p_think"])
        assert row["delta_interval"] == pytest.approx(exp["delta_interval"], abs=1e-9)
        assert row["search_needed"] == (exp["delta_interval"][0] > 0)
        assert row["search_redundant"] == (row["label"] == "redundant")
        assert row["search_missing"] == (row["label"] == "missing")
        assert row["action_taken"] == ("SEARCH" if exp["searched"] else "THINK")
    # the study shows both kinds of action (the policy searched at some states, not at others)
    assert {r["searched"] for r in rows.values()} == {True, False}


def _without_nulls(message: dict) -> dict:
    return {k: v for k, v in message.items() if v is not None}


def test_prefix_is_the_request_the_parent_sent_there(study):
    """A state's messages and tools are the body of the parent's own request at that state: its
    request number k, k being the searches the state holds (one decision per search here)."""
    run_dir, stem = study
    sent = defaultdict(list)
    for line in (run_dir / "requests.jsonl").read_text().splitlines():
        entry = json.loads(line)
        sent[entry["execution_id"]].append(entry["body"])
    rows = jsonl_rows(stem)
    for row in rows:
        body = sent[row["parent_execution_id"]][row["searches"]]
        assert [_without_nulls(m) for m in row["messages"]] == body["messages"]
        assert json.loads(row["tools"]) == body.get("tools", [])
        assert row["prompt_format"] == "chat" and row["prompt_text"] is None
        assert row["question"] in body["messages"][1]["content"]


def test_parquet_reads_back_with_pyarrow_and_datasets(study):
    import datasets
    import pyarrow.parquet as pq

    _, stem = study
    rows = jsonl_rows(stem)
    table = pq.read_table(stem.with_suffix(".parquet"))
    assert table.to_pylist() == rows
    meta = json.loads(table.schema.metadata[b"branchpoint"])
    assert meta["states"] == len(rows) and meta["settings"]["reward"] == "correct"
    assert "export labels" in json.dumps(meta["provenance"])
    ds = datasets.load_dataset("parquet", data_files=str(stem.with_suffix(".parquet")), split="train")
    assert ds.num_rows == len(rows)
    assert ds.features["messages"].feature["role"].dtype == "string"
    assert ds.features["delta_interval"].feature.dtype == "float64"
    assert [ds[i] for i in range(ds.num_rows)] == rows
    from_json = datasets.load_dataset("json", data_files=str(stem.with_suffix(".jsonl")), split="train")
    assert from_json["state_id"] == [r["state_id"] for r in rows]
    assert from_json["label"] == [r["label"] for r in rows]


def test_out_suffix_and_errors(study, tmp_path):
    run_dir, _ = study
    runner = CliRunner()
    result = runner.invoke(app, ["export", "labels", str(run_dir), "--out", str(tmp_path / "x.csv")])
    assert result.exit_code != 0 and ".parquet or .jsonl" in result.output
    result = runner.invoke(app, ["export", "labels", str(tmp_path), "--out", str(tmp_path / "x")])
    assert result.exit_code != 0 and "spec.yaml" in result.output


def test_trainers_score_the_exported_rows(study):
    """TRL's GRPOTrainer on the exported Parquet (its `messages` as the conversational `prompt`):
    the step reward of a completion that searches first is the row's p̂_S, of one that answers
    its p̂_T; verl's manager on the same rows (labels in `extra_info`) gives the same. The
    outcome reward of every branch's answer is that branch's correctness in the study."""
    import datasets

    from branchpoint.rewards import trl, verl
    from tests.rewards.trainers import trl_rewards, verl_load, verl_score

    run_dir, stem = study
    ds = datasets.load_dataset("parquet", data_files=str(stem.with_suffix(".parquet")), split="train")
    ds = ds.rename_column("messages", "prompt")
    rows = [ds[i] for i in range(ds.num_rows)]
    searching = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "q"}}}],
        }
    ]
    answering = [{"role": "assistant", "content": "Ouagadougou"}]
    inputs = [r for r in rows for _ in range(2)]  # a group of two completions per prompt
    completions = [c for _ in rows for c in (searching, answering)]
    got = trl_rewards(trl.step_reward, inputs, completions)
    assert got == [p for r in rows for p in (r["p_search"], r["p_think"])]
    label = trl_rewards(trl.step_reward_func(mode="label"), inputs, completions)
    assert label == [float(x) for r in rows for x in (r["search_needed"], not r["search_needed"])]
    step = verl_load("pkg://branchpoint.rewards.verl", "compute_step_score")
    for r in rows:
        verl_row = {"data_source": "labels", "reward_model": {"ground_truth": r["gold_answers"]}, "extra_info": r}
        assert verl_score(step, verl_row, "<search>q</search>") == r["p_search"]
        assert verl_score(step, verl_row, "<answer>x</answer>") == r["p_think"]
    forks = [r for r in read_records(run_dir / "forks.jsonl") if r.status == "ok" and r.final_answer]
    truth = [float(is_correct(r, "rule")) for r in judge_records(forks, "rule")]
    scores = [
        verl.compute_score(
            data_source="labels",
            solution_str=r.final_answer,
            ground_truth={"target": r.gold_answers},
            extra_info={"answerable": r.answerable},
        )
        for r in forks
    ]
    assert scores == truth and 0 < sum(truth) < len(truth)
    by_trl = trl_rewards(
        trl.outcome_reward,
        [{"prompt": r.question, "gold_answers": r.gold_answers, "answerable": r.answerable} for r in forks],
        [r.final_answer for r in forks],
    )
    assert by_trl == truth
