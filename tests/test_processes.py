"""Child servers die with their parent: the parent is killed with SIGTERM, SIGINT or SIGKILL and
the child (llama.cpp's and vLLM's managed server, the retrieval server) is gone within 5 s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from branchpoint.processes import die_with_parent, pdeathsig_preexec
from tests.conftest import REPO, wait_gone

FAKE_SERVER = REPO / "tests" / "models" / "fake_vllm.py"  # answers GET /v1/models like a model server

PARENT = """
import signal, sys, time
from pathlib import Path

# Ctrl-C as in a terminal: a command started in the background of a shell without job control
# (e.g. `(bash .ci/run &)`) inherits SIGINT ignored, and Python keeps it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

kind, arg = sys.argv[1], sys.argv[2]
if kind == "llamacpp":
    from branchpoint.models.llamacpp import LlamaCppServer
    from branchpoint.models.spec import EmbeddedServerSpec

    class Server(LlamaCppServer):  # the real class; only the program it starts is a stand-in
        def check_installed(self): pass
        def prepare(self): pass
        def command(self):
            return [sys.executable, arg, "serve", "m", "--host", "127.0.0.1", "--port", str(self.port)]

    server = Server(EmbeddedServerSpec(startup_timeout_s=60), alias="m")
elif kind == "vllm":
    from branchpoint.models.server import free_port
    from branchpoint.models.vllm import VllmServeOptions, VllmServer

    opts = VllmServeOptions(model="m", port=free_port(), startup_timeout_s=60)
    server = VllmServer(opts, launcher=[sys.executable, arg])
else:
    from branchpoint.retrieval.server import RetrievalServerProcess

    server = RetrievalServerProcess(arg)
with server:
    print(server.pid, flush=True)
    time.sleep(120)
"""


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    """A saved MiniLM index of five demo passages (for the retrieval server)."""
    from branchpoint.datasets.questions import demo_corpus_path
    from branchpoint.retrieval import DenseIndex, load_corpus
    from branchpoint.retrieval.encoder import get_encoder

    out = tmp_path_factory.mktemp("idx") / "index"
    DenseIndex.build(load_corpus(demo_corpus_path())[:5], get_encoder("minilm-onnx")).save(out)
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["TERM", "INT", "KILL"])
@pytest.mark.parametrize("kind", ["llamacpp", "vllm", "retrieval"])
def test_child_server_dies_with_its_parent(kind, sig, request):
    arg = str(request.getfixturevalue("index_dir")) if kind == "retrieval" else str(FAKE_SERVER)
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, kind, arg], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), line + parent.stderr.read()
        child = int(line)
        os.kill(child, 0)  # running
        parent.send_signal(sig)
        parent.wait(timeout=15)
        assert wait_gone(child, 5.0), f"{kind} server {child} outlived its parent killed by {sig.name}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_pdeathsig_helpers_on_linux():
    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signals are Linux only")
    assert callable(pdeathsig_preexec())
    code = "import os, sys; from branchpoint.processes import die_with_parent; print(die_with_parent(parent_pid=os.getppid()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "True", out.stderr
    assert die_with_parent is not None
