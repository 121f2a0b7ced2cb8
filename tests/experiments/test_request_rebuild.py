"""Requests rebuilt from a run's checkpoints are the requests the run sent.

Each case runs one spec twice: once with `--log-requests` (the oracle: the bodies as they went to
the server) and once without; the second run's requests are rebuilt from its checkpoints
(`branchpoint requests rebuild`) and compared with the first run's, execution by execution and
request by request, as canonical JSON (so `1` and `1.0` differ as they do on the wire). The
simulated model is a real HTTP server in vLLM's wire format, so the logged bodies are the ones
the OpenAI-compatible client sent; the scripted model covers the client that logs the request
it is given, with a malformed reply retried under the grammar. Fork branches (THINK, SEARCH,
STOP) of both runs are rebuilt and compared too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.request_rebuild import rebuild_requests
from branchpoint.experiments.runner import run_experiment
from branchpoint.experiments.spec import AgentSpec, BM25SourceSpec, ExperimentSpec, QuestionsSpec, RetrievalSpec
from branchpoint.models import ModelSpec
from branchpoint.models.request_log import read_requests
from branchpoint.traces import (
    EXECUTIONS_FILE,
    FORKS_FILE,
    REBUILT_REQUESTS_FILE,
    REQUESTS_FILE,
    SPEC_FILE,
    read_records,
)
from tests.sim.models import sim_instruct_model

EVIDENCE_WORDS = 12
#: Every built-in policy style and prompt variant: completion (constrained) and chat (native,
#: tagged in both protocols, no_search), with the prompt variants that change the messages.
SWEEP = {
    "agent.policy": ["constrained", "native", "tagged", "no_search"],
    "agent.prompt": ["abstention", "self_eval", "plain"],
}


def sim_spec(name: str, sweep: dict[str, list[Any]], policy: str = "native", protocol: str = "chat") -> ExperimentSpec:
    return ExperimentSpec(
        name=name,
        questions=QuestionsSpec(limit=3),
        model=sim_instruct_model(),
        agent=AgentSpec(policy=policy, search_cap=2, evidence_words=EVIDENCE_WORDS, protocol=protocol),
        retrieval=RetrievalSpec(default="bm", sources={"bm": BM25SourceSpec()}),
        sweep=sweep,
    )


def scripted_spec() -> ExperimentSpec:
    script = ["not json at all", 'search", "text": "capital city"}', 'answer", "text": "Canberra"}']
    return ExperimentSpec(
        name="scripted",
        questions=QuestionsSpec(limit=2),
        model=ModelSpec(provider="scripted", name="scripted-base", script=script, max_tokens=32),
        agent=AgentSpec(policy="constrained", search_cap=2, evidence_words=EVIDENCE_WORDS),
        retrieval=RetrievalSpec(default="bm", sources={"bm": BM25SourceSpec()}),
    )


def twin_runs(base: Path, spec: ExperimentSpec, fork: bool) -> tuple[Path, Path]:
    """The spec run with --log-requests into base/logged and without into base/bare (same
    execution ids); with `fork`, a THINK / SEARCH / STOP study of each, logged and bare."""
    logged, bare = base / "logged", base / "bare"
    run_experiment(spec, logged, progress=False, log_requests=True)
    run_experiment(spec, bare, progress=False)
    if fork:
        plan = ForkPlan(actions=["THINK", "SEARCH", "STOP"], repeats=1, search_budget=1, concurrency=2)
        fork_run(logged, plan, progress=False, log_requests=True)
        fork_run(bare, plan, progress=False)
    return logged, bare


def by_execution(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each execution's requests, in order, as canonical JSON of (endpoint, body)."""
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row["execution_id"], []).append(json.dumps([row["endpoint"], row["body"]], sort_keys=True))
    return out


def branch_names(run: Path) -> dict[str, str]:
    """A fork branch's id -> a name that is the same in both twins (a branch id contains its
    parent's checkpoint id, which is made at run time): parent, boundary, action, repeat."""
    if not (run / FORKS_FILE).is_file():
        return {}
    return {
        b.execution_id: f"{b.parent.execution_id}@{b.parent.boundary}/{b.branch}#{b.repeat}"
        for b in read_records(run / FORKS_FILE)
        if b.parent is not None
    }


def assert_same_requests(logged: Path, bare: Path) -> dict[str, list[str]]:
    """Every execution's and branch's rebuilt requests equal the logged ones, one by one."""
    names_sent, names_rebuilt = branch_names(logged), branch_names(bare)
    sent = {names_sent.get(k, k): v for k, v in by_execution(read_requests(logged / REQUESTS_FILE)).items()}
    rebuilt = {names_rebuilt.get(k, k): v for k, v in by_execution(read_requests(bare / REBUILT_REQUESTS_FILE)).items()}
    assert sent and set(rebuilt) == set(sent)
    for eid, bodies in sent.items():
        assert len(rebuilt[eid]) == len(bodies), eid
        for k, (a, b) in enumerate(zip(bodies, rebuilt[eid], strict=True)):
            assert b == a, f"execution {eid}, request {k + 1}: rebuilt\n{b}\n!= sent\n{a}"
    return rebuilt


@pytest.fixture(scope="module")
def sim_twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return twin_runs(tmp_path_factory.mktemp("rebuild-sim"), sim_spec("policies", SWEEP), fork=True)


def test_rebuilt_requests_equal_the_logged_ones_for_every_policy_and_prompt(sim_twins: tuple[Path, Path]) -> None:
    logged, bare = sim_twins
    assert not (bare / REQUESTS_FILE).exists()
    summary = rebuild_requests(bare)
    executions = read_records(bare / EXECUTIONS_FILE)
    branches = read_records(bare / FORKS_FILE)
    assert summary.failed == {} and summary.unverified == []
    assert summary.executions == len(executions) + len(branches)
    assert summary.verified == len(executions)  # every original execution hashes to what it sent
    rebuilt = assert_same_requests(logged, bare)
    conditions = {json.dumps(r.condition, sort_keys=True) for r in executions if r.execution_id in rebuilt}
    assert len(conditions) == 12  # each policy × prompt variant was rebuilt and compared
    names = branch_names(bare)
    assert {b.branch for b in branches if names[b.execution_id] in rebuilt} == {"THINK", "SEARCH", "STOP"}
    endpoints = {row["endpoint"] for row in read_requests(bare / REBUILT_REQUESTS_FILE)}
    assert endpoints == {"chat", "completions"}


def test_rebuilt_lines_are_marked_and_the_evidence_is_clipped_as_sent(sim_twins: tuple[Path, Path]) -> None:
    _, bare = sim_twins
    rebuild_requests(bare)
    rows = read_requests(bare / REBUILT_REQUESTS_FILE)
    assert all(set(r) == {"time", "execution_id", "endpoint", "body", "rebuilt"} for r in rows)
    assert all(r["rebuilt"]["from"] == "checkpoint" and r["rebuilt"]["node"] in ("decide", "answer") for r in rows)
    records = {r.execution_id: r for r in read_records(bare / EXECUTIONS_FILE)}
    checked = 0
    for rec in records.values():
        docs = [d for s in rec.steps if s.kind == "search" for d in s.retrieved if len(d.text.split()) > EVIDENCE_WORDS]
        if not docs or rec.condition["agent.policy"] != "native":
            continue
        mine = [json.dumps(r["body"]) for r in rows if r["execution_id"] == rec.execution_id]
        words = docs[0].text.split()
        assert any(json.dumps(" ".join(words[:EVIDENCE_WORDS]))[1:-1] in body for body in mine)
        assert not any(json.dumps(docs[0].text)[1:-1] in body for body in mine)  # clipped, as the policy sent it
        checked += 1
    assert checked


def test_searchr1_protocol_requests_are_rebuilt(tmp_path: Path) -> None:
    spec = sim_spec("searchr1", {}, policy="tagged", protocol="searchr1")
    logged, bare = twin_runs(tmp_path, spec, fork=False)
    summary = rebuild_requests(bare)
    assert summary.failed == {} and summary.verified == summary.executions > 0
    assert_same_requests(logged, bare)


def test_scripted_model_requests_with_a_grammar_retry_are_rebuilt(tmp_path: Path) -> None:
    logged, bare = twin_runs(tmp_path, scripted_spec(), fork=False)
    summary = rebuild_requests(bare)
    assert summary.failed == {} and summary.verified == summary.executions == 2
    rebuilt = assert_same_requests(logged, bare)
    grammars = [json.loads(b)[1].get("grammar") for bodies in rebuilt.values() for b in bodies]
    assert any(grammars) and not all(grammars)  # the malformed first reply was retried with the grammar


def test_a_rebuild_that_builds_other_requests_is_not_verified(sim_twins: tuple[Path, Path], tmp_path: Path) -> None:
    """The fingerprint check is honest: rebuilt under a spec whose passages are clipped longer
    than the run's, the executions that saw evidence no longer match what they sent."""
    _, bare = sim_twins
    run = tmp_path / "run"
    shutil.copytree(bare, run)
    spec = yaml.safe_load((run / SPEC_FILE).read_text())
    spec["agent"]["evidence_words"] = 200
    (run / SPEC_FILE).write_text(yaml.safe_dump(spec))
    summary = rebuild_requests(run)
    searched = {r.execution_id for r in read_records(run / EXECUTIONS_FILE) if r.search_calls > 0}
    assert searched and set(summary.unverified) >= {e for e in searched if e not in summary.failed}


def test_logged_executions_are_left_to_requests_jsonl(sim_twins: tuple[Path, Path]) -> None:
    logged, _ = sim_twins
    skipped = rebuild_requests(logged, out=logged / "again.jsonl")
    assert skipped.executions == 0 and skipped.logged > 0
    summary = rebuild_requests(logged, include_logged=True, out=logged / "again.jsonl")
    assert summary.failed == {} and summary.executions == skipped.logged
    # rebuilt in the run that logged them, they are its requests.jsonl, line for line
    assert by_execution(read_requests(logged / "again.jsonl")) == by_execution(read_requests(logged / REQUESTS_FILE))


def test_cli_rebuilds_and_refuses_what_is_not_a_run(sim_twins: tuple[Path, Path], tmp_path: Path) -> None:
    _, bare = sim_twins
    result = CliRunner().invoke(app, ["requests", "rebuild", str(bare)])
    assert result.exit_code == 0, result.output
    assert "verified against the recorded request fingerprint" in result.output
    assert str(bare / REBUILT_REQUESTS_FILE) in result.output.replace("\n", "")
    result = CliRunner().invoke(app, ["requests", "rebuild", str(tmp_path)])
    assert result.exit_code == 2 and "not a run directory" in result.output
    result = CliRunner().invoke(app, ["requests", "rebuild", str(bare), "--server-kind", "sglang"])
    assert result.exit_code == 2 and "--server-kind 'sglang'" in result.output
