"""A real fork study with the scripted model, then `branchpoint value` on it (and its LLM wiring)."""

from __future__ import annotations

import itertools
import json
import re
import threading

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.forking import ForkPlan, fork_run
from tests.experiments.conftest import CountingOpener

PASSAGES = {
    "p-canberra": ("Canberra", "Canberra is the capital city of Australia."),
    "p-melbourne": ("Melbourne", "Melbourne hosted the 1956 Summer Olympics."),
    "p-leonardo": ("Leonardo da Vinci", "Leonardo da Vinci painted the Mona Lisa."),
    "p-everest": ("Mount Everest", "Mount Everest is the highest mountain on Earth."),
}
QUESTIONS = [
    ("q1", "What is the capital of Australia?", "Canberra", "geo", "p-canberra"),
    ("q2", "Which city hosted the 1956 Summer Olympics?", "Melbourne", "geo", "p-melbourne"),
    ("q3", "Who painted the Mona Lisa?", "Leonardo da Vinci", "art", "p-leonardo"),
    ("q4", "What is the highest mountain on Earth?", "Mount Everest", "geo", "p-everest"),
]


def flaky_responder():
    """Searches whenever it may; a forced answer names the first passage's title on two calls of
    three, else says it does not know, so repeats of one branch disagree."""
    counter = itertools.count()
    lock = threading.Lock()

    def respond(prompt: str, request: dict | None = None) -> str:
        block = prompt.rsplit("Question: ", 1)[-1]
        if not (request and request.get("grammar") and "search" not in request["grammar"]):
            return f'search", "text": "{block.splitlines()[0]} {block.count(chr(91))}"}}'
        with lock:
            n = next(counter)
        match = re.search(r'\[1\] "([^"]+)"', block)
        answer = match.group(1) if match and n % 3 else "I do not know"
        return f'answer", "text": "{answer}"}}'

    return respond


@pytest.fixture()
def fork_study(tmp_path, monkeypatch):
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": i, "contents": f'"{t}"\n{x}'}) + "\n" for i, (t, x) in PASSAGES.items()),
        encoding="utf-8",
    )
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "".join(
            json.dumps(
                {
                    "id": qid,
                    "question": q,
                    "answerable": True,
                    "gold_answers": [gold],
                    "support": [page],
                    "stratum": stratum,
                    "support_group": page,
                }
            )
            + "\n"
            for qid, q, gold, stratum, page in QUESTIONS
        ),
        encoding="utf-8",
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "value-e2e",
                "questions": {"path": str(questions), "format": "branchpoint"},
                # the run uses the opener below; `branchpoint value --llm-forecaster` opens this scripted model
                "model": {"provider": "scripted", "script": ['{"q_think": 0.3, "q_search": 0.7}'], "max_tokens": 32},
                "agent": {"policy": "constrained", "search_cap": 1, "top_k": 1},
                "retrieval": {"default": "mini", "sources": {"mini": {"corpus": str(corpus)}}},
            }
        ),
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    opener = CountingOpener(responder=flaky_responder())
    run_experiment(load_spec(spec), run_dir, progress=False, model_opener=opener)
    plan = ForkPlan(boundaries=["initial", "after_search_k"], actions=["THINK", "SEARCH"], repeats=3, search_budget=1)
    fork_run(run_dir, plan, progress=False, model_opener=opener)
    return run_dir


def test_value_command_on_a_real_fork_study(fork_study, tmp_path):
    out = tmp_path / "value"
    forecasts = tmp_path / "forecasts.jsonl"
    forks = [json.loads(line) for line in (fork_study / "forks.jsonl").read_text().splitlines()]
    keys = sorted({(r["parent"]["execution_id"], r["parent"]["checkpoint_id"]) for r in forks})
    forecasts.write_text(
        "".join(
            json.dumps({"parent_execution_id": p, "checkpoint_id": c, "q_think": 0.4, "q_search": 0.8}) + "\n"
            for p, c in keys
        ),
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app,
        [
            "value",
            str(fork_study),
            "--forecasts",
            str(forecasts),
            "--out",
            str(out),
            "--resamples",
            "300",
            "--prices",
            "0,0.01",
            "--llm-forecaster",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "R²_Δ" in result.output and "wrote" in result.output
    report = json.loads((out / "value.json").read_text())
    assert {"brier", "gain_risk", "theta", "gain_variance", "gain_r2", "intervals", "utility"} <= set(report)
    states = report["states"]
    assert states["forked_states"] == 8 and states["scored"] == 8  # 4 questions × {initial, after_search_1}
    assert states["records"] == 8 * 2 * 3 and states["judge_calls"] < states["judged_records"]
    assert set(states["test_strata"]) <= {"geo", "art"}
    assert {"file:forecasts", "llm", "llm+ridge", "historical_mean"} <= set(report["brier"])
    llm = report["forecasters"]["llm"]["info"]
    assert llm["n_calls"] == 8 and llm["n_malformed"] == 0 and llm["n_no_history"] == 0
    assert list(report["utility"]["by_price"]) == ["0", "0.01"]
    assert report["intervals"]["resamples"] == 300
    for name, parts in report["brier"].items():
        assert parts["level"] + parts["gain"] + parts["variance"] == pytest.approx(parts["brier"]), name
