"""Run-store integrity: one writer per run folder, nothing written before everything is valid, a
run folder belongs to one spec, checkpoint store forms, damaged databases as one clear line."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments import RunStore, load_spec
from branchpoint.experiments.spec import identity_differences, spec_fingerprint
from branchpoint.experiments.store import LOCK_FILE, RunDirBusyError, run_lock
from tests.conftest import REPO

runner = CliRunner()

CORPUS = [
    {"id": "d1", "contents": '"Canberra"\nCanberra is the capital city of Australia.'},
    {"id": "d2", "contents": '"Mona Lisa"\nThe Mona Lisa was painted by Leonardo da Vinci.'},
    {"id": "d3", "contents": '"Sydney"\nSydney is the largest city in Australia.'},
]


def write_corpus(path: Path, rows=CORPUS) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def base_spec(tmp_path: Path, **changes) -> dict:
    spec = {
        "name": "integrity",
        "questions": {"path": "demo", "limit": 4},
        "model": {"provider": "scripted", "script": ['search", "text": "capital"}', 'answer", "text": "Canberra"}']},
        "agent": {"policy": "constrained", "search_cap": 1},
        "retrieval": {
            "default": "kb",
            "sources": {"kb": {"kind": "bm25", "corpus": str(write_corpus(tmp_path / "kb.jsonl"))}},
        },
    }
    for key, value in changes.items():
        spec[key] = {**spec[key], **value} if isinstance(value, dict) and isinstance(spec.get(key), dict) else value
    return spec


def write_spec(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def cli(*args: str):
    return runner.invoke(app, [*args])


@pytest.fixture()
def done_run(tmp_path, isolated_cache) -> tuple[Path, Path]:
    """A complete run of the base spec: (spec path, run folder)."""
    spec = write_spec(tmp_path, base_spec(tmp_path))
    out = tmp_path / "run"
    result = cli("run", str(spec), "--out", str(out), "--no-progress")
    assert result.exit_code == 0, result.output
    return spec, out


def fails_cleanly(args: list[str], folder: Path | None, expected: str) -> str:
    before = snapshot(folder) if folder is not None and folder.exists() else None
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.output.startswith("error:"), result.output
    assert expected in result.output, result.output
    if folder is not None:
        assert (snapshot(folder) if folder.exists() else None) == before
    return result.output


# --- one writer -------------------------------------------------------------------------------


def test_run_lock_is_exclusive_and_names_the_holder(tmp_path):
    with run_lock(tmp_path / "r") as lock:
        assert (tmp_path / "r" / LOCK_FILE).read_text().split() == [str(os.getpid()), socket.gethostname()]
        with pytest.raises(RunDirBusyError, match=f"in use by pid {os.getpid()} on host {socket.gethostname()}"):
            with run_lock(tmp_path / "r"):
                pass
        lock.committed = True
    assert (tmp_path / "r" / LOCK_FILE).read_bytes() == b""  # released: no holder
    with run_lock(tmp_path / "r"):  # free again
        pass


def test_an_uncommitted_lock_leaves_no_folder(tmp_path):
    with run_lock(tmp_path / "a" / "b"):
        assert (tmp_path / "a" / "b").is_dir()
    assert not (tmp_path / "a").exists()


HOLDER = """
import sys, time
from branchpoint.experiments.store import run_lock
with run_lock(sys.argv[1]) as lock:
    lock.committed = True
    print("held", flush=True)
    time.sleep(60)
"""


def test_second_writer_is_refused_until_the_holder_is_killed(done_run):
    spec, out = done_run
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=REPO, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        message = fails_cleanly(
            ["run", str(spec), "--out", str(out), "--no-progress"], None, f"pid {holder.pid} on host"
        )
        assert "one writer per run folder" in message
        fails_cleanly(["fork", str(out), "--no-progress"], None, f"in use by pid {holder.pid}")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the OS released the lock with the killed process: the next writer proceeds
    result = cli("run", str(spec), "--out", str(out), "--no-progress")
    assert result.exit_code == 0, result.output


def test_two_concurrent_runs_record_every_execution_once(tmp_path, isolated_cache):
    from tests.servers.openai_fault_server import ServerProcess

    hold = tmp_path / "hold"  # the server keeps every request waiting while this file exists, so the
    hold.touch()  # first run is still mid-run when the second starts, however busy the machine
    with ServerProcess("--latency-s", "0.01", "--hold-file", str(hold)) as server:
        data = base_spec(
            tmp_path,
            questions={"path": "demo", "limit": 12},
            agent={"search": False},
            model={"provider": "openai", "base_url": server.base_url, "name": "m", "max_tokens": 16, "timeout_s": 300},
        )
        data["model"].pop("script")
        spec = write_spec(tmp_path, data)
        out = tmp_path / "run"
        cmd = [sys.executable, "-m", "branchpoint.cli", "run", str(spec), "--out", str(out), "--no-progress"]
        first = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not (out / LOCK_FILE).is_file() or not (out / LOCK_FILE).read_text():
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.02)
        second = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
        hold.unlink()
        assert first.wait(timeout=120) == 0, first.communicate()
    assert second.returncode == 2 and f"in use by pid {first.pid}" in second.stderr, second.stderr
    ids = [r.execution_id for r in RunStore(out).records()]
    assert len(ids) == len(set(ids)) == 12


# --- nothing written before everything is valid -----------------------------------------------

BAD_CORPORA = {
    "not_json": (b'{"id": "d1", "contents": "x"}\n{not json\n', "line 2: invalid JSON"),
    "empty": (b"", "corpus is empty"),
    "not_utf8": (b'{"id": "d1", "contents": "caf\xe9"}\n', "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_CORPORA))
def test_bad_corpus_writes_nothing_new_or_existing(tmp_path, done_run, case):
    spec, out = done_run
    content, expected = BAD_CORPORA[case]
    (tmp_path / "bad.jsonl").write_bytes(content)
    data = base_spec(tmp_path)
    data["retrieval"]["sources"]["kb"]["corpus"] = str(tmp_path / "bad.jsonl")
    bad = write_spec(tmp_path, data, "bad.yaml")
    fails_cleanly(["run", str(bad), "--out", str(tmp_path / "new"), "--no-progress"], None, expected)
    assert not (tmp_path / "new").exists()
    fails_cleanly(["run", str(bad), "--out", str(tmp_path / "p"), "--processes", "2", "--no-progress"], None, expected)
    assert not (tmp_path / "p").exists()
    # the run's own corpus damaged, with one execution still to do: the folder stays as it was
    (tmp_path / "kb.jsonl").write_bytes(content)
    traces = out / "executions.jsonl"
    traces.write_bytes(b"".join(traces.read_bytes().splitlines(True)[:-1]))
    fails_cleanly(["run", str(spec), "--out", str(out), "--no-progress"], out, expected)


def test_stale_index_writes_nothing(tmp_path, isolated_cache):
    index = tmp_path / "idx"
    result = cli(
        "index",
        "build",
        "--corpus",
        str(write_corpus(tmp_path / "a.jsonl")),
        "--kind",
        "bm25",
        "--out",
        str(index),
        "--no-progress",
    )
    assert result.exit_code == 0, result.output
    other = write_corpus(tmp_path / "b.jsonl", CORPUS[:2])
    data = base_spec(
        tmp_path,
        retrieval={"default": "kb", "sources": {"kb": {"kind": "bm25", "index": str(index), "corpus": str(other)}}},
    )
    spec = str(write_spec(tmp_path, data))
    for extra in ([], ["--processes", "2"]):  # the processes' driver checks the manifest itself
        fails_cleanly(
            ["run", spec, "--out", str(tmp_path / "new"), "--no-progress", *extra],
            None,
            "the corpus changed since the index was built",
        )
        assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("damage", ["garbage", "rows"])
def test_damaged_flashrag_index_file_writes_nothing_with_processes(tmp_path, isolated_cache, damage):
    """The --processes driver checks a FlashRAG index file (memory-mapped) before any write."""
    import faiss
    import numpy as np

    corpus = write_corpus(tmp_path / "kb.jsonl")
    index_file = tmp_path / "e5_Flat.index"
    if damage == "garbage":
        index_file.write_bytes(b"not a faiss index" * 10)
        expected = "not a faiss index file"
    else:  # a real index of another corpus: 5 rows for a 3-passage corpus
        flat = faiss.IndexFlatIP(384)
        flat.add(np.random.default_rng(0).random((5, 384), dtype=np.float32))
        faiss.write_index(flat, str(index_file))
        expected = "holds 5 vectors but"
    data = base_spec(
        tmp_path, retrieval={"default": "kb", "sources": {"kb": {"index": str(index_file), "corpus": str(corpus)}}}
    )
    spec = str(write_spec(tmp_path, data))
    for extra in ([], ["--processes", "2"]):
        fails_cleanly(["run", spec, "--out", str(tmp_path / "new"), "--no-progress", *extra], None, expected)
        assert not (tmp_path / "new").exists()


def test_complete_run_spec_is_never_rewritten(tmp_path, done_run):
    _spec, out = done_run
    before = snapshot(out)
    data = base_spec(tmp_path, description="the same experiment, described")  # not outcome-relevant
    result = cli("run", str(write_spec(tmp_path, data, "described.yaml")), "--out", str(out), "--no-progress")
    assert result.exit_code == 0 and "0 run" in result.output, result.output
    assert snapshot(out) == before


# --- a run folder belongs to one spec ---------------------------------------------------------


def test_another_spec_is_refused_naming_the_fields(tmp_path, done_run):
    _spec, out = done_run
    data = base_spec(tmp_path, agent={"search_cap": 2, "top_k": 5})
    message = fails_cleanly(
        ["run", str(write_spec(tmp_path, data, "other.yaml")), "--out", str(out), "--no-progress"],
        out,
        "holds the run of another spec",
    )
    assert "agent.search_cap: 1 there, 2 now" in message and "agent.top_k" in message and "--out" in message


def test_adding_sweep_values_is_the_same_run(tmp_path, done_run):
    _spec, _out = done_run
    one = base_spec(tmp_path, sweep={"agent.search_cap": [1]})
    two = base_spec(tmp_path, sweep={"agent.search_cap": [1, 2]})
    assert (
        identity_differences(
            load_spec(write_spec(tmp_path, one, "1.yaml")), load_spec(write_spec(tmp_path, two, "2.yaml"))
        )
        == []
    )
    assert spec_fingerprint(load_spec(write_spec(tmp_path, one, "1.yaml"))) == spec_fingerprint(
        load_spec(write_spec(tmp_path, two, "2.yaml"))
    )
    sweep_out = tmp_path / "sweep"
    assert cli("run", str(tmp_path / "1.yaml"), "--out", str(sweep_out), "--no-progress").exit_code == 0
    result = cli("run", str(tmp_path / "2.yaml"), "--out", str(sweep_out), "--no-progress")
    assert result.exit_code == 0 and "4 already recorded, 4 run" in result.output, result.output
    assert load_spec(sweep_out / "spec.yaml").sweep == {"agent.search_cap": [1, 2]}
    # a new axis is another experiment (every execution id changes)
    axis = base_spec(tmp_path, sweep={"agent.search_cap": [1, 2], "agent.top_k": [2]})
    fails_cleanly(
        ["run", str(write_spec(tmp_path, axis, "3.yaml")), "--out", str(sweep_out), "--no-progress"],
        sweep_out,
        "sweep axes",
    )


def test_limit_and_transport_settings_are_the_same_run(tmp_path, done_run):
    _spec, out = done_run
    data = base_spec(tmp_path, model={"timeout_s": 5.0, "retries": 3})
    result = cli("run", str(write_spec(tmp_path, data, "t.yaml")), "--out", str(out), "--limit", "2", "--no-progress")
    assert result.exit_code == 0, result.output


# --- checkpoint store forms and damaged databases ---------------------------------------------


@pytest.mark.parametrize("target", ["mysql://x", "postgresq://user:pw@host/db", "states.db", "runs/checkpoints"])
def test_checkpoints_option_accepts_only_sqlite_paths_and_postgres_urls(tmp_path, done_run, target):
    spec, out = done_run
    for args in (
        ["run", str(spec), "--out", str(tmp_path / "n")],
        ["fork", str(out)],
        ["runs", "verify", str(out)],
        ["checkpoints", "ls", str(out)],
    ):
        message = fails_cleanly([*args, "--checkpoints", target], out, "expected a .sqlite file path or a postgres://")
        assert "pw" not in message.replace("postgres", "")
    assert not (tmp_path / "n").exists()


@pytest.mark.parametrize("how", ["garbage", "truncated"])
def test_damaged_checkpoints_are_one_line_saying_they_cannot_be_rebuilt(tmp_path, done_run, how):
    spec, out = done_run
    db = out / "checkpoints.sqlite"
    data = db.read_bytes()
    db.write_bytes(b"this is not a database" * 100 if how == "garbage" else data[: len(data) // 2])
    (out / "executions.jsonl").write_bytes(b"".join((out / "executions.jsonl").read_bytes().splitlines(True)[:-1]))
    for args in (
        ["run", str(spec), "--out", str(out), "--no-progress"],
        ["fork", str(out), "--no-progress"],
        ["checkpoints", "ls", str(out)],
    ):
        message = fails_cleanly(args, out, "checkpoints.sqlite: the checkpoint database is damaged")
        assert "cannot be rebuilt" in message and len(message.strip().splitlines()) <= 3
    result = cli("runs", "verify", str(out))
    assert result.exit_code == 1 and "checkpoints" in result.output and "Traceback" not in result.output


def test_damaged_retrieval_cache_is_one_line_saying_it_can_be_rebuilt(tmp_path, done_run):
    spec, out = done_run
    (out / "retrieval_cache.sqlite").write_bytes(b"garbage" * 1000)
    (out / "executions.jsonl").write_bytes(b"".join((out / "executions.jsonl").read_bytes().splitlines(True)[:-1]))
    message = fails_cleanly(
        ["run", str(spec), "--out", str(out), "--no-progress"],
        out,
        "retrieval_cache.sqlite: the retrieval cache is damaged",
    )
    assert "can be rebuilt: delete it" in message
    result = cli("runs", "verify", str(out))
    assert result.exit_code == 1 and "retrieval_cache" in result.output
    (out / "retrieval_cache.sqlite").unlink()
    assert cli("run", str(spec), "--out", str(out), "--no-progress").exit_code == 0


def test_damaged_judge_cache_is_one_line(tmp_path, done_run):
    from branchpoint.evaluation.judge_cache import JudgeCache

    (tmp_path / "judge.sqlite").write_bytes(b"garbage" * 1000)
    with pytest.raises(InputError, match="judge.sqlite: the judge cache is damaged .*can be rebuilt"):
        JudgeCache(tmp_path / "judge.sqlite")
    _spec, out = done_run
    fails_cleanly(
        [
            "evaluate",
            str(out),
            "--judge",
            "llm",
            "--judge-model",
            "m",
            "--judge-base-url",
            "http://127.0.0.1:9/v1",
            "--judge-cache",
            str(tmp_path / "judge.sqlite"),
        ],
        out,
        "judge.sqlite: the judge cache is damaged",
    )


def test_verify_reports_a_checkpoint_row_with_an_unknown_serializer(tmp_path, done_run):
    _spec, out = done_run
    conn = sqlite3.connect(out / "checkpoints.sqlite")
    with conn:
        conn.execute("UPDATE checkpoints SET type = 'no-such-serializer'")
    conn.close()
    result = cli("runs", "verify", str(out), "--sample", "0")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "checkpoints" in result.output and "no-such-serializer" in result.output, result.output


# --- exit codes -------------------------------------------------------------------------------


def test_run_exit_codes_0_all_recorded_3_some_incomplete_2_bad_input(tmp_path, monkeypatch):
    from tests.servers.openai_fault_server import FaultConfig, FaultServer

    monkeypatch.setattr("branchpoint.models.openai_compat.wait_exponential", lambda **kw: lambda rs: 0.0)
    config = FaultConfig(error_rate=1.0)
    with FaultServer(config) as server:
        data = base_spec(
            tmp_path,
            agent={"search": False},
            model={"provider": "openai", "base_url": server.base_url, "name": "m", "retries": 0},
        )
        data["model"].pop("script")
        spec = write_spec(tmp_path, data)
        out = tmp_path / "run"
        args = ["run", str(spec), "--out", str(out), "--no-progress", "--concurrency", "2"]
        result = cli(*args)
        assert result.exit_code == 3, result.output
        assert "4 executions incomplete" in result.output
        assert f"to resume them: branchpoint run {spec} --out {out} --concurrency 2" in result.output
        config.error_rate = 0.0
        result = cli(*args)
        assert result.exit_code == 0 and "4 run (ok: 4)" in result.output, result.output
    assert cli("run", str(tmp_path / "missing.yaml"), "--out", str(out)).exit_code == 2


def test_search_cap_is_at_most_1000(tmp_path):
    with pytest.raises(InputError, match='field "agent.search_cap": Input should be less than or equal to 1000'):
        load_spec(write_spec(tmp_path, base_spec(tmp_path, agent={"search_cap": 5000})))
