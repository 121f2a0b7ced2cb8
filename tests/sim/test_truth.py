"""The simulator's truth equals what its behaviour does: exact values against Monte Carlo."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from branchpoint.agents import prompts
from branchpoint.agents.protocols import decision_grammar, parse_json_decision
from branchpoint.datasets import load_questions
from branchpoint.errors import InputError
from branchpoint.sim.behaviour import generate, is_success, request_rng, reshape
from branchpoint.sim.observe import observe_completion
from branchpoint.sim.profile import load_profile
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.truth import AgentModel, TruthModel

QUESTIONS = load_questions("demo")
BANK = QuestionBank(QUESTIONS)
CORPUS = {
    "capital": [{"doc_id": "d1", "title": "Canberra", "text": "Canberra is the capital city of Australia."}],
    "sydney": [{"doc_id": "d2", "title": "Sydney", "text": "Sydney is the largest city in Australia."}],
}


def toy_search(query: str, source: str) -> list[dict[str, Any]]:
    """Deterministic retrieval: refined queries (with a passage title) find the capital passage."""
    return CORPUS["capital"] if ("Sydney" in query or source == "alt") else CORPUS["sydney"]


def test_reshape_temperature_and_top_p() -> None:
    p = {"a": 0.5, "b": 0.3, "c": 0.2}
    assert reshape(p, 0.0) == {"a": 1.0}
    assert reshape(p, 1.0) == pytest.approx(p)
    sharp = reshape(p, 0.5)
    assert sharp["a"] > 0.5 and sum(sharp.values()) == pytest.approx(1.0)
    assert set(reshape(p, 1.0, top_p=0.75)) == {"a", "b"}


def test_same_request_same_reply_and_seeds_differ() -> None:
    prof = load_profile("instruct")
    prompt = prompts.fewshot_prompt("What is the capital of Australia?", [], True, 60)
    body = {"prompt": prompt, "seed": 7, "temperature": 0.8}
    rng = np.random.default_rng(0)
    replies = {
        generate(prof, observe_completion(prof, BANK, body), body, request_rng(body, rng), 48).text for _ in range(5)
    }
    assert len(replies) == 1
    many = {
        generate(
            prof,
            observe_completion(prof, BANK, {**body, "seed": s}),
            {**body, "seed": s},
            request_rng({**body, "seed": s}, rng),
            48,
        ).kind
        for s in range(60)
    }
    assert {"search", "answer"} <= many


def _forced_success(prof: Any, state: dict[str, Any], seeds: int, temperature: float) -> float:
    q = BANK.lookup(state["question"])
    ok = 0
    for s in range(seeds):
        prompt = prompts.fewshot_prompt(state["question"], state["evidence"], True, 60)
        body = {
            "prompt": prompt,
            "seed": s,
            "temperature": temperature,
            "top_p": 0.95,
            "structured_outputs": {"grammar": decision_grammar(False)},
        }
        reply = generate(
            prof, observe_completion(prof, BANK, body), body, request_rng(body, np.random.default_rng()), 48
        )
        from branchpoint.sim.behaviour import completion_text

        d = parse_json_decision(completion_text(reply), allow_search=False)
        ok += bool(d) and is_success(q, d[1])
    return ok / seeds


def _loop_success(prof: Any, state: dict[str, Any], budget: int, seeds: int, temperature: float) -> float:
    """The constrained policy's SEARCH continuation, replayed with the behaviour functions."""
    from branchpoint.sim.behaviour import completion_text

    q = BANK.lookup(state["question"])
    wins = 0
    for s in range(seeds):
        evidence, k, cap = list(state["evidence"]), state["searches"], state["searches"] + budget
        final = None
        while True:
            if k >= cap:
                prompt = prompts.fewshot_prompt(q.question, evidence, True, 60)
                body = {
                    "prompt": prompt,
                    "seed": s,
                    "temperature": temperature,
                    "top_p": 0.95,
                    "structured_outputs": {"grammar": decision_grammar(False)},
                }
                d = parse_json_decision(
                    completion_text(
                        generate(
                            prof,
                            observe_completion(prof, BANK, body),
                            body,
                            request_rng(body, np.random.default_rng()),
                            48,
                        )
                    ),
                    False,
                )
                final = d[1] if d else None
                break
            prompt = prompts.fewshot_prompt(q.question, evidence, True, 60)
            body = {"prompt": prompt, "seed": s, "temperature": temperature, "top_p": 0.95}
            d = parse_json_decision(
                completion_text(
                    generate(
                        prof, observe_completion(prof, BANK, body), body, request_rng(body, np.random.default_rng()), 48
                    )
                ),
                True,
            )
            if d is None:
                body = {**body, "structured_outputs": {"grammar": decision_grammar(True)}}
                d = parse_json_decision(
                    completion_text(
                        generate(
                            prof,
                            observe_completion(prof, BANK, body),
                            body,
                            request_rng(body, np.random.default_rng()),
                            48,
                        )
                    ),
                    True,
                )
            if d is None:
                break
            if d[0] == "answer":
                final = d[1]
                break
            evidence += toy_search(d[1], "main")
            k += 1
        wins += final is not None and is_success(q, final)
    return wins / seeds


@pytest.mark.parametrize("question", ["What is the capital of Australia?", "Why is Sydney the capital of Australia?"])
def test_truth_equals_monte_carlo_of_the_behaviour(question: str) -> None:
    prof = load_profile("over_searching")
    agent = AgentModel(style="completion", temperature=0.7, top_p=0.95)
    truth = TruthModel(prof, BANK, agent, toy_search)
    n = 800
    for evidence in ([], CORPUS["sydney"]):
        state = {
            "question": question,
            "evidence": evidence,
            "searches": len(evidence) // 1,
            "boundary": "initial",
            "source": "main",
        }
        for action, mc in (
            ("THINK", _forced_success(prof, state, n, 0.7)),
            ("SEARCH", _loop_success(prof, state, 2, n, 0.7)),
        ):
            p = truth.continuation(state, action, search_budget=2).p
            se = math.sqrt(max(p * (1 - p), 1e-4) / n)
            assert abs(mc - p) <= 4.5 * se, (question, len(evidence), action, mc, p)


def test_pending_query_and_switch_run_the_pending_query_first() -> None:
    prof = load_profile("instruct")
    truth = TruthModel(prof, BANK, AgentModel(style="native", temperature=0.6), toy_search)
    state = {
        "question": "What is the capital of Australia?",
        "evidence": [],
        "searches": 0,
        "boundary": "pending_query",
        "pending": {"action": "search", "text": "capital"},
        "source": "main",
    }
    same = truth.continuation(state, "SEARCH", search_budget=1)
    switched = truth.continuation(state, "SWITCH", search_budget=1, switch_source="alt")
    stop = truth.continuation(state, "STOP")
    assert same.searches == switched.searches == 1.0
    assert switched.p > same.p  # alt finds the gold-bearing Canberra passage, main does not
    assert stop.p == pytest.approx(truth.continuation({**state, "boundary": "initial"}, "THINK").p)


def test_temperature_zero_truth_is_zero_or_one() -> None:
    prof = load_profile("instruct")
    truth = TruthModel(prof, BANK, AgentModel(style="completion", temperature=0.0), toy_search)
    for q in QUESTIONS[:10]:
        v = truth.natural(q, 3, "main")
        assert v.p in (0.0, 1.0)


def test_profile_file_extends_a_builtin_and_errors_name_the_field(tmp_path: Any) -> None:
    good = tmp_path / "mine.yaml"
    good.write_text("extends: instruct\nknowledge: {gold_lift: 0.2}\n")
    prof = load_profile(good)
    assert prof.name == "mine" and prof.knowledge.gold_lift == 0.2 and prof.knowledge.prior == 0.3
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: instruct\nknowledge: {gold_lift: 3}\n")
    with pytest.raises(InputError, match="gold_lift"):
        load_profile(bad)
    with pytest.raises(InputError, match="neither a built-in"):
        load_profile("no-such-profile")


def test_truth_endpoint_answers_over_http(tmp_path: Any) -> None:
    from starlette.testclient import TestClient

    from branchpoint.sim.server import build_state, create_app

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nmodel: {provider: sim, temperature: 0.6}\nretrieval: {default: bm, sources: {bm: {kind: bm25}}}\n"
    )
    client = TestClient(create_app(build_state("instruct", latency_scale=0.0, spec=str(spec))))
    state = {
        "question": "What is the capital of Australia?",
        "evidence": [],
        "searches": 0,
        "boundary": "initial",
        "source": "bm",
    }
    body = client.post("/v1/sim/truth", json={"state": state, "actions": ["THINK", "SEARCH"]}).json()
    assert 0 <= body["values"]["THINK"]["p"] <= 1 and body["values"]["SEARCH"]["expected_searches"] > 0
    assert body["values"]["SEARCH"]["p"] > body["values"]["THINK"]["p"]  # the demo corpus has the answer
    # the default policy is `constrained` (completion endpoint): exact token expectations come too
    assert body["values"]["SEARCH"]["expected_input_tokens"] > body["values"]["THINK"]["expected_input_tokens"] > 0
    bad = client.post("/v1/sim/truth", json={"state": {"question": "not in the set"}})
    assert bad.status_code == 400
    array = client.post("/v1/sim/truth", json=[state])
    assert array.status_code == 400 and "must be a JSON object" in array.json()["error"]["message"]
    none = TestClient(create_app(build_state("instruct", latency_scale=0.0))).post(
        "/v1/sim/truth", json={"state": state}
    )
    assert none.status_code == 501
