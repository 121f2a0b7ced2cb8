"""A stand-in for `vllm serve` (no GPU, no model): `fake_vllm.py serve MODEL --host H --port P ...`.

It answers GET /v1/models like vLLM once "loaded". Behaviour for tests, from the environment:
FAKE_VLLM_ARGV (write argv as JSON there), FAKE_VLLM_PIDS (write "server_pid worker_pid"),
FAKE_VLLM_WORKER=1 (start a worker process in the same group, like tensor-parallel workers),
FAKE_VLLM_IGNORE_TERM=1 (ignore SIGTERM, so only SIGKILL stops it), FAKE_VLLM_EXIT=N (print an
error and exit with code N before serving), FAKE_VLLM_EXIT_AFTER=S (serve, then exit 1 after S s).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def main() -> None:
    argv = sys.argv[1:]
    if os.environ.get("FAKE_VLLM_ARGV"):
        with open(os.environ["FAKE_VLLM_ARGV"], "w") as f:
            json.dump(argv, f)
    assert argv[0] == "serve", argv
    model = argv[1]
    host = argv[argv.index("--host") + 1]
    port = int(argv[argv.index("--port") + 1])
    name = argv[argv.index("--served-model-name") + 1] if "--served-model-name" in argv else model
    print(f"INFO fake vllm: loading {model}", flush=True)
    if os.environ.get("FAKE_VLLM_EXIT"):
        print("ERROR fake vllm: CUDA out of memory", flush=True)
        sys.exit(int(os.environ["FAKE_VLLM_EXIT"]))
    if os.environ.get("FAKE_VLLM_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    worker = None
    if os.environ.get("FAKE_VLLM_WORKER"):
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    if os.environ.get("FAKE_VLLM_PIDS"):
        with open(os.environ["FAKE_VLLM_PIDS"], "w") as f:
            f.write(f"{os.getpid()} {worker.pid if worker else 0}")
    if os.environ.get("FAKE_VLLM_EXIT_AFTER"):
        threading.Timer(float(os.environ["FAKE_VLLM_EXIT_AFTER"]), lambda: os._exit(1)).start()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path != "/v1/models":
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(
                {
                    "object": "list",
                    "data": [{"id": name, "object": "model", "owned_by": "vllm", "max_model_len": 32768}],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    time.sleep(0.2)  # "loading the weights"
    print(f"INFO fake vllm: serving {name} on http://{host}:{port}", flush=True)
    HTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
