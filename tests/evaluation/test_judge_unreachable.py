"""An LLM judge whose server cannot be reached fails at once with one line naming the URL and
what to check (no traceback, no transport retries spent on every item)."""

from __future__ import annotations

import socket
import time

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app

runner = CliRunner()

SCRIPTED = {
    "name": "judge-unreachable",
    "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
    "model": {"provider": "scripted", "script": ['answer", "text": "I don\'t know"}']},
    "agent": {"policy": "constrained", "search": False},
}


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_judge_server_is_one_fast_line(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SCRIPTED), encoding="utf-8")
    out = tmp_path / "run"
    assert runner.invoke(app, ["run", str(spec), "--out", str(out), "--no-progress"]).exit_code == 0
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    result = runner.invoke(app, ["evaluate", str(out), "--judge", "llm", "--judge-model", "m", "--judge-base-url", url])
    elapsed = time.monotonic() - started
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and url in lines[0] and "cannot connect" in lines[0] and "running" in lines[0], lines
    assert elapsed < 15.0, f"took {elapsed:.1f} s"  # each item spending its retries took 26 s
