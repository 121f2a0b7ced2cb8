"""`branchpoint models serve vllm`: start vLLM's OpenAI-compatible server for experiments.

Builds the `vllm serve` command (tool-call parser implies `--enable-auto-tool-choice`, which
`tool_choice: auto` needs, else vLLM answers HTTP 400), runs it as a managed child process bound
to 127.0.0.1 unless told otherwise, waits until `/v1/models` answers, and says what to paste into
a spec. Stopping (Ctrl-C, SIGTERM) stops the server's whole process group.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from branchpoint.errors import ModelServerError
from branchpoint.models.server import ALL_INTERFACES, ManagedServer

VLLM_INSTALL_HINT = (
    "vLLM is not installed in this environment: on a GPU machine run `pip install 'branchpoint[gpu]'` "
    "(or start any OpenAI-compatible server yourself and set model.provider: openai, model.base_url)"
)


class VllmServeOptions(BaseModel):
    """What `branchpoint models serve vllm` passes to `vllm serve`."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(..., description="Hugging Face id or local path of the model.")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    tensor_parallel: int = Field(1, ge=1, description="GPUs the model is split over.")
    reasoning_parser: str | None = Field(None, description="e.g. qwen3, deepseek_r1, openai_gptoss.")
    tool_call_parser: str | None = Field(None, description="e.g. hermes (Qwen3), openai (gpt-oss).")
    max_model_len: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    served_model_name: str | None = Field(None, description="Name clients send; default: the model.")
    extra_args: list[str] = Field(default_factory=list, description="Passed to `vllm serve` verbatim.")
    startup_timeout_s: float = Field(900, gt=0)

    @property
    def name(self) -> str:
        """The model name clients send (`model.name` in a spec)."""
        return self.served_model_name or self.model


def vllm_launcher() -> list[str]:
    """How to run vLLM's CLI here: the `vllm` script beside this Python, on PATH, or `python -m`."""
    beside = Path(sys.executable).parent / "vllm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("vllm")
    if found:
        return [found]
    if importlib.util.find_spec("vllm") is not None:
        return [sys.executable, "-m", "vllm.entrypoints.cli.main"]
    raise ModelServerError(VLLM_INSTALL_HINT)


def vllm_command(opts: VllmServeOptions, launcher: list[str] | None = None, port: int | None = None) -> list[str]:
    """The `vllm serve` command line for `opts` (launcher default: `vllm`)."""
    cmd = [
        *(launcher or ["vllm"]),
        "serve",
        opts.model,
        "--host",
        opts.host,
        "--port",
        str(port or opts.port),
        "--tensor-parallel-size",
        str(opts.tensor_parallel),
    ]
    if opts.served_model_name:
        cmd += ["--served-model-name", opts.served_model_name]
    if opts.max_model_len is not None:
        cmd += ["--max-model-len", str(opts.max_model_len)]
    if opts.gpu_memory_utilization is not None:
        cmd += ["--gpu-memory-utilization", f"{opts.gpu_memory_utilization:g}"]
    if opts.reasoning_parser:
        cmd += ["--reasoning-parser", opts.reasoning_parser]
    if opts.tool_call_parser:
        cmd += ["--enable-auto-tool-choice", "--tool-call-parser", opts.tool_call_parser]
    return cmd + list(opts.extra_args)


def spec_block(opts: VllmServeOptions, base_url: str) -> str:
    """A `model:` block to paste into an experiment spec for this server."""
    model: dict[str, Any] = {
        "provider": "openai",
        "base_url": base_url,
        "name": opts.name,
        "style": "chat",
        "max_tokens": 2048,
        "timeout_s": 300,
    }
    text = yaml.safe_dump({"model": model}, sort_keys=False)
    return text + "  # reasoning_effort: medium   # low | medium | high (see branchpoint.models.reasoning)\n"


class VllmServer(ManagedServer):
    """`vllm serve` as a managed child process: `with VllmServer(opts) as s: s.base_url`."""

    label = "vLLM server"
    log_prefix = "branchpoint-vllm-"
    #: vLLM stops its engine and tensor-parallel workers (GPU memory) on SIGTERM, not on SIGKILL.
    parent_death_signal = signal.SIGTERM

    def __init__(self, opts: VllmServeOptions, log_path: Path | None = None, launcher: list[str] | None = None) -> None:
        super().__init__(opts.host, opts.port, opts.startup_timeout_s, log_path)
        self.opts = opts
        self.launcher = launcher

    def check_installed(self) -> None:
        """vLLM must be installed (its CLI found), unless a launcher was given."""
        if self.launcher is None:
            self.launcher = vllm_launcher()

    def command(self) -> list[str]:
        return vllm_command(self.opts, self.launcher, port=self.port)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt like Ctrl-C (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve_until_stopped(server: ManagedServer, on_ready: Callable[[str], None]) -> None:
    """Start `server`, call `on_ready(base_url)`, and keep it running until Ctrl-C or SIGTERM.

    The server is stopped however this returns (a signal, a start-up failure, an error in
    `on_ready`). A server that exits by itself is an error that shows its log tail.
    """
    with _sigterm_interrupts():
        try:
            on_ready(server.start())
            code = server.wait()
        except KeyboardInterrupt:
            return
        finally:
            server.stop()
    raise ModelServerError(f"{server.label} exited with code {code} (log {server.log_path}):\n{server.log_tail()}")


def all_interfaces(host: str) -> bool:
    """True when `host` binds every interface (reachable from other machines)."""
    return host in ALL_INTERFACES
