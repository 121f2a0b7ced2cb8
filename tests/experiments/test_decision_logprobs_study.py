"""Logprobs at decisions end to end on the simulated model: every policy stores the decision
record on its decide steps, and a fork study's value.json scores the `logprob` forecaster and
its signal routers (and skips them on a study without log probabilities)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from branchpoint.datasets import load_questions
from branchpoint.evaluation.value import ValueConfig, value_study
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.sim.behaviour import search_prob
from branchpoint.sim.passages import features
from branchpoint.sim.profile import load_profile
from branchpoint.sim.server import build_state, create_app
from branchpoint.validation.study_setup import shared_server_opener


@pytest.fixture(scope="module")
def opener() -> Iterator[Any]:
    """A model opener onto one simulated server in this process (instruct profile, demo questions),
    on a real loopback port: starting a server per run costs more than the runs."""
    import uvicorn

    from branchpoint.models.server import free_port

    state = build_state("instruct", latency_scale=0.0)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(state), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(400):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield shared_server_opener(f"http://127.0.0.1:{port}/v1")
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def write_spec(root: Path, policy: str, logprobs: int | None, n: int = 3) -> Path:
    model = {
        "provider": "sim",
        "name": "branchpoint-sim-instruct",
        "style": "completion" if policy == "constrained" else "chat",
        "temperature": 0.6,
        "seed": 1,
        "max_tokens": 48 if policy == "constrained" else 256,
        "sim": {"latency_scale": 0},
    }
    if logprobs is not None:
        model["logprobs"] = logprobs
    spec = {
        "name": f"lp-{policy}",
        "seed": 0,
        "questions": {"path": "demo", "sample": {"answerable": n, "unanswerable": n}},
        "model": model,
        "agent": {"policy": policy, "search": True, "search_cap": 1, "top_k": 2},
        "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
    }
    path = root / f"{policy}-{logprobs}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def executions(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "executions.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("policy", ["constrained", "native", "tagged"])
def test_each_policy_stores_the_decision_record_on_its_decide_steps(tmp_path: Path, opener: Any, policy: str) -> None:
    run = tmp_path / "run"
    run_experiment(load_spec(write_spec(tmp_path, policy, 3, n=2)), run, progress=False, model_opener=opener)
    records = executions(run)
    decides = [s for r in records for s in r["steps"] if s["kind"] == "decide"]
    # every decision that opened an action has its record; a cut-off reply (no text) has none
    assert decides and all("logprobs" in s for s in decides if s["action"]), policy
    assert all("logprobs" not in s for s in decides if not s["raw"] and s["finish_reason"] == "length")
    profile = load_profile("instruct")
    for r in records:
        first = r["steps"][0]
        if not first["action"]:
            continue  # a failed first call (its retry is another decision)
        lp = first["logprobs"]
        assert lp["protocol"] == ("constrained" if policy == "constrained" else policy)
        chosen = "search" if first["action"] == "search" else "answer"
        assert lp[f"p_{chosen}"] > 0
        # the first decision sees no passage: its P(search) is the simulator's own
        q = next(q for q in load_questions("demo") if q.id == r["question_id"])
        effort = "none" if policy == "constrained" else profile.default_effort
        assert lp["p_search"] == pytest.approx(search_prob(profile, q, features(q, []), effort))
    # search steps have none (no key is written where there is no record); a forced answer of the
    # completion policy is its own decision call, so it may have one
    assert all("logprobs" not in s for r in records for s in r["steps"] if s["kind"] == "search")


def test_a_run_without_the_setting_writes_no_logprobs_key(tmp_path: Path, opener: Any) -> None:
    run = tmp_path / "run"
    run_experiment(load_spec(write_spec(tmp_path, "constrained", None, n=2)), run, progress=False, model_opener=opener)
    assert all("logprobs" not in s for r in executions(run) for s in r["steps"])


def fork_study(root: Path, logprobs: int | None, opener: Any) -> Path:
    run = root / f"run-{logprobs}"
    spec = load_spec(write_spec(root, "constrained", logprobs, n=6))
    run_experiment(spec, run, progress=False, model_opener=opener)
    plan = ForkPlan(boundaries=["initial", "after_search_k"], actions=["THINK", "SEARCH"], repeats=2, search_budget=1)
    fork_run(run, plan, progress=False, model_opener=opener)
    return run


@pytest.fixture(scope="module")
def studies(tmp_path_factory, opener: Any) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("lp-study")
    config = ValueConfig(dev_split=0.5, resamples=0, prices=(0.0, 0.01))
    return {
        "with": value_study(fork_study(root, 4, opener), config=config, write=False),
        "without": value_study(fork_study(root, None, opener), config=config, write=False),
    }


def test_the_logprob_forecaster_is_scored_like_the_others(studies) -> None:
    report = studies["with"]
    assert report["forecasters"]["logprob"]["kind"] == "registered"
    info = report["forecasters"]["logprob"]["info"]
    assert info["fitted_on"] >= 2 and set(info) >= {"think", "search", "rows_without_logprobs"}
    assert "logprob" in report["brier"] and "logprob" in report["gain_risk"]
    by_price = report["utility"]["by_price"]["0"]
    assert {"logprob:p_search", "logprob:entropy"} <= set(by_price)


def test_without_logprobs_the_forecaster_is_skipped_and_nothing_else_changes(studies) -> None:
    report = studies["without"]
    assert "logprob" in report["skipped_forecasters"] and "model.logprobs" in report["skipped_forecasters"]["logprob"]
    assert "logprob" not in report["brier"]
    assert not any(name.startswith("logprob:") for name in report["utility"]["by_price"]["0"])
