"""The embedded llama.cpp server wrapper, with stand-in server processes (no model, no llama.cpp).

The integration test elsewhere starts the real server with the packaged GGUF; these tests check
the command line, the start-up checks, the health wait and the shutdown.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

import branchpoint.models.llamacpp as lc
from branchpoint.errors import ModelServerError
from branchpoint.models import EmbeddedServerSpec, LlamaCppServer
from tests.conftest import process_gone

_real_find_spec = importlib.util.find_spec

#: A stand-in for llama.cpp's server: answers GET /v1/models on the port given as argv[1].
FAKE_SERVER = textwrap.dedent(
    """
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path != "/v1/models":
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    print("fake server up", flush=True)
    HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
    """
)


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00")
    return path


@pytest.fixture
def llama_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend llama-cpp-python's server is installed, whatever this environment holds."""

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in ("llama_cpp", "uvicorn"):
            return object()
        return _real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(lc.importlib.util, "find_spec", find_spec)


def use_command(monkeypatch: pytest.MonkeyPatch, *argv: str, with_port: bool = False) -> None:
    def command(spec: EmbeddedServerSpec, gguf: Path, alias: str, port: int) -> list[str]:
        return [sys.executable, *argv, *([str(port)] if with_port else [])]

    monkeypatch.setattr(lc, "server_command", command)


# --- the command line and ports --------------------------------------------------------------


def test_server_command(tmp_path: Path) -> None:
    spec = EmbeddedServerSpec(n_ctx=4096, n_threads=2)
    cmd = lc.server_command(spec, tmp_path / "m.gguf", "gemma-3-270m", 8123)
    assert cmd[:3] == [sys.executable, "-m", "llama_cpp.server"]

    def value(flag: str) -> str:
        return cmd[cmd.index(flag) + 1]

    assert value("--host") == "127.0.0.1"
    assert value("--port") == "8123"
    assert value("--model") == str(tmp_path / "m.gguf")
    assert value("--model_alias") == "gemma-3-270m"
    assert value("--n_ctx") == "4096"
    assert value("--n_threads") == "2"
    assert value("--n_threads_batch") == "2"


def test_server_command_defaults_threads_to_all_cores(tmp_path: Path) -> None:
    cmd = lc.server_command(EmbeddedServerSpec(), tmp_path / "m.gguf", "a", 1)
    assert cmd[cmd.index("--n_threads") + 1] == str(os.cpu_count() or 1)
    assert cmd[cmd.index("--n_ctx") + 1] == "2048"


def test_free_port_is_bindable() -> None:
    port = lc.free_port()
    assert 0 < port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))


def test_base_url_before_start_is_an_error(gguf: Path) -> None:
    with pytest.raises(ModelServerError, match="not started"):
        _ = LlamaCppServer(EmbeddedServerSpec(gguf=str(gguf)), alias="m").base_url


# --- start-up checks ----------------------------------------------------------------------------


def test_missing_llama_cpp_says_how_to_install(monkeypatch: pytest.MonkeyPatch, gguf: Path) -> None:
    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "llama_cpp" else _real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(lc.importlib.util, "find_spec", find_spec)
    with pytest.raises(ModelServerError, match="make install-embedded"):
        LlamaCppServer(EmbeddedServerSpec(gguf=str(gguf)), alias="m").start()


def test_missing_gguf_names_the_path(llama_installed: None, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(ModelServerError, match="file not found") as info:
        LlamaCppServer(EmbeddedServerSpec(gguf=str(missing)), alias="m").start()
    assert str(missing) in str(info.value)


def test_server_that_exits_reports_code_and_log_tail(
    llama_installed: None, monkeypatch: pytest.MonkeyPatch, gguf: Path, tmp_path: Path
) -> None:
    use_command(monkeypatch, "-c", "import sys; print('boom'); sys.exit(3)")
    log = tmp_path / "logs" / "server.log"
    server = LlamaCppServer(EmbeddedServerSpec(gguf=str(gguf), startup_timeout_s=30), alias="m", log_path=log)
    with pytest.raises(ModelServerError) as info:
        server.start()
    message = str(info.value)
    assert "code 3" in message
    assert "boom" in message
    assert str(log) in message
    assert log.read_text().strip().splitlines()[-1] == "boom"
    server.stop()  # nothing left to stop: still fine
    # a second server on the same log (a fork after the run) appends: the first one's output stays
    with pytest.raises(ModelServerError):
        LlamaCppServer(EmbeddedServerSpec(gguf=str(gguf), startup_timeout_s=30), alias="m", log_path=log).start()
    text = log.read_text()
    assert text.count("boom") == 2 and text.count("=== branchpoint:") == 2


def test_server_that_never_answers_times_out_and_is_killed(
    llama_installed: None, monkeypatch: pytest.MonkeyPatch, gguf: Path
) -> None:
    use_command(monkeypatch, "-c", "import time; print('loading', flush=True); time.sleep(60)")
    procs: list[Any] = []
    real_popen = lc.subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        procs.append(real_popen(*args, **kwargs))
        return procs[-1]

    monkeypatch.setattr(lc.subprocess, "Popen", popen)
    server = LlamaCppServer(EmbeddedServerSpec(gguf=str(gguf), startup_timeout_s=1.0), alias="m")
    with pytest.raises(ModelServerError, match="did not answer"):
        server.start()
    (proc,) = procs
    assert proc.poll() is not None
    assert server.log_path is not None and server.log_path.is_file()
    server.log_path.unlink()


# --- a healthy stand-in server --------------------------------------------------------------------


def test_fake_server_becomes_healthy_and_stops(
    llama_installed: None, monkeypatch: pytest.MonkeyPatch, gguf: Path, tmp_path: Path
) -> None:
    use_command(monkeypatch, "-c", FAKE_SERVER, with_port=True)
    server = LlamaCppServer(
        EmbeddedServerSpec(gguf=str(gguf), startup_timeout_s=30), alias="m", log_path=tmp_path / "s.log"
    )
    url = server.start()
    try:
        assert server.port is not None
        assert url == server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert httpx.get(f"{url}/models", timeout=5).json()["data"][0]["id"] == "m"
        proc = server._proc
        assert proc is not None and proc.poll() is None
    finally:
        server.stop()
    assert proc.poll() is not None
    assert process_gone(proc.pid)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/models", timeout=2)
    server.stop()  # idempotent
    assert server._proc is None


def test_context_manager_with_fixed_port(
    llama_installed: None, monkeypatch: pytest.MonkeyPatch, gguf: Path, tmp_path: Path
) -> None:
    use_command(monkeypatch, "-c", FAKE_SERVER, with_port=True)
    port = lc.free_port()
    spec = EmbeddedServerSpec(gguf=str(gguf), port=port, startup_timeout_s=30)
    with LlamaCppServer(spec, alias="m", log_path=tmp_path / "s.log") as server:
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        proc = server._proc
        assert proc is not None and proc.poll() is None
    assert proc.poll() is not None
    assert "fake server up" in (tmp_path / "s.log").read_text()
