"""The viewer on large runs in chromium: a 10,000-execution run's table and a 2,000-branch fork tree.

Writes a synthetic run folder of valid trace records (no model: `tests.evaluation.viewer.runs`,
the records the viewer's tests use) — `--executions` executions with judged labels and metrics,
and one execution forked into about `--branches` branches (THINK / SEARCH / STOP / SWITCH at each
of its legal boundaries, many repeats each) — then serves it and times in Debian's chromium
(Playwright), best of `--repeats`, each in a new page:

- *table*: navigation until the first page of rows is drawn, and until every row is loaded (the
  rows API is paged, 2,000 rows a request; the table draws 100 rows a page);
- *fork tree*: navigation to the tree of the forked execution until its states are drawn (each
  action shows its first 40 repeats; "show all" draws the rest), and the API answer alone;
- *show all*: one action's full list of repeats drawn after its button is clicked.

    .venv/bin/python benchmarks/viewer_large.py [--executions 10000] [--branches 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchpoint.evaluation.viewer import RunIndex, ViewerState
from branchpoint.evaluation.viewer.server import running
from branchpoint.traces import FORKS_FILE, dump_record
from tests.evaluation.viewer.runs import fork_records, write_fork_study


def write_run(run: Path, executions: int, branches: int) -> tuple[str, int]:
    """The run folder; returns the forked execution's id and its number of branches."""
    written = write_fork_study(run, executions=executions, forked=0, value=False)
    parent = next(p for p in written["executions"] if p.search_calls >= 2 and p.status == "ok")
    per_repeat = len(fork_records([parent], 1))  # branches per repeat: its boundaries x their actions
    forks = fork_records([parent], max(1, round(branches / per_repeat)))
    with (run / FORKS_FILE).open("w", encoding="utf-8") as fh:
        fh.writelines(dump_record(f) + "\n" for f in forks)
    return parent.execution_id, len(forks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executions", type=int, default=10_000)
    ap.add_argument("--branches", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    exe = shutil.which("chromium")
    if exe is None:
        sys.exit("no chromium on PATH (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "large"
        t0 = time.perf_counter()
        parent, n_branches = write_run(run, args.executions, args.branches)
        size = sum(f.stat().st_size for f in run.iterdir() if f.is_file()) / 2**20
        print(
            f"run written in {time.perf_counter() - t0:.1f} s: {args.executions} executions, "
            f"{n_branches} branches of one execution, {size:.0f} MiB of traces"
        )
        index = RunIndex.open(run)
        t0 = time.perf_counter()
        index.build()
        rows = len(index.order)
        print(f"index built (every line read and schema-checked) in {time.perf_counter() - t0:.2f} s")
        with running(ViewerState(index)) as url, sync_playwright() as p:
            base = url.split("?")[0]
            t0 = time.perf_counter()
            api_tree = httpx.get(f"{base}api/tree/{parent}", params={"token": url.split("token=")[1]}, timeout=600)
            api_s = time.perf_counter() - t0
            assert api_tree.status_code == 200, api_tree.text
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
            first, full, tree, more = [], [], [], []
            for _ in range(args.repeats):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                t0 = time.perf_counter()
                page.goto(url)
                page.wait_for_selector("#bp-table tr.clickable", timeout=600_000)
                first.append(time.perf_counter() - t0)
                page.wait_for_function(f"state.done && state.rows.length >= {len(index.order)}", timeout=600_000)
                full.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                page.goto(f"{base}#/tree/{parent}")
                page.wait_for_selector(".state a[data-branch]", timeout=600_000)
                tree.append(time.perf_counter() - t0)
                shown = page.locator(".state a[data-branch]").count()
                if page.locator("button[data-more]").count():  # more repeats per action than shown
                    t0 = time.perf_counter()
                    page.locator("button[data-more]").first.click()
                    page.wait_for_function(
                        f"document.querySelectorAll('.state a[data-branch]').length > {shown}", timeout=600_000
                    )
                    more.append(time.perf_counter() - t0)
                page.close()
            browser.close()
    print(f"table, first page drawn:        best {min(first):.2f} s (all: {', '.join(f'{x:.2f}' for x in first)})")
    print(f"table, all {rows} rows loaded: best {min(full):.2f} s (all: {', '.join(f'{x:.2f}' for x in full)})")
    print(
        f"fork tree of {n_branches} branches drawn: best {min(tree):.2f} s (all: {', '.join(f'{x:.2f}' for x in tree)}); "
        f"its API answer alone {api_s:.2f} s"
    )
    if more:
        print(f"one action's repeats, all drawn after 'show all': best {min(more):.2f} s")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("command: .venv/bin/python benchmarks/viewer_large.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
