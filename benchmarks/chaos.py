"""Chaos: random SIGKILLs of `run` and `fork`, two concurrent runs, server faults, a damaged cache, a full disk.

Everything goes through the real command line (`python -m branchpoint.cli`) against the
OpenAI-compatible fault server (tests/servers/openai_fault_server.py, its own process) with a
deterministic agent (completion endpoint, constrained policy: search once over a BM25 index of
the demo corpus, then answer with the first passage's title), so a run on a CPU takes minutes.

1. Reference: the spec and its fork study run once against a healthy server.
2. `run` killed with SIGKILL at a random moment, `--kills` times, every other one with
   `--processes 2` (worker processes that must die with it), on one run folder; between kills
   the folder's retrieval cache is overwritten with garbage once, which the next `run` must refuse
   with one line (exit 2) until it is deleted; then reruns until exit code 0.
3. `fork` killed the same way `--fork-kills` times on that run, then rerun until complete.
4. Two `run` processes started at once on a fresh folder: one runs, the other exits 2 naming it.
5. A full disk, `--disk-fulls` times: the run folder on a small tmpfs (root mounts one; skipped
   where it cannot), filled to 0-1.5 MB of free space (random) before each `run`, which must
   stop with one line naming the device (exit 2, no traceback) or finish, leaving every line of
   its traces whole; the space is then freed and the reruns complete the run.
Every model request meets a fault with probability `--fault-rate` (HTTP 500, dropped connection,
truncated JSON, or a 200 reply that is no completion, a gateway's `{"error": ...}`, a quarter
each); the runs ride them out as `incomplete` records (exit code 3) and the reruns redo them.

Checks (each printed; any failure makes the exit code 1): every planned execution and branch is
recorded exactly once (0 lost, 0 duplicated), its outcome equals the reference's (0 mis-scored:
status, answer, searches; no finished record carries a transport error), no process of a killed
command survives it by more than 5 s (0 orphans), and `runs verify --sample 0` is clean.

    .venv/bin/python benchmarks/chaos.py [--kills 10] [--fork-kills 10] [--disk-fulls 4] [--n 30] [--fault-rate 0.1] [--seed 0]
"""

from __future__ import annotations

import argparse
import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from branchpoint.datasets.questions import demo_corpus_path  # noqa: E402
from branchpoint.experiments import RunStore  # noqa: E402
from branchpoint.experiments.branch_planning import fork_records  # noqa: E402
from branchpoint.experiments.verify import verify_run  # noqa: E402
from branchpoint.traces import EXECUTIONS_FILE, PASSAGES_FILE  # noqa: E402
from tests.servers.openai_fault_server import ServerProcess  # noqa: E402

FAILURES: list[str] = []
FORK_ARGS = ["--actions", "THINK,SEARCH", "--boundaries", "initial", "--repeats", "2", "--concurrency", "2"]


def fail(message: str) -> None:
    FAILURES.append(message)
    print(f"  FAILED: {message}", flush=True)


def write_spec(path: Path, base_url: str, n: int) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "name": "chaos",
                "questions": {"path": "demo", "limit": n},
                "model": {
                    "provider": "openai",
                    "base_url": base_url,
                    "name": "m",
                    "max_tokens": 32,
                    "timeout_s": 2.0,
                    "retries": 1,
                },
                "agent": {"policy": "constrained", "search_cap": 2, "top_k": 2},
                "retrieval": {
                    "default": "demo",
                    "sources": {"demo": {"kind": "bm25", "corpus": str(demo_corpus_path())}},
                },
                "sweep": {"agent.search": [True, False]},
            }
        ),
        encoding="utf-8",
    )
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "branchpoint.cli", *args]


def env() -> dict[str, str]:
    # The client's retry back-off is tenacity's (0.5 s, 1 s ...): kept, the spec allows 1 retry.
    return {**os.environ, "PYTHONPATH": str(REPO)}


def processes_of(marker: str) -> list[int]:
    """Pids of live processes whose command line mentions `marker` (a run folder path)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next((ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("State:")), "")
        except OSError:
            continue
        if marker in cmdline and "zombie" not in state:
            pids.append(int(entry.name))
    return pids


def kill_at_random(cmd: list[str], marker: str, rng: random.Random, low: float, high: float) -> tuple[bool, int]:
    """Start `cmd`, SIGKILL it a random delay after it took the run folder's lock (so the kill
    lands while it works, not while Python starts); (killed mid-way?, orphans 5 s later)."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lock = Path(marker) / ".lock"
    while proc.poll() is None:
        try:
            if lock.read_text().split()[:1] == [str(proc.pid)]:
                break
        except (OSError, IndexError):
            pass
        time.sleep(0.005)
    deadline = time.monotonic() + rng.uniform(low, high)
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + 5.0
    while processes_of(marker) and time.monotonic() < end:
        time.sleep(0.05)
    return killed, len(processes_of(marker))


def run_until_done(cmd: list[str], tries: int = 8) -> tuple[int, list[int]]:
    """Rerun until exit code 0 (3: some incomplete, rerun); (reruns, exit codes seen)."""
    codes = []
    for attempt in range(1, tries + 1):
        result = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
        codes.append(result.returncode)
        if result.returncode == 0:
            return attempt, codes
        if result.returncode != 3:
            fail(f"{' '.join(cmd[3:5])}: exit code {result.returncode}: {result.stderr.strip()[-300:]}")
            return attempt, codes
    fail(f"{' '.join(cmd[3:5])}: still incomplete after {tries} reruns")
    return tries, codes


def key(record) -> str | tuple:
    """Which execution a record is, across run folders: its id, or for a branch its parent
    execution, boundary, action and repeat (checkpoint ids differ from one folder to another)."""
    if record.parent is None:
        return record.execution_id
    return (record.parent.execution_id, record.parent.boundary, record.branch, record.repeat)


def outcomes(records: list) -> dict:
    return {key(r): (r.status, r.final_answer, r.search_calls) for r in records if r.status != "incomplete"}


def check(label: str, run_dir: Path, reference: dict[str, tuple], forks: bool = False) -> dict[str, int]:
    """Exactly once, same outcomes as the reference, no transport error, verify clean."""
    records = fork_records(run_dir) if forks else RunStore(run_dir).records()
    finished = [r for r in records if r.status != "incomplete"]
    counts = Counter(key(r) for r in finished)
    got = outcomes(finished)
    lost = len(set(reference) - set(got))
    duplicated = sum(c - 1 for c in counts.values() if c > 1)
    misscored = sum(1 for eid, o in got.items() if eid in reference and o != reference[eid])
    misscored += sum(1 for r in finished if r.error)
    extra = len(set(got) - set(reference))
    report = verify_run(run_dir, sample=0)
    for what, value in (("lost", lost), ("duplicated", duplicated), ("mis-scored", misscored), ("unplanned", extra)):
        if value:
            fail(f"{label}: {value} {what}")
    if not report.ok:
        fail(f"{label}: runs verify: " + "; ".join(f"{p.kind} {p.where}: {p.message}" for p in report.problems[:3]))
    return {
        "records": len(got),
        "lost": lost,
        "duplicated": duplicated,
        "misscored": misscored,
        "verify_problems": len(report.problems),
    }


def fill(folder: Path, leave: int) -> Path:
    """Fill the file system of `folder` to its last byte, then free `leave` bytes of it."""
    filler = folder / "filler"
    with filler.open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 20))
                fh.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def whole_lines(run_dir: Path) -> bool:
    """Every line of the run's traces and passage store is whole (readers accept every line)."""
    for name in (EXECUTIONS_FILE, PASSAGES_FILE):
        path = run_dir / name
        if path.is_file() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            return False
    RunStore(run_dir).records()  # raises on a damaged line
    return True


def disk_full(root: Path, spec: Path, rounds: int, rng: random.Random) -> dict[str, object] | None:
    """Scenario 5 (see the module docstring); None when no tmpfs can be mounted here."""
    mnt = root / "small"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        print(f"   skipped: cannot mount a tmpfs here ({mounted.stderr.strip()[:100]})", flush=True)
        return None
    run_dir = mnt / "run"
    cmd = cli("run", str(spec), "--out", str(run_dir), "--no-progress", "--concurrency", "4")
    stopped = one_line = intact = 0
    progress: list[int] = []
    leaves: list[int] = []
    try:
        for i in range(rounds):
            leave = rng.choice([0, 50_000, 300_000, 1_500_000]) + rng.randint(0, 50_000)
            leaves.append(leave)
            filler = fill(mnt, leave)
            result = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
            if result.returncode == 2:
                stopped += 1
                said = result.stderr.strip()
                one_line += (
                    "no space left on tmpfs at" in said and len(said.splitlines()) == 1 and "Traceback" not in said
                )
                if "no space left" not in said or "Traceback" in said:
                    fail(f"disk full {i + 1}: {said[-300:]}")
            elif result.returncode not in (0, 3):
                fail(f"disk full {i + 1}: exit {result.returncode}: {result.stderr[-300:]}")
            try:
                intact += whole_lines(run_dir)
            except Exception as exc:  # a damaged line: the failure this scenario exists to catch
                fail(f"disk full {i + 1}: a trace line is damaged: {exc}")
            progress.append(len(RunStore(run_dir).finished_ids()))
            filler.unlink()
        reruns, codes = run_until_done(cmd)
        return {
            "stopped": stopped,
            "one_line": one_line,
            "intact": intact,
            "free_bytes": leaves,
            "progress": progress,
            "reruns": reruns,
            "codes": codes,
            "run_dir": run_dir,
        }
    except BaseException:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        raise


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs of `run`.")
    parser.add_argument("--fork-kills", type=int, default=10, help="SIGKILLs of `fork`.")
    parser.add_argument("--disk-fulls", type=int, default=4, help="Runs on a filled-up file system.")
    parser.add_argument("--n", type=int, default=30, help="Questions (x2 conditions).")
    parser.add_argument("--fault-rate", type=float, default=0.1, help="Share of requests that meet a fault.")
    parser.add_argument(
        "--latency-s", type=float, default=0.2, help="Server latency per request (slow enough that kills land mid-run)."
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="bp-chaos-"))
    started = time.perf_counter()
    quarter = f"{args.fault_rate / 4:.4f}"
    figures: dict[str, object] = {}
    try:
        print(f"1. reference: {2 * args.n} executions and their fork study on a healthy server", flush=True)
        with ServerProcess("--latency-s", "0", "--search-once") as clean:
            ref_spec = write_spec(root / "ref.yaml", clean.base_url, args.n)
            ref_dir = root / "ref"
            for cmd in (
                cli("run", str(ref_spec), "--out", str(ref_dir), "--no-progress", "--concurrency", "4"),
                cli("fork", str(ref_dir), *FORK_ARGS, "--no-progress"),
            ):
                result = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
                if result.returncode != 0:
                    fail(f"reference {cmd[3]}: exit {result.returncode}: {result.stderr[-300:]}")
                    return 1
        reference = outcomes(RunStore(ref_dir).records())
        fork_reference = outcomes(fork_records(ref_dir))
        print(f"   {len(reference)} executions, {len(fork_reference)} branches", flush=True)

        with ServerProcess(
            "--latency-s",
            str(args.latency_s),
            "--search-once",
            "--seed",
            str(args.seed),
            "--error-rate",
            quarter,
            "--drop-rate",
            quarter,
            "--truncate-rate",
            quarter,
            "--malformed-rate",
            quarter,
        ) as server:
            spec = write_spec(root / "spec.yaml", server.base_url, args.n)
            run_dir = root / "run"
            print(
                f"2. `run` SIGKILLed {args.kills} times (every other one with --processes 2), "
                f"{args.fault_rate:.0%} server faults, a damaged cache",
                flush=True,
            )
            killed = orphans = 0
            progress: list[int] = []
            damaged_refused = damaged_tried = False
            for i in range(args.kills):
                extra = ["--processes", "2"] if i % 2 else []
                cmd = cli("run", str(spec), "--out", str(run_dir), "--no-progress", "--concurrency", "4", *extra)
                hit, left = kill_at_random(cmd, str(run_dir), rng, 0.1, 3.0)
                killed += hit
                orphans += left
                progress.append(len(RunStore(run_dir).finished_ids()))
                if left:
                    fail(f"run kill {i + 1}: {left} processes outlived the killed run by 5 s")
                if i >= args.kills // 2 and not damaged_tried and (run_dir / "retrieval_cache.sqlite").is_file():
                    damaged_tried = True
                    (run_dir / "retrieval_cache.sqlite").write_bytes(b"not a database" * 512)
                    result = subprocess.run(
                        cli("run", str(spec), "--out", str(run_dir), "--no-progress"),
                        cwd=REPO,
                        env=env(),
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                    damaged_refused = (
                        result.returncode == 2
                        and "retrieval cache is damaged" in result.stderr
                        and "can be rebuilt" in result.stderr
                        and "Traceback" not in result.stderr
                    )
                    if not damaged_refused:
                        fail(f"damaged cache: exit {result.returncode}: {result.stderr[-300:]}")
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{run_dir / 'retrieval_cache.sqlite'}{suffix}").unlink(missing_ok=True)
            if not damaged_tried:
                fail("damaged cache: the run folder never had a retrieval cache to damage")
            reruns, codes = run_until_done(
                cli("run", str(spec), "--out", str(run_dir), "--no-progress", "--concurrency", "4")
            )
            run_check = check("run", run_dir, reference)
            print(f"   finished executions after each kill: {progress}", flush=True)
            print(
                f"   {killed} of {args.kills} kills landed mid-run, {orphans} orphans; damaged cache refused "
                f"with one line: {damaged_refused}; {reruns} reruns (exit codes {codes}); {run_check}",
                flush=True,
            )
            figures.update(
                run_kills=killed, run_orphans=orphans, run_reruns=reruns, damaged_refused=damaged_refused, run=run_check
            )

            print(f"3. `fork` SIGKILLed {args.fork_kills} times", flush=True)
            fkilled = forphans = 0
            fprogress: list[int] = []
            for i in range(args.fork_kills):
                hit, left = kill_at_random(
                    cli("fork", str(run_dir), *FORK_ARGS, "--no-progress"), str(run_dir), rng, 0.1, 3.0
                )
                fkilled += hit
                forphans += left
                fprogress.append(len(outcomes(fork_records(run_dir))))
                if left:
                    fail(f"fork kill {i + 1}: {left} processes outlived the killed fork by 5 s")
            freruns, fcodes = run_until_done(cli("fork", str(run_dir), *FORK_ARGS, "--no-progress"))
            fork_check = check("fork", run_dir, fork_reference, forks=True)
            print(f"   finished branches after each kill: {fprogress}", flush=True)
            print(
                f"   {fkilled} of {args.fork_kills} kills landed mid-study, {forphans} orphans; {freruns} reruns "
                f"(exit codes {fcodes}); {fork_check}",
                flush=True,
            )
            figures.update(fork_kills=fkilled, fork_orphans=forphans, fork_reruns=freruns, fork=fork_check)

            print("4. two `run` processes at once on one folder", flush=True)
            twin = root / "twin"
            cmd = cli("run", str(spec), "--out", str(twin), "--no-progress", "--concurrency", "4")
            procs = [
                subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)
            ]
            results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
            busy = [err for code, err in results if code == 2 and "in use by pid" in err]
            ran = [code for code, _ in results if code in (0, 3)]
            if len(busy) != 1 or len(ran) != 1:
                fail(f"two runs: exit codes {[c for c, _ in results]}, expected one 0/3 and one 2 naming the holder")
            _treruns, _ = run_until_done(cmd)
            twin_check = check("two runs", twin, reference)
            print(f"   exit codes {[c for c, _ in results]} (one refused: {len(busy) == 1}); {twin_check}", flush=True)
            figures.update(twin_refused=len(busy) == 1, twin=twin_check)

            print(f"5. `run` on a full disk, {args.disk_fulls} times (free space left: 0 to ~1.5 MB)", flush=True)
            full = disk_full(root, spec, args.disk_fulls, rng)
            if full is not None:
                full_dir = full.pop("run_dir")
                try:
                    full_check = check("disk full", full_dir, reference)
                finally:
                    subprocess.run(["umount", "-l", str(root / "small")], check=False)
                print(
                    f"   {full['stopped']} of {args.disk_fulls} runs stopped by the full disk ({full['one_line']} with "
                    f"one line naming the device; free bytes left {full['free_bytes']}), traces whole after "
                    f"{full['intact']} of them; finished executions "
                    f"after each: {full['progress']}; {full['reruns']} reruns once freed (exit codes {full['codes']}); "
                    f"{full_check}",
                    flush=True,
                )
                if full["one_line"] != full["stopped"] or full["intact"] != args.disk_fulls:
                    fail("disk full: a stop without its one line, or a damaged trace line")
                figures.update(disk_full=full, disk_full_check=full_check)
        left = processes_of(str(root))
        if left:
            fail(f"{len(left)} processes of the benchmark still running at the end")
        figures["orphans_at_end"] = len(left)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - started
    print(
        f"\nchaos: {args.kills} run kills + {args.fork_kills} fork kills + {args.disk_fulls} full disks, "
        f"{args.fault_rate:.0%} faults, "
        f"{2 * args.n} executions: {'PASS' if not FAILURES else 'FAIL'} in {wall:.0f} s",
        flush=True,
    )
    for f in FAILURES:
        print(f"  - {f}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
