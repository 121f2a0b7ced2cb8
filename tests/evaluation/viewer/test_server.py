"""The viewer's HTTP API and page, the static export, and the `view` command's messages."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from branchpoint.errors import BranchpointError
from branchpoint.evaluation.viewer import RunIndex, ViewerState, bind, create_app
from branchpoint.evaluation.viewer.export import export_run, shard_of
from branchpoint.traces import FORKS_FILE, read_records
from tests.evaluation.viewer.runs import view_process

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def client(study_run: Path) -> TestClient:
    return TestClient(create_app(ViewerState(RunIndex.open(study_run).build())), base_url="http://127.0.0.1:8765")


def test_page_and_its_files_need_no_network(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and '"mode": "server"' in page.text
    assert not re.search(r"(src|href)=\"https?://", page.text)
    js = client.get("/static/viewer.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "https://" not in js.text and "http://" not in js.text
    assert client.get("/static/../index.py").status_code == 404


def test_api_answers_rows_execution_and_tree(client: TestClient, study_run: Path) -> None:
    run = client.get("/api/run").json()
    assert run["judge"] == "rule" and run["metrics"]["by_condition"] and run["value"]["gain_risk"]
    rows = client.get("/api/rows").json()
    assert rows["done"] and rows["total"] == len(rows["rows"]) and rows["errors"] == []
    cols = rows["columns"]
    assert client.get("/api/rows?since=5").json()["rows"] == rows["rows"][5:]
    fork = read_records(study_run / FORKS_FILE)[0]
    view = client.get(f"/api/execution/{fork.parent.execution_id}").json()
    assert view["record"]["question"] == fork.question and view["branches"] > 0
    assert fork.parent.checkpoint_id in {m["checkpoint_id"] for m in view["checkpoints"]}
    tree = client.get(f"/api/tree/{fork.parent.execution_id}").json()
    assert tree["states"] and all("delta" in s for s in tree["states"])
    missing = client.get("/api/execution/nope")
    assert missing.status_code == 404 and "no execution nope" in missing.json()["error"]
    assert client.get("/api/rows?since=x").status_code == 400
    assert rows["rows"][0][cols.index("id")]


def test_export_writes_the_same_views_as_files(study_run: Path, tmp_path: Path) -> None:
    state = ViewerState(RunIndex.open(study_run))
    counts = export_run(state, tmp_path / "out")
    out = tmp_path / "out"
    assert counts["trees"] == 4 and (out / "index.html").is_file() and (out / "static" / "viewer.js").is_file()
    assert '"mode": "static"' in (out / "index.html").read_text()
    eid = state.index.order[0]
    text = (out / "data" / "x" / f"{shard_of(eid)}.js").read_text()
    payload = json.loads(text[text.index(",") + 1 : text.rindex(")")])
    assert payload[eid]["record"]["execution_id"] == eid
    with pytest.raises(BranchpointError, match="other than the run directory"):
        export_run(state, study_run)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(BranchpointError, match="not a viewer export"):
        export_run(state, tmp_path / "busy")


def test_shard_function_is_fnv1a() -> None:
    assert shard_of("") == f"{0x811C9DC5 % 256:02x}"
    assert shard_of("a") == f"{0xE40C292C % 256:02x}"  # FNV-1a("a") = 0xe40c292c


def test_port_in_use_is_a_clear_error() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(BranchpointError, match=f"port {port} on 127.0.0.1 is in use"):
            bind(port)
    finally:
        taken.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "branchpoint.cli", "view", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_view_command_messages(study_run: Path, tmp_path: Path) -> None:
    bad = _cli(str(tmp_path))
    assert bad.returncode == 2 and "not a run directory" in bad.stderr
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        busy = _cli(str(study_run), "--port", str(taken.getsockname()[1]))
    finally:
        taken.close()
    assert busy.returncode == 2 and "is in use" in busy.stderr and "--port" in busy.stderr
    done = _cli(str(study_run), "--export", str(tmp_path / "export"))
    assert done.returncode == 0 and "4 fork trees" in done.stdout, done.stderr


def test_report_links_outcomes_into_a_viewer_export(study_run: Path, tmp_path: Path) -> None:
    import shutil

    from branchpoint.evaluation.report import write_report

    run = tmp_path / "run"
    shutil.copytree(study_run, run)
    report, _ = write_report(run)
    assert "Executions in the viewer" not in report.read_text()
    export_run(ViewerState(RunIndex.open(run)), run / "viewer")
    text = write_report(run)[0].read_text()
    assert "## Executions in the viewer" in text
    assert "](viewer/index.html#/?condition=agent.search%3Dtrue%2Cmodel.name%3Dm1&outcome=correct_answer)" in text


def test_view_command_serves_on_loopback(study_run: Path) -> None:
    import httpx

    with view_process(study_run) as line:
        url = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]{48})", line)
        assert url, f"no URL with a token in the first line of output: {line!r}"
        base, token = url.group(1), url.group(2)
        auth = {"Authorization": f"token {token}"}
        for _ in range(600):
            rows = httpx.get(base + "api/rows", headers=auth, timeout=5).json()
            if rows["done"]:
                break
            time.sleep(0.05)
        assert rows["total"] == sum(
            len(read_records(study_run / f)) for f in ("executions.jsonl", FORKS_FILE, "replays.jsonl")
        )
        assert rows["errors"] == []
        page = httpx.get(url.group(0), timeout=5)  # the printed URL: the page, and a cookie for its requests
        assert "branchpoint" in page.text and page.cookies
        assert httpx.get(base + "api/run", cookies=page.cookies, timeout=5).status_code == 200
        assert httpx.get(base + "api/run", timeout=5).status_code == 403  # no token
        rebound = httpx.get(base + "api/run", headers={**auth, "Host": "attacker.example"}, timeout=5)
        assert rebound.status_code == 403 and "not allowed" in rebound.text


def test_forecasts_files_a_user_adds_are_checked(study_run: Path, tmp_path: Path) -> None:
    with pytest.raises(BranchpointError, match="--forecasts .*missing.jsonl: file not found"):
        ViewerState(RunIndex.open(study_run), [tmp_path / "missing.jsonl"])
    bad = tmp_path / "mine.jsonl"
    bad.write_text(
        '{"parent_execution_id": "x", "checkpoint_id": "y", "q_think": 0.2, "q_search": 0.4}\n{"q_think": 1}\n'
    )
    client = TestClient(create_app(ViewerState(RunIndex.open(study_run).build(), [bad])), base_url="http://127.0.0.1")
    problems = client.get("/api/run").json()["forecast_problems"]
    assert problems == [
        f'{bad.resolve()} line 2: expected "parent_execution_id", "checkpoint_id", "q_think", "q_search"'
    ]
