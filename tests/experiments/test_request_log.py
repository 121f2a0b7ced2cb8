"""`--log-requests`: every request body goes to RUN_DIR/requests.jsonl, tagged with the execution
or branch that sent it, and the API key is never written."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments import RunStore
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.models.request_log import read_requests
from tests.servers.agent_server import agent_server

KEY = "sk-branchpoint-test-0123456789"


def test_run_and_fork_log_every_request_body_without_the_key(tmp_path, isolated_cache, monkeypatch):
    monkeypatch.setenv("BP_TEST_KEY", KEY)
    with agent_server() as server:
        spec = tmp_path / "spec.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "name": "logged",
                    "questions": {"path": "demo", "categories": ["answerable"], "limit": 2},
                    "model": {
                        "provider": "openai",
                        "base_url": server.base_url,
                        "name": "m",
                        "style": "chat",
                        "api_key_env": "BP_TEST_KEY",
                        "max_tokens": 32,
                    },
                    "agent": {"policy": "native", "search_cap": 1, "top_k": 2},
                    "sweep": {},
                }
            )
        )
        run_dir = tmp_path / "run"
        runner = CliRunner()
        result = runner.invoke(app, ["run", str(spec), "--out", str(run_dir), "--log-requests", "--no-progress"])
        assert result.exit_code == 0, result.output
        logged = read_requests(run_dir / "requests.jsonl")
        assert len(logged) == len([b for p, b in server.requests if p.endswith("/chat/completions")])
        assert [entry["body"] for entry in logged] == server.bodies("/v1/chat/completions")  # exactly what was sent
        ids = {r.execution_id for r in RunStore(run_dir).records()}
        assert {entry["execution_id"] for entry in logged} == ids
        result = runner.invoke(
            app,
            [
                "fork",
                str(run_dir),
                "--boundaries",
                "after_search_k",
                "--actions",
                "THINK",
                "--repeats",
                "2",
                "--log-requests",
                "--no-progress",
            ],
        )
        assert result.exit_code == 0, result.output
    logged = read_requests(run_dir / "requests.jsonl")  # appended, not rewritten
    branches = {r.execution_id: r for r in fork_records(run_dir)}
    forked = [e for e in logged if e["execution_id"] in branches]
    assert len(forked) == len(branches) == 4 and len(logged) > len(forked)
    for entry in forked:  # each branch's request carries its checkpoint's evidence and its own seed
        assert entry["body"]["seed"] == branches[entry["execution_id"]].sampling["seed"]
        assert any(m["role"] == "tool" and m["content"].startswith("Doc 1(") for m in entry["body"]["messages"])
    text = (run_dir / "requests.jsonl").read_text()
    assert KEY not in text and "Bearer" not in text
