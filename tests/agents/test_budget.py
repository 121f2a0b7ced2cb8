"""Budget disclosure and the token budget, end to end on the simulated model (requests as the
server received them, `--log-requests`), and their accounting in metrics.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.agents import prompts
from branchpoint.cli import app
from branchpoint.evaluation.cost import MetricsConfig
from branchpoint.evaluation.metrics import compute_metrics
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.spec.sections import AgentSpec
from branchpoint.sim.behaviour import search_prob
from branchpoint.sim.observe import observe_chat, observe_completion
from branchpoint.sim.passages import features
from branchpoint.sim.profile import BUILTIN_PROFILES
from branchpoint.sim.question_set import QuestionBank
from branchpoint.traces import ExecutionRecord, Judgment

#: A simulated model that searches until the cap (no passage talks it out of searching).
EAGER = {"extends": "instruct", "search": {"base": 3.0, "per_passage": 0.0, "gold_shown": 0.0}}
CAP = 3
LEFT = re.compile(r"Searches left: (\d+) of (\d+)\.")

#: (policy, prompt variant, protocol): every policy style, several prompt variants, searchr1.
CASES = [
    ("constrained", "abstention", "chat"),
    ("native", "plain", "chat"),
    ("native", "fewshot", "chat"),
    ("native", "self_eval", "chat"),
    ("tagged", "abstention", "chat"),
    ("tagged", "fewshot", "chat"),
    ("tagged", "abstention", "searchr1"),
    ("no_search", "abstention", "chat"),
    ("no_search", "plain", "chat"),
]


def write_spec(root: Path, policy: str, prompt: str, protocol: str, **agent: object) -> Path:
    (root / "eager.yaml").write_text(yaml.safe_dump(EAGER))
    style = "completion" if policy == "constrained" else "chat"
    data = {
        "name": "budget",
        "questions": {"path": "demo", "categories": ["answerable"], "limit": 1},
        "model": {
            "provider": "sim",
            "name": "sim",
            "style": style,
            "max_tokens": 48,
            "sim": {"profile": str(root / "eager.yaml"), "latency_scale": 0},
        },
        "agent": {
            "policy": policy,
            "search_cap": CAP,
            "top_k": 2,
            **({"prompt": prompt} if prompt != "abstention" else {}),
            **({"protocol": protocol} if protocol != "chat" else {}),
            **agent,
        },
        "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
    }
    path = root / f"{policy}-{prompt}-{protocol}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(spec: Path, out: Path) -> tuple[ExecutionRecord, list[dict]]:
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--log-requests", "--no-progress"])
    assert result.exit_code == 0, result.output
    [line] = (out / "executions.jsonl").read_text().splitlines()
    bodies = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    return ExecutionRecord.model_validate_json(line), [b.get("body", b) for b in bodies]


def shown(body: dict) -> str:
    """Everything a request shows the model, as one text."""
    if "messages" in body:
        return "\n".join(str(m.get("content") or "") for m in body["messages"])
    return body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]


def current(body: dict) -> str:
    """What a request shows of the current state: a completion prompt's last block (the few-shot
    examples before it are fixed), or the whole chat."""
    text = shown(body)
    return text.rsplit("Question: ", 1)[-1] if "messages" not in body else text


def searches_before_each_call(record: ExecutionRecord) -> list[int]:
    """For each model call of the record, in order, the searches made before it."""
    out, k = [], 0
    for step in record.steps:
        if step.kind == "search":
            k += 1
        elif step.usage is not None:
            out.append(k)
    return out


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_every_step_disclosure_is_sent_and_counts_down(case, tmp_path, isolated_cache):
    policy, prompt, protocol = case
    spec = write_spec(tmp_path, policy, prompt, protocol, budget_disclosure="every_step", token_budget=5000)
    record, bodies = run(spec, tmp_path / "run")
    before = searches_before_each_call(record)
    assert len(bodies) == len(before)  # one request per model call, in order
    if policy == "no_search":  # nothing about searches; the token budget alone is disclosed
        assert all("search at most" not in shown(b) and not LEFT.search(shown(b)) for b in bodies)
        assert all("You may write at most 5000 tokens in all." in shown(b) for b in bodies)
        return
    assert record.search_calls == CAP and record.budget["forced_by"] == "search_cap"  # type: ignore[attr-defined]
    for body, k in zip(bodies, before):
        text = current(body)
        found = [int(left) for left, cap in LEFT.findall(text) if int(cap) == CAP]
        if "messages" in body:  # chat: one countdown after each search result, counting down
            assert found == [CAP - j for j in range(1, k + 1)], (k, found)
        else:  # completion: the current block's Budget line shows the budget left now
            assert found == [CAP - k], (k, text)
        self_eval = "messages" in body and body["messages"][-1].get("content") == prompts.SELF_EVAL_PROMPT
        if k == 0 and not self_eval:  # the limits, stated where the task is
            assert f"You may search at most {CAP} times and write at most 5000 tokens in all." in text


def test_hidden_sends_no_budget_and_start_states_the_cap_once(tmp_path, isolated_cache):
    hidden, hidden_bodies = run(write_spec(tmp_path, "native", "abstention", "chat"), tmp_path / "hidden")
    assert all("search at most" not in shown(b) and not LEFT.search(shown(b)) for b in hidden_bodies)
    assert "budget_disclosure" not in hidden.condition
    _, start_bodies = run(
        write_spec(tmp_path, "native", "abstention", "chat", budget_disclosure="start"), tmp_path / "start"
    )
    offered = [b for b in start_bodies if b.get("tools")]
    assert offered and all(shown(b).count(f"You may search at most {CAP} times in all.") == 1 for b in offered)
    assert not any(LEFT.search(shown(b)) for b in start_bodies)


@pytest.mark.parametrize(
    "case", [("constrained", "abstention", "chat"), ("native", "plain", "chat"), ("tagged", "abstention", "searchr1")]
)
def test_a_branch_is_told_what_its_parent_was_told(case, tmp_path, isolated_cache):
    """SEARCH branches (budget 1: their own cap is k + 1) send the parent's request at that step,
    countdown included: the disclosure is rebuilt from the saved state (the parent's cap)."""
    spec = write_spec(tmp_path, *case, budget_disclosure="every_step")
    run_dir = tmp_path / "run"
    record, parent = run(spec, run_dir)
    at = searches_before_each_call(record)
    plan = ForkPlan(actions=["SEARCH"], repeats=1, search_budget=1, concurrency=1)
    fork_run(run_dir, plan, progress=False, log_requests=True)
    bodies = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()][len(parent) :]
    bodies = [b.get("body", b) for b in bodies]
    checked = 0
    for branch in fork_records(run_dir):
        boundary = branch.parent.boundary
        if boundary == "pending_query":
            continue
        k = 0 if boundary == "initial" else int(boundary.rsplit("_", 1)[1])
        if k >= CAP:  # SEARCH is not legal past the cap's last search... nothing to compare
            continue
        mine = [b for b in bodies if b.get("seed") == branch.sampling["seed"]]
        want = parent[at.index(k)]
        assert shown(mine[0]) == shown(want), f"branch at {branch.parent.boundary} was told otherwise"
        checked += 1
    assert checked == CAP  # initial, after_search_1, after_search_2


@pytest.mark.parametrize("policy", ["constrained", "native", "tagged"])
def test_token_budget_forces_the_answer_and_records_why(policy, tmp_path, isolated_cache):
    spec = write_spec(tmp_path, policy, "abstention", "chat", token_budget=1)
    record, _ = run(spec, tmp_path / "run")
    kinds = [s.kind for s in record.steps]
    # the first decision spends the budget; its search runs; then the answer is forced
    assert kinds[:2] == ["decide", "search"] and kinds[2:] and set(kinds[2:]) == {"forced_answer"}, kinds
    assert record.status == "ok" and record.final_answer
    assert all(s.forced_by == "token_budget" for s in record.steps if s.kind == "forced_answer")  # type: ignore[attr-defined]
    budget = record.budget  # type: ignore[attr-defined]
    assert budget == {
        "search_cap": CAP,
        "searches": 1,
        "token_budget": 1,
        "tokens": record.output_tokens,
        "forced_by": "token_budget",
    }


def test_the_search_cap_is_recorded_as_the_reason(tmp_path, isolated_cache):
    record, _ = run(write_spec(tmp_path, "native", "abstention", "chat"), tmp_path / "run")
    assert [s.forced_by for s in record.steps if s.kind == "forced_answer"] == ["search_cap"]  # type: ignore[attr-defined]
    assert record.budget == {  # type: ignore[attr-defined]
        "search_cap": CAP,
        "searches": CAP,
        "token_budget": None,
        "tokens": None,
        "forced_by": "search_cap",
    }


def _record(i: int, correct: bool, budget: dict | None, out: int = 100) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id=f"e{i}",
        run_id="r",
        question_id=f"q{i}",
        question="?",
        answerable=True,
        gold_answers=["x"],
        output_tokens=out,
        input_tokens=400,
        search_calls=(budget or {}).get("searches", 0),
        judgments=[Judgment(judge="given", kind="answer", label="CORRECT" if correct else "INCORRECT")],
        **({"budget": budget} if budget is not None else {}),
    )


def _hand_checked() -> list:
    """Three executions with both budgets (searches 3, 1, 2 of 3; tokens 150, 260, 40 of 200) and
    one without any."""
    return [
        _record(
            0, True, {"search_cap": 3, "searches": 3, "token_budget": 200, "tokens": 150, "forced_by": "search_cap"}
        ),
        _record(
            1, False, {"search_cap": 3, "searches": 1, "token_budget": 200, "tokens": 260, "forced_by": "token_budget"}
        ),
        _record(2, True, {"search_cap": 3, "searches": 2, "token_budget": 200, "tokens": 40, "forced_by": None}),
        _record(3, True, {"search_cap": None, "searches": 0, "token_budget": None, "tokens": None, "forced_by": None}),
    ]


def test_budget_accounting_on_a_hand_checked_case():
    records = _hand_checked()
    m = compute_metrics(records, "given", MetricsConfig(bootstrap=0))
    budgets = m["budgets"]
    assert budgets["available"]
    cap = budgets["search_cap"]
    # searches 3 + 1 + 2 over 3 executions with a cap of 3 each (record 3 has no search cap)
    assert cap["n"] == 3 and cap["mean_limit"] == 3
    assert cap["mean_used"] == pytest.approx(2.0) and cap["use_share"] == pytest.approx(6 / 9)
    assert cap["hit_share"] == pytest.approx(1 / 3) and cap["forced_share"] == pytest.approx(1 / 3)
    tok = budgets["token_budget"]
    # tokens 150 + 260 + 40 against 200 each; one reached it (260), one was forced by it
    assert tok["n"] == 3 and tok["mean_used"] == pytest.approx(150.0)
    assert tok["use_share"] == pytest.approx(450 / 600) and tok["hit_share"] == pytest.approx(1 / 3)
    assert tok["forced_share"] == pytest.approx(1 / 3)
    # TPC itself: (4·100 + 0.25·4·400 + 500·6) / 3 correct
    assert m["tpc"] == pytest.approx((400 + 400 + 500 * 6) / 3)
    assert compute_metrics(records[3:], "given", MetricsConfig(bootstrap=0))["budgets"]["available"] is False


def test_the_simulator_reads_the_disclosed_budget_as_the_truth_assumes():
    """What the sim reads from a real prompt equals what the truth assumes (cap − k under
    every_step, the cap under start), and being told fewer searches are left lowers P(search)."""
    from branchpoint.datasets import load_questions
    from branchpoint.sim.truth import AgentModel

    profile = BUILTIN_PROFILES["instruct"]
    q = next(q for q in load_questions("demo") if q.answerable)
    bank = QuestionBank([q])
    docs = [{"doc_id": "d1", "title": "T", "text": "some text"}]
    for mode in ("start", "every_step"):
        agent = AgentModel(style="native", temperature=0.0, disclosure=mode, shown_cap=4)
        for k in range(3):
            state = {
                "question": q.question,
                "evidence": docs * k,
                "searches": k,
                "budget": {"disclosure": mode, "search_cap": 4, "token_budget": None},
                "transcript": [
                    {"kind": "search", "query": "x", "evidence_start": j, "evidence_count": 1, "turn": {}}
                    for j in range(k)
                ],
            }
            messages = prompts.chat_messages(state, tools=True, allow_search=True, evidence_words=60)
            body = {"messages": messages, "tools": [{"type": "function", "function": {"name": "search"}}]}
            assert observe_chat(profile, bank, body).searches_left == agent.searches_left(k, 4)
            prompt = prompts.fewshot_prompt(
                q.question, state["evidence"], True, 60, budget=prompts.fewshot_budget_line(state, True)
            )
            assert observe_completion(profile, bank, {"prompt": prompt}).searches_left == agent.searches_left(k, 4)
    f = features(q, [])
    assert (
        search_prob(profile, q, f, "none", 1)
        < search_prob(profile, q, f, "none", 4)
        < search_prob(profile, q, f, "none")
    )
    assert AgentModel(style="native", temperature=0.0).searches_left(0, 4) is None


def test_new_fields_leave_existing_fingerprints_alone():
    assert AgentSpec().model_dump() == AgentSpec(budget_disclosure="hidden", token_budget=None).model_dump()
    assert "budget_disclosure" not in AgentSpec().model_dump() and "token_budget" not in AgentSpec().model_dump()
    dumped = AgentSpec(budget_disclosure="every_step", token_budget=300).model_dump()
    assert dumped["budget_disclosure"] == "every_step" and dumped["token_budget"] == 300


def test_both_fields_are_sweepable():
    from branchpoint.experiments.spec import ExperimentSpec, expand_conditions

    spec = ExperimentSpec.model_validate(
        {"name": "s", "sweep": {"agent.budget_disclosure": ["hidden", "every_step"], "agent.token_budget": [None, 50]}}
    )
    conditions = expand_conditions(spec)
    assert [(c, s.agent.budget_disclosure, s.agent.token_budget) for c, s in conditions] == [
        ({"agent.budget_disclosure": d, "agent.token_budget": t}, d, t)
        for d in ("hidden", "every_step")
        for t in (None, 50)
    ]


def test_the_report_has_a_budgets_table_with_the_hand_checked_figures():
    from branchpoint.evaluation.metrics_file import as_metrics
    from branchpoint.evaluation.report_budgets import budgets_section

    records = _hand_checked()[:3]
    lines = "\n".join(budgets_section(as_metrics(compute_metrics(records, "given", MetricsConfig(bootstrap=0)))))
    rows = [line for line in lines.splitlines() if line.startswith("| ") and "---" not in line][1:]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert [c[1:] for c in cells] == [
        ["search cap (searches)", "3", "3.0", "2.00", "66.7", "33.3", "33.3"],
        ["token budget (generated tokens)", "3", "200.0", "150.00", "75.0", "33.3", "33.3"],
    ]
    assert (
        budgets_section(
            as_metrics(
                compute_metrics(
                    records[:0]
                    or [
                        _record(
                            3,
                            True,
                            {
                                "search_cap": None,
                                "searches": 0,
                                "token_budget": None,
                                "tokens": None,
                                "forced_by": None,
                            },
                        )
                    ],
                    "given",
                    MetricsConfig(bootstrap=0),
                )
            )
        )
        == []
    )
