"""The viewer's newer views through its API: each model step's request as sent and reply as
received (from `--log-requests`), the judge's raw output and reasoning, several runs in one
server, a running run's new records, and repeat labels unique within a branch group."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from branchpoint.evaluation.viewer import RunIndex, ViewerState, create_app
from branchpoint.evaluation.viewer.views import repeat_labels, tree_view
from branchpoint.models.request_log import read_requests
from branchpoint.traces import (
    EXECUTIONS_FILE,
    FORKS_FILE,
    REBUILT_REQUESTS_FILE,
    REQUESTS_FILE,
    dump_record,
    read_records,
)


def _client(*runs: Path) -> TestClient:
    indexes = [RunIndex.open(r).build() for r in runs]
    return TestClient(create_app(ViewerState(indexes[0], more=indexes[1:])), base_url="http://127.0.0.1:8765")


def test_each_model_step_has_its_request_as_sent_and_its_reply(logged_run: Path) -> None:
    client = _client(logged_run)
    logged = read_requests(logged_run / REQUESTS_FILE)
    searched = next(r for r in read_records(logged_run / EXECUTIONS_FILE) if r.search_calls >= 1)
    view = client.get(f"/api/execution/{searched.execution_id}").json()
    mine = [q for q in logged if q["execution_id"] == searched.execution_id]
    model_steps = [s for s in view["steps"] if s["kind"] != "search"]
    assert len(model_steps) == len(mine) >= 2 and view["requests_note"] is None
    for step, sent in zip(model_steps, mine):
        assert step["request"]["body"] == sent["body"] and step["request"]["source"] == REQUESTS_FILE
        assert step["request"]["messages"] == sent["body"]["messages"]
        assert step["request"]["settings"]["temperature"] == 0.6 and "messages" not in step["request"]["settings"]
    first, second = model_steps[0], model_steps[1]
    assert [t["function"]["name"] for t in first["request"]["tools"]] == ["search"]
    assert first["reply"]["tool_calls"][0]["name"] == "search"  # the reply as received
    assert first["reply"]["finish_reason"] == "tool_calls"
    tool = next(m for m in second["request"]["messages"] if m["role"] == "tool")
    passage = next(s for s in view["steps"] if s["kind"] == "search")["retrieved"][0]
    # the evidence as sent: clipped to evidence_words (12), not the stored passage
    assert passage["text"].split()[:12] == tool["content"].split(") ", 1)[1].split()[:12]
    assert len(passage["text"].split()) > 12 and passage["text"] not in tool["content"]


def test_requests_rebuilt_from_checkpoints_are_placed_on_their_steps_and_marked(
    rebuilt_run: Path, logged_run: Path, tmp_path: Path
) -> None:
    """A run without requests.jsonl shows the requests rebuilt from its checkpoints, marked as
    rebuilt, and they are the logged twin run's requests; without the rebuilt file, the note
    says how to make it."""
    client = _client(rebuilt_run)
    sent = read_requests(logged_run / REQUESTS_FILE)
    searched = next(r for r in read_records(rebuilt_run / EXECUTIONS_FILE) if r.search_calls >= 1)
    view = client.get(f"/api/execution/{searched.execution_id}").json()
    model_steps = [s for s in view["steps"] if s["kind"] != "search"]
    mine = [q["body"] for q in sent if q["execution_id"] == searched.execution_id]
    assert view["requests_note"] is None and [s["request"]["body"] for s in model_steps] == mine
    for step in model_steps:
        assert step["request"]["source"] == REBUILT_REQUESTS_FILE
        assert step["request"]["rebuilt"]["from"] == "checkpoint" and step["request"]["rebuilt"]["verified"] is True
    bare = tmp_path / "bare"
    shutil.copytree(rebuilt_run, bare)
    (bare / REBUILT_REQUESTS_FILE).unlink()
    note = _client(bare).get(f"/api/execution/{searched.execution_id}").json()["requests_note"]
    assert "--log-requests" in note and f"branchpoint requests rebuild {bare}" in note


def test_requests_that_do_not_match_the_steps_are_listed_apart(logged_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(logged_run, run)
    lines = (run / REQUESTS_FILE).read_text().splitlines()
    dropped = json.loads(lines[0])["execution_id"]
    (run / REQUESTS_FILE).write_text("\n".join(lines[1:]) + "\n")
    view = _client(run).get(f"/api/execution/{dropped}").json()
    assert "requests are listed apart" in view["requests_note"] and view["unplaced_requests"]
    assert not any("request" in s for s in view["steps"])
    (run / REQUESTS_FILE).unlink()
    assert "--log-requests" in _client(run).get(f"/api/execution/{dropped}").json()["requests_note"]


def test_the_judges_raw_output_and_reasoning_are_shown(logged_run: Path) -> None:
    client = _client(logged_run)
    rec = read_records(logged_run / EXECUTIONS_FILE)[0]
    judgments = [j for j in client.get(f"/api/execution/{rec.execution_id}").json()["judgments"] if j["judge"] == "llm"]
    assert judgments and all(j["raw"].startswith("It matches.") for j in judgments)
    assert all(j["reasoning"].startswith("Weighing the response") and j["model"] == "judge-model" for j in judgments)


def test_several_runs_in_one_server(logged_run: Path, study_run: Path) -> None:
    client = _client(logged_run, study_run)
    runs = client.get("/api/runs").json()["runs"]
    assert [r["name"] for r in runs] == ["logged", "study"] and [r["run"] for r in runs] == [0, 1]
    rows0, rows1 = (client.get(f"/api/rows?run={k}").json() for k in (0, 1))
    study = read_records(study_run / EXECUTIONS_FILE)
    ids = {row[rows1["columns"].index("id")] for row in rows1["rows"]}
    assert {r.execution_id for r in study} <= ids and rows0["total"] == len(read_records(logged_run / EXECUTIONS_FILE))
    assert client.get(f"/api/execution/{study[0].execution_id}?run=1").json()["record"]["run_id"] == "study"
    assert client.get(f"/api/execution/{study[0].execution_id}?run=0").status_code == 404
    assert client.get("/api/rows?run=2").status_code == 400 and client.get("/api/execution/x?run=-1").status_code == 400
    paged = client.get("/api/rows?run=1&since=3&limit=4").json()
    assert paged["rows"] == rows1["rows"][3:7] and paged["total"] == rows1["total"]


def test_a_running_runs_new_lines_are_added_when_whole(study_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(study_run, run)
    client = _client(run)
    before = client.get("/api/rows").json()["total"]
    new = read_records(run / EXECUTIONS_FILE)[0].model_copy(update={"execution_id": "late-1", "question": "Late?"})
    line = dump_record(new) + "\n"
    with (run / EXECUTIONS_FILE).open("a") as fh:  # half a line: a record being written
        fh.write(line[:40])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("time.monotonic", lambda: 1e9)  # past the refresh interval
        rows = client.get("/api/rows").json()
        assert rows["total"] == before and rows["errors"] == []
    with (run / EXECUTIONS_FILE).open("a") as fh:
        fh.write(line[40:])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("time.monotonic", lambda: 2e9)
        rows = client.get(f"/api/rows?since={before}").json()
    assert rows["total"] == before + 1 and rows["rows"][0][rows["columns"].index("id")] == "late-1"
    assert rows["errors"] == []


def test_repeat_labels_are_unique_when_studies_are_pooled(study_run: Path, tmp_path: Path) -> None:
    assert repeat_labels([{"repeat": 0}, {"repeat": 1}]) == ["#0", "#1"]
    assert repeat_labels([{"repeat": 0, "fork": "aaaaaa11"}, {"repeat": 0, "fork": "bbbbbb22"}]) == [
        "#0·aaaaaa",
        "#0·bbbbbb",
    ]
    assert repeat_labels([{"repeat": 0}, {"repeat": 0}, {"repeat": 1}]) == ["#0·1", "#0·2", "#1"]
    run = tmp_path / "run"
    shutil.copytree(study_run, run)
    forks = read_records(run / FORKS_FILE)
    pooled = [  # a second study of the same states with other fork settings
        f.model_copy(update={"execution_id": f.execution_id + "-b", "fork_fingerprint": "f00d" * 4}) for f in forks
    ]
    with (run / FORKS_FILE).open("a") as fh:
        fh.writelines(dump_record(f) + "\n" for f in pooled)
    index = RunIndex.open(run).build()
    tree = tree_view(index, forks[0].parent.execution_id, {})
    for state in tree["states"]:
        for action in state["actions"].values():
            labels = [b["label"] for b in action["branches"]]
            assert len(set(labels)) == len(labels), labels
    assert any("·" in b["label"] for s in tree["states"] for a in s["actions"].values() for b in a["branches"])
