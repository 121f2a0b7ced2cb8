"""`branchpoint models serve vllm`: the command line, the install check, and the managed process.

No vLLM here: tests/models/fake_vllm.py stands in for `vllm serve` (it answers /v1/models), put on
PATH as a `vllm` script so the real launcher lookup finds it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import branchpoint.models.vllm as vm
from branchpoint.cli import app
from branchpoint.errors import ModelServerError
from branchpoint.models.server import free_port
from branchpoint.models.vllm import VllmServeOptions, VllmServer, serve_until_stopped, spec_block, vllm_command
from tests.conftest import wait_gone

FAKE_VLLM = Path(__file__).with_name("fake_vllm.py")
REPO = Path(__file__).resolve().parents[2]
_real_find_spec = importlib.util.find_spec


def flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An environment without vLLM: no script beside Python, none on PATH, no module."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setattr(vm.sys, "executable", str(empty / "python"))
    monkeypatch.setenv("PATH", str(empty))

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "vllm" else _real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(vm.importlib.util, "find_spec", find_spec)


@pytest.fixture
def fake_vllm_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A `vllm` script on PATH that runs tests/models/fake_vllm.py; returns its path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = 'vllm'\n"
        f"runpy.run_path({str(FAKE_VLLM)!r}, run_name='__main__')\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return script


def fast(server: VllmServer) -> VllmServer:
    server.poll_s = 0.05
    server.stop_grace_s = 2.0
    return server


# --- the command line ---------------------------------------------------------------------------


def test_vllm_command_minimal() -> None:
    cmd = vllm_command(VllmServeOptions(model="Qwen/Qwen3-8B"))
    assert cmd == [
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "1",
    ]


def test_vllm_command_every_option() -> None:
    opts = VllmServeOptions(
        model="openai/gpt-oss-120b",
        host="0.0.0.0",
        port=9001,
        tensor_parallel=4,
        reasoning_parser="openai_gptoss",
        tool_call_parser="openai",
        max_model_len=32768,
        gpu_memory_utilization=0.85,
        served_model_name="gpt-oss",
        extra_args=["--enable-prefix-caching", "--seed", "0"],
    )
    cmd = vllm_command(opts, launcher=["/opt/venv/bin/vllm"], port=9002)
    assert cmd[:3] == ["/opt/venv/bin/vllm", "serve", "openai/gpt-oss-120b"]
    assert flag(cmd, "--host") == "0.0.0.0"
    assert flag(cmd, "--port") == "9002"  # the port actually chosen wins over the option
    assert flag(cmd, "--tensor-parallel-size") == "4"
    assert flag(cmd, "--reasoning-parser") == "openai_gptoss"
    assert flag(cmd, "--tool-call-parser") == "openai"
    assert flag(cmd, "--max-model-len") == "32768"
    assert flag(cmd, "--gpu-memory-utilization") == "0.85"
    assert flag(cmd, "--served-model-name") == "gpt-oss"
    assert cmd[-3:] == ["--enable-prefix-caching", "--seed", "0"]  # extra args last, verbatim
    assert cmd.count("--enable-auto-tool-choice") == 1


def test_tool_call_parser_turns_on_auto_tool_choice() -> None:
    without = vllm_command(VllmServeOptions(model="m", reasoning_parser="qwen3"))
    assert "--enable-auto-tool-choice" not in without and "--tool-call-parser" not in without
    with_parser = vllm_command(VllmServeOptions(model="m", tool_call_parser="hermes"))
    i = with_parser.index("--enable-auto-tool-choice")
    assert with_parser[i + 1 : i + 3] == ["--tool-call-parser", "hermes"]


def test_options_are_validated() -> None:
    for bad in ({"tensor_parallel": 0}, {"port": 0}, {"gpu_memory_utilization": 1.5}, {"max_model_len": 0}):
        with pytest.raises(ValueError):
            VllmServeOptions(model="m", **bad)


def test_spec_block_is_a_valid_model_section() -> None:
    import yaml

    from branchpoint.models.spec import ModelSpec

    opts = VllmServeOptions(model="/models/qwen3-8b", served_model_name="qwen3-8b")
    block = yaml.safe_load(spec_block(opts, "http://127.0.0.1:8000/v1"))
    spec = ModelSpec(**block["model"])
    assert (spec.provider, spec.base_url, spec.name, spec.style) == (
        "openai",
        "http://127.0.0.1:8000/v1",
        "qwen3-8b",
        "chat",
    )


# --- is vLLM installed? ---------------------------------------------------------------------------


def test_missing_vllm_says_how_to_install(no_vllm: None) -> None:
    with pytest.raises(ModelServerError, match=r"pip install 'branchpoint\[gpu\]'") as info:
        vm.vllm_launcher()
    assert "GPU machine" in str(info.value)
    with pytest.raises(ModelServerError, match="branchpoint"):
        VllmServer(VllmServeOptions(model="m")).start()


def test_launcher_prefers_the_script_beside_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    beside = tmp_path / "venv-bin"
    beside.mkdir()
    (beside / "vllm").write_text("#!/bin/sh\n")
    (beside / "vllm").chmod(0o755)
    monkeypatch.setattr(vm.sys, "executable", str(beside / "python"))
    assert vm.vllm_launcher() == [str(beside / "vllm")]


def test_launcher_falls_back_to_the_module(no_vllm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vm.importlib.util, "find_spec", lambda name, *a, **k: object())
    assert vm.vllm_launcher() == [vm.sys.executable, "-m", "vllm.entrypoints.cli.main"]


def test_launcher_finds_vllm_on_path(fake_vllm_on_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(vm.sys, "executable", str(tmp_path / "python"))
    assert vm.vllm_launcher() == [str(fake_vllm_on_path)]


# --- the managed process --------------------------------------------------------------------------


def test_start_health_and_stop_with_workers(
    fake_vllm_on_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_VLLM_WORKER", "1")
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("FAKE_VLLM_ARGV", str(tmp_path / "argv.json"))
    port = free_port()
    opts = VllmServeOptions(
        model="Qwen/Qwen3-8B", port=port, reasoning_parser="qwen3", tool_call_parser="hermes", startup_timeout_s=30
    )
    with fast(VllmServer(opts, log_path=tmp_path / "vllm.log")) as server:
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        models = httpx.get(f"{server.base_url}/models", timeout=5).json()
        assert models["data"][0]["id"] == "Qwen/Qwen3-8B"
        argv = json.loads((tmp_path / "argv.json").read_text())
        assert argv == vllm_command(opts, port=port)[1:]  # what the script got after `vllm`
        server_pid, worker_pid = map(int, (tmp_path / "pids").read_text().split())
        assert os.getpgid(worker_pid) == os.getpgid(server_pid) == server_pid  # its own group
        assert os.getpgid(server_pid) != os.getpgid(0)
    assert wait_gone(server_pid) and wait_gone(worker_pid)  # the worker went with the group
    assert "serving Qwen/Qwen3-8B" in (tmp_path / "vllm.log").read_text()
    server.stop()  # idempotent


def test_server_that_exits_reports_code_and_log_tail(
    fake_vllm_on_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_VLLM_EXIT", "3")
    server = fast(
        VllmServer(VllmServeOptions(model="m", port=free_port(), startup_timeout_s=30), log_path=tmp_path / "vllm.log")
    )
    with pytest.raises(ModelServerError) as info:
        server.start()
    message = str(info.value)
    assert "vLLM server exited with code 3" in message
    assert "CUDA out of memory" in message
    assert str(tmp_path / "vllm.log") in message


def test_server_ignoring_sigterm_is_killed_after_the_grace_period(
    fake_vllm_on_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_VLLM_IGNORE_TERM", "1")
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(tmp_path / "pids"))
    server = fast(VllmServer(VllmServeOptions(model="m", port=free_port(), startup_timeout_s=30)))
    server.stop_grace_s = 0.5
    server.start()
    pid = server.pid
    assert pid is not None
    start = time.monotonic()
    server.stop()
    assert 0.4 <= time.monotonic() - start < 5
    assert wait_gone(pid)
    assert server.log_path is not None
    server.log_path.unlink()


def test_busy_port_is_refused_before_starting(fake_vllm_on_path: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = VllmServer(VllmServeOptions(model="m", port=port), log_path=tmp_path / "vllm.log")
        with pytest.raises(ModelServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()
    assert server.pid is None and not (tmp_path / "vllm.log").exists()


def test_serve_until_stopped_stops_on_interrupt(fake_vllm_on_path: Path, tmp_path: Path) -> None:
    server = fast(
        VllmServer(VllmServeOptions(model="m", port=free_port(), startup_timeout_s=30), log_path=tmp_path / "vllm.log")
    )
    seen: list[Any] = []

    def ready(url: str) -> None:
        seen.append((url, server.pid))
        raise KeyboardInterrupt  # what Ctrl-C (or SIGTERM, translated) does while we wait

    serve_until_stopped(server, ready)
    ((url, pid),) = seen
    assert url == server.base_url
    assert wait_gone(pid)


def test_serve_until_stopped_reports_a_server_that_dies(
    fake_vllm_on_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_VLLM_EXIT_AFTER", "0.3")
    server = fast(
        VllmServer(VllmServeOptions(model="m", port=free_port(), startup_timeout_s=30), log_path=tmp_path / "vllm.log")
    )
    with pytest.raises(ModelServerError, match="vLLM server exited with code 1") as info:
        serve_until_stopped(server, lambda url: None)
    assert "serving m" in str(info.value)  # the log tail


# --- the command --------------------------------------------------------------------------------


def test_cli_dry_run_prints_the_command(no_vllm: None) -> None:
    result = CliRunner().invoke(
        app,
        [
            "models",
            "serve",
            "vllm",
            "--model",
            "Qwen/Qwen3-8B",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "hermes",
            "--max-model-len",
            "16384",
            "--tensor-parallel",
            "2",
            "--gpu-memory-utilization",
            "0.9",
            "--extra",
            "--enable-prefix-caching --dtype bfloat16",
            "--extra",
            "--seed=0",
            "--dry-run",
        ],
    )
    assert result.exit_code == 0, result.output
    assert shlex.split(result.output.strip()) == [
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "16384",
        "--gpu-memory-utilization",
        "0.9",
        "--reasoning-parser",
        "qwen3",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--enable-prefix-caching",
        "--dtype",
        "bfloat16",
        "--seed=0",
    ]


def test_cli_without_vllm_prints_one_line_and_exits_2(no_vllm: None) -> None:
    result = CliRunner().invoke(app, ["models", "serve", "vllm", "--model", "Qwen/Qwen3-8B"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "pip install 'branchpoint[gpu]'" in lines[0]
    assert "Traceback" not in result.output


def test_cli_serves_until_sigterm(fake_vllm_on_path: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "FAKE_VLLM_PIDS": str(tmp_path / "pids")}
    cmd = [
        sys.executable,
        "-m",
        "branchpoint.cli",
        "models",
        "serve",
        "vllm",
        "--model",
        "Qwen/Qwen3-8B",
        "--port",
        str(port),
        "--log",
        str(tmp_path / "vllm.log"),
        "--startup-timeout",
        "60",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        out: list[str] = []
        for line in proc.stdout:  # blocks until the server is ready and the block is printed
            out.append(line)
            if line.startswith("  # reasoning_effort"):
                break
        text = "".join(out)
        assert f"base_url: http://127.0.0.1:{port}/v1" in text, text + (proc.stderr.read() if proc.poll() else "")
        assert "name: Qwen/Qwen3-8B" in text
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200
        server_pid = int((tmp_path / "pids").read_text().split()[0])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert wait_gone(server_pid)
    assert proc.stderr is not None and "vLLM server stopped" in proc.stderr.read()
