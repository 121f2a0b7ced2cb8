"""The real embedded llama.cpp server dies with `branchpoint run`, however the run is killed
(SIGTERM, SIGINT, SIGKILL): no orphan server left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, wait_gone

pytestmark = pytest.mark.integration

SPEC = {
    "name": "orphans",
    "questions": {"path": "demo"},
    "model": {"provider": "embedded", "name": "gemma-3-270m", "style": "completion", "max_tokens": 24},
    "agent": {"policy": "constrained", "search": False},
}


def llama_children(parent: int) -> list[int]:
    """Pids of llama.cpp servers whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("PPid:")), 0)
        if ppid == parent and b"llama_cpp.server" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["TERM", "INT", "KILL"])
def test_llamacpp_server_dies_with_the_run(tmp_path, sig):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: run `make install-embedded`")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    cmd = [sys.executable, "-m", "branchpoint.cli", "run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"]
    run = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not (servers := llama_children(run.pid)) or not (tmp_path / "run" / "executions.jsonl").is_file():
            assert run.poll() is None, run.stderr.read().decode()
            assert time.monotonic() < deadline, "the llama.cpp server did not start and answer"
            time.sleep(0.1)
        run.send_signal(sig)
        run.wait(timeout=60)
        assert all(wait_gone(pid, 5.0) for pid in servers), f"llama.cpp server outlived `run` killed by {sig.name}"
    finally:
        if run.poll() is None:
            os.kill(run.pid, signal.SIGKILL)
            run.wait()
