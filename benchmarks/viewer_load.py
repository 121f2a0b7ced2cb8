"""Viewer load time on a 10,000-execution run with forks.

Writes a run folder (executions.jsonl, judged.jsonl with labels, metrics.json, forks.jsonl with
THINK / SEARCH / STOP / SWITCH branches at three boundaries of the first `--forked` searching
executions, replays.jsonl), then starts `branchpoint view RUN --port P` as a user would and
times, from the moment the process is spawned:

- *first rows*: the first /api/rows answer with rows in it (what the table draws first);
- *first view*: the page open in Debian's chromium (Playwright) with its table drawn, when a
  browser is available (else reported as skipped);
- *full index*: every file read and every line checked against the schema (the page's filters
  then cover branches too);
- one execution's timeline and one fork tree, each a single request once the index is full.

    .venv/bin/python benchmarks/viewer_load.py [--executions 10000] [--forked 1000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.evaluation.viewer.runs import write_fork_study


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(fn, timeout: float = 120.0, every: float = 0.01):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(every)
    raise TimeoutError("the viewer did not answer in time")


def browser_first_view(run: Path) -> tuple[float, float] | None:
    """(seconds from spawning `branchpoint view` to its table drawn in chromium, of which the
    page's own part: navigation to table drawn), or None without a browser. The browser is
    started first, as a user's browser already runs."""
    exe = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if exe is None:
        return None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto("about:blank")
        port = free_port()
        url = f"http://127.0.0.1:{port}/"
        spawned = time.perf_counter()
        proc = spawn(run, port)
        try:
            wait_until(lambda: httpx.get(url + "api/run", timeout=1.0).status_code == 200)
            navigated = time.perf_counter()
            page.goto(url)
            page.wait_for_selector("#bp-table tr.clickable", timeout=60_000)
            drawn = time.perf_counter()
        finally:
            proc.terminate()
            proc.wait(10)
        browser.close()
    return drawn - spawned, drawn - navigated


def spawn(run: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "branchpoint.cli", "view", str(run), "--port", str(port), "--no-token"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executions", type=int, default=10_000)
    ap.add_argument("--forked", type=int, default=1_000, help="executions whose checkpoints are forked")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="keep the run folder here (default: a temp folder)")
    args = ap.parse_args()

    tmp = None if args.out else tempfile.mkdtemp(prefix="viewer-load-")
    run = args.out or Path(tmp) / "run"
    start = time.perf_counter()
    made = write_fork_study(run, executions=args.executions, forked=args.forked, repeats=args.repeats, value=False)
    size = sum(p.stat().st_size for p in run.iterdir()) / 2**20
    print(
        f"run: {len(made['executions'])} executions, {len(made['forks'])} branches, {len(made['replays'])} replays, "
        f"{size:.0f} MiB of traces (written in {time.perf_counter() - start:.1f} s)"
    )

    results: dict[str, Any] = {}
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    spawned = time.perf_counter()
    proc = spawn(run, port)
    try:
        wait_until(lambda: httpx.get(url + "api/rows", timeout=2.0).json()["rows"])
        results["first rows"] = time.perf_counter() - spawned
        rows = wait_until(lambda: (r := httpx.get(url + "api/rows", timeout=5.0).json())["done"] and r, every=0.05)
        results["full index"] = time.perf_counter() - spawned
        cols = rows["columns"]
        forked = next(r for r in rows["rows"] if r[cols.index("parent")])[cols.index("parent")]
        t = time.perf_counter()
        httpx.get(url + f"api/execution/{forked}", timeout=30).raise_for_status()
        results["one timeline"] = time.perf_counter() - t
        t = time.perf_counter()
        httpx.get(url + f"api/tree/{forked}", timeout=30).raise_for_status()
        results["one fork tree"] = time.perf_counter() - t
        results["rows"] = rows["total"]
    finally:
        proc.terminate()
        proc.wait(10)
    results["first view (chromium)"] = browser_first_view(run)
    print(f"first rows served:        {results['first rows']:.2f} s after `branchpoint view` was spawned")
    fv = results["first view (chromium)"]
    if fv is None:
        print("first view in chromium:   skipped (no playwright or no chromium)")
    else:
        print(
            f"first view in chromium:   {fv[0]:.2f} s after spawn to table drawn ({fv[1]:.2f} s of it from "
            "opening the URL)"
        )
    print(f"full index ({results['rows']} rows, every line schema-checked): {results['full index']:.2f} s after spawn")
    print(
        f"one timeline: {1000 * results['one timeline']:.0f} ms; one fork tree: {1000 * results['one fork tree']:.0f} ms"
    )
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("command: .venv/bin/python benchmarks/viewer_load.py " + " ".join(sys.argv[1:]))
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
