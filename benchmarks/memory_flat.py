"""Peak memory stays flat over a long sweep: 10,000 executions, then a rerun that skips them all.

A generated question file (branchpoint JSONL, 10,000 questions) runs through `run_experiment`
with a scripted model (no search, max_tokens 16), SQLite checkpoints and durable appends, as a
real sweep would. The process's resident set (VmRSS) and its peak (VmHWM) are read from
/proc/self/status after 1k, 2k, 5k and 10k executions; then the finished spec is run again (it
reads the whole store and makes no model call) and the peak is read once more.

The scripted model keeps every prompt it was sent (for tests); this benchmark empties that log
after each call so that what is measured is the framework, and says how much the log would add.

    .venv/bin/python benchmarks/memory_flat.py [--n 10000] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchpoint.experiments import load_spec, run_experiment
from branchpoint.models import ScriptedModel


def status_kib(field: str) -> int:
    """A `VmRSS` / `VmHWM` value of this process in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def write_questions(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            answerable = i % 3 != 0
            q = {
                "id": f"q{i:05d}",
                "question": f"What is the name of the river in town number {i}?",
                "answerable": answerable,
                "gold_answers": [f"River {i}"] if answerable else [],
                "category": None if answerable else "AU",
            }
            fh.write(json.dumps(q) + "\n")


class Meter:
    """Counts model calls and reads memory at the marks (the no-search policy makes one call each)."""

    def __init__(self, marks: list[int]) -> None:
        self.marks = set(marks)
        self.calls = 0
        self.readings: list[tuple[int, int, int, float]] = []
        self.prompt_bytes = 0
        self.start = time.perf_counter()
        self.model: ScriptedModel | None = None

    def responder(self, prompt: str) -> str:
        self.calls += 1
        self.prompt_bytes += len(prompt.encode())
        if self.model is not None:  # the test model's prompt log is not the framework's memory
            self.model.prompts.clear()
            self.model.requests.clear()
        if self.calls in self.marks:
            self.readings.append(
                (self.calls, status_kib("VmRSS"), status_kib("VmHWM"), time.perf_counter() - self.start)
            )
        return 'answer", "text": "I do not know"}'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=1)
    a = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bp-memory-"))
    questions = tmp / "questions.jsonl"
    write_questions(questions, a.n)
    spec_path = tmp / "spec.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": "memory",
                "questions": {"path": str(questions), "format": "branchpoint"},
                "model": {"provider": "scripted", "script": ["unused"], "max_tokens": 16},
                "agent": {"policy": "constrained", "search": False},
            }
        ),
        encoding="utf-8",
    )
    marks = sorted({m for m in (1, 1000, 2000, 5000, a.n) if m <= a.n})
    meter = Meter(marks)

    @contextmanager
    def opener(spec, run_dir):
        meter.model = ScriptedModel(responder=meter.responder)
        yield meter.model

    spec = load_spec(spec_path)
    base = status_kib("VmRSS")
    summary = run_experiment(spec, tmp / "run", progress=False, model_opener=opener, concurrency=a.concurrency)
    assert summary.ran == a.n and summary.statuses == {"ok": a.n}, summary
    print(
        f"{a.n} executions (scripted, no search, SQLite checkpoints, durable appends), concurrency "
        f"{a.concurrency}: {summary.wall_s:.0f} s, {1000 * summary.wall_s / a.n:.1f} ms / execution"
    )
    print(f"RSS before the run: {base / 1024:.1f} MiB")
    print(f"{'executions':>10}{'RSS MiB':>10}{'peak MiB':>10}{'s':>8}")
    for calls, rss, hwm, t in meter.readings:
        print(f"{calls:>10}{rss / 1024:>10.1f}{hwm / 1024:>10.1f}{t:>8.0f}")
    ref = next(r for r in meter.readings if r[0] == min(m for m in marks if m >= 1000))
    last = meter.readings[-1]
    growth = (last[1] - ref[1]) / 1024
    per_1k = growth / max((last[0] - ref[0]) / 1000, 1e-9)
    print(f"RSS growth from {ref[0]} to {last[0]} executions: {growth:+.1f} MiB ({per_1k:+.2f} MiB per 1,000)")
    hwm_before = status_kib("VmHWM")
    start = time.perf_counter()
    again = run_experiment(spec, tmp / "run", progress=False, model_opener=opener)
    assert again.ran == 0 and again.skipped == a.n
    print(
        f"rerun of the finished spec: {again.skipped} skipped in {time.perf_counter() - start:.1f} s, "
        f"RSS {status_kib('VmRSS') / 1024:.1f} MiB, peak {hwm_before / 1024:.1f} -> {status_kib('VmHWM') / 1024:.1f} MiB"
    )
    size = (tmp / "run" / "executions.jsonl").stat().st_size
    db = sum(p.stat().st_size for p in (tmp / "run").glob("checkpoints.sqlite*"))
    print(
        f"executions.jsonl {size / 2**20:.1f} MiB, checkpoints {db / 2**20:.1f} MiB; the scripted model's "
        f"prompt log (emptied here) would have held {meter.prompt_bytes / 2**20:.1f} MiB of prompt text"
    )


if __name__ == "__main__":
    main()
