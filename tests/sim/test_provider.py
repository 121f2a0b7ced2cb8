"""`model.provider: sim`: started and stopped like the embedded server; records and reports say so."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from branchpoint.evaluation.report import is_simulated
from branchpoint.experiments.spec import AgentSpec, BM25SourceSpec, ExperimentSpec, QuestionsSpec, RetrievalSpec
from branchpoint.models import ModelSpec, open_model
from branchpoint.models.spec import SimServerSpec
from tests.sim.models import sim_instruct_model


def test_provider_sim_starts_a_server_and_stops_it() -> None:
    spec = ModelSpec(
        provider="sim",
        name="branchpoint-sim-instruct",
        style="chat",
        temperature=0.6,
        seed=1,
        max_tokens=256,
        sim=SimServerSpec(profile="instruct", latency_scale=0.0),
    )
    with open_model(spec) as client:
        call = client.chat([{"role": "user", "content": "What is the capital of Australia?"}])
        assert call.text and call.usage.input_tokens > 0
        url = client.base_url
        assert httpx.get(f"{url}/models").json()["data"][0]["id"] == "branchpoint-sim-instruct"
    assert url.startswith("http://127.0.0.1:")
    with pytest.raises(httpx.ConnectError):  # stopped on exit
        httpx.get(f"{url}/models", timeout=2)


def test_records_and_reports_of_a_sim_run_are_labelled(tmp_path: Path) -> None:
    from branchpoint.evaluation.evaluate import evaluate
    from branchpoint.evaluation.report import write_report
    from branchpoint.experiments.runner import run_experiment

    spec = ExperimentSpec(
        name="simlabel",
        questions=QuestionsSpec(limit=4),
        model=sim_instruct_model(),
        agent=AgentSpec(policy="native", search_cap=1),
        retrieval=RetrievalSpec(default="bm", sources={"bm": BM25SourceSpec()}),
    )
    run_experiment(spec, tmp_path, progress=False)
    rows = [json.loads(line) for line in (tmp_path / "executions.jsonl").read_text().splitlines()]
    assert rows and all(r["model_provider"] == "sim" for r in rows)
    assert is_simulated(tmp_path)
    evaluate(tmp_path, judge="rule")
    report, _ = write_report(tmp_path)
    assert "simulated model" in report.read_text().splitlines()[0]


def test_a_non_sim_run_is_not_labelled(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text("model: {provider: openai, name: qwen}\n")
    (tmp_path / "executions.jsonl").write_text(json.dumps({"execution_id": "x"}) + "\n")
    assert not is_simulated(tmp_path)


def test_a_run_with_questions_the_simulator_does_not_know_is_refused_by_id(tmp_path: Path) -> None:
    """The simulated model used to answer "I don't know." to a question outside its question set
    and the run reported `ok`; now the run refuses before anything runs, naming the ids."""
    from branchpoint.errors import InputError
    from branchpoint.experiments.runner import run_experiment

    demo = (Path(__file__).parents[2] / "branchpoint/data/demo/questions.jsonl").read_text().splitlines()
    extra = {"id": "mine-1", "question": "Who wrote the Voynich manuscript?", "answerable": True, "gold_answers": ["?"]}
    qfile = tmp_path / "questions.jsonl"
    qfile.write_text("\n".join([demo[0], json.dumps(extra)]) + "\n")
    spec = ExperimentSpec(
        name="unknown",
        questions=QuestionsSpec(path=str(qfile)),
        # started on the demo set (unset, it would look questions up in the run's own file)
        model=ModelSpec(
            provider="sim", style="chat", name="branchpoint-sim-instruct", sim=SimServerSpec(questions="demo")
        ),
        agent=AgentSpec(policy="native", search_cap=1),
        retrieval=RetrievalSpec(default="bm", sources={"bm": BM25SourceSpec()}),
    )
    out = tmp_path / "run"
    with pytest.raises(InputError, match=r"1 of the run's questions .* mine-1") as err:
        run_experiment(spec, out, progress=False)
    assert "demo-a01" not in str(err.value)
    assert not (out / "executions.jsonl").exists()


@pytest.mark.parametrize("protocol", ["chat", "searchr1"])
def test_the_tagged_policy_stops_a_model_that_writes_past_search(tmp_path: Path, protocol: str) -> None:
    """`runs_past_search` writes an invented result and an answer after `</search>` unless a stop
    string ends the turn. Without one, at a `max_tokens` the run-on overflows (48 here), every
    such turn ended `length` and the execution with 0 searches; the tagged policy now stops at
    `</search>` / `</answer>`, so the model's turns, decisions and tokens are those of a model
    that stops by itself, and the transcript holds the turn up to `</search>`."""
    from branchpoint.experiments.runner import run_experiment

    out: dict[str, list[dict]] = {}
    for profile in ("instruct", "runs_past_search"):
        spec = ExperimentSpec(
            name=f"tagged-{profile}",
            questions=QuestionsSpec(limit=6),
            model=ModelSpec(
                provider="sim",
                name="sim",  # one served name: the same requests, the same draws
                style="chat",
                temperature=0.6,
                seed=1,
                max_tokens=48,
                sim=SimServerSpec(profile=profile, latency_scale=0.0),
            ),
            agent=AgentSpec(policy="tagged", search_cap=2, protocol=protocol),
            retrieval=RetrievalSpec(default="bm", sources={"bm": BM25SourceSpec()}),
        )
        run_experiment(spec, tmp_path / profile, progress=False, log_requests=True)
        out[profile] = [json.loads(x) for x in (tmp_path / profile / "executions.jsonl").read_text().splitlines()]
    plain, runs_on = out["instruct"], out["runs_past_search"]
    assert sum(r["search_calls"] for r in runs_on) > 0 and not any(r["status"] == "length" for r in runs_on)
    assert [r["status"] for r in runs_on] == [r["status"] for r in plain]
    assert [r["final_answer"] for r in runs_on] == [r["final_answer"] for r in plain]  # same decisions
    assert [r["output_tokens"] for r in runs_on] == [r["output_tokens"] for r in plain]  # nothing past the stop
    queries = [s["query"] for r in runs_on for s in r["steps"] if s["kind"] == "search"]
    assert queries and not any("<information>" in q or "</search>" in q for q in queries)
    turns = [s["raw"] for r in runs_on for s in r["steps"] if s.get("action") == "search"]
    assert turns and all(t.endswith("</search>") for t in turns)  # vLLM kept the stop string
    sent = [json.loads(x)["body"] for x in (tmp_path / "runs_past_search" / "requests.jsonl").read_text().splitlines()]
    assert all(b["stop"] and b["include_stop_str_in_output"] is True for b in sent)


def test_the_server_flags_at_their_defaults_leave_the_spec_dump_and_ids_unchanged() -> None:
    """Execution ids and fork seeds hash the spec's dump: the vLLM server flags added to
    `model.sim` are dumped only when set otherwise, so existing studies keep their ids and draws."""
    assert set(SimServerSpec().model_dump()) == {
        "profile",
        "questions",
        "seed",
        "latency_scale",
        "capacity",
        "host",
        "port",
        "startup_timeout_s",
    }
    flags = SimServerSpec(reasoning_parser=None, enable_auto_tool_choice=False).model_dump()
    assert flags["reasoning_parser"] is None and flags["enable_auto_tool_choice"] is False
    assert "tool_call_parser" not in flags
