"""Each route of the viewer's app, pinned where the API tests leave it open: the page's second
URL, the static files' allow-list and media types, `no-store` on every API answer, the run
summary's fields, the 400s for a bad `run`, `since` or `limit`, the 404 for an unknown execution's
fork tree, and the order of the guards (Host before token, both before routing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from branchpoint.evaluation.viewer import RunIndex, ViewerState, create_app
from branchpoint.traces import FORKS_FILE, read_records

TOKEN = "fedcba9876543210" * 3


@pytest.fixture(scope="module")
def client(study_run: Path) -> TestClient:
    return TestClient(create_app(ViewerState(RunIndex.open(study_run).build())), base_url="http://127.0.0.1:8765")


def test_the_page_has_a_second_url_and_the_static_files_an_allow_list(client: TestClient) -> None:
    home, again = client.get("/"), client.get("/index.html")
    assert again.status_code == 200 and again.text == home.text
    assert again.headers["content-type"] == "text/html; charset=utf-8"
    css = client.get("/static/viewer.css")
    assert css.status_code == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
    assert client.get("/static/viewer.js").headers["content-type"] == "text/javascript; charset=utf-8"
    for name in ("index.html", "nope.js"):  # index.html is in static/, but only the two files are served
        missing = client.get(f"/static/{name}")
        assert (missing.status_code, missing.text) == (404, "not found"), name
    assert "cache-control" not in home.headers


def test_every_api_answer_is_json_and_not_cached(client: TestClient, study_run: Path) -> None:
    eid = read_records(study_run / FORKS_FILE)[0].parent.execution_id
    for path in (
        "/api/run",
        "/api/runs",
        "/api/rows",
        f"/api/execution/{eid}",
        f"/api/tree/{eid}",
        "/api/rows?since=x",
    ):
        response = client.get(path)
        assert response.headers["cache-control"] == "no-store", path
        assert response.headers["content-type"] == "application/json", path


def test_the_run_summary_and_the_run_list(client: TestClient, study_run: Path) -> None:
    run = client.get("/api/run").json()
    assert run["run"] == 0 and run["runs"] == 1 and run["forecast_problems"] == []
    assert run["run_dir"] == str(study_run) and run["name"] == study_run.name
    listed = client.get("/api/runs").json()
    assert list(listed) == ["runs"] and len(listed["runs"]) == 1
    assert listed["runs"][0] == {k: v for k, v in run.items() if k != "runs"}


@pytest.mark.parametrize("path", ["/api/run", "/api/rows", "/api/execution/x", "/api/tree/x"])
@pytest.mark.parametrize("raw", ["1", "x", "-1"])
def test_a_run_that_is_not_shown_is_a_400(client: TestClient, path: str, raw: str) -> None:
    response = client.get(path, params={"run": raw})
    assert (response.status_code, response.json()) == (400, {"error": "run: expected 0 to 0"})


def test_rows_paging_and_its_bad_numbers(client: TestClient) -> None:
    every = client.get("/api/rows").json()
    one = client.get("/api/rows?limit=0").json()  # at least one row
    assert one["rows"] == every["rows"][:1] and one["since"] == 0
    assert client.get("/api/rows?since=-4").json()["rows"] == every["rows"]
    for query in ("since=x", "limit=y", "since=1.5", "limit=run"):  # "run" in int()'s message: still this one
        bad = client.get(f"/api/rows?{query}")
        assert (bad.status_code, bad.json()) == (400, {"error": "since, limit: expected whole numbers"}), query


def test_an_unknown_execution_is_a_404_in_both_views(client: TestClient, study_run: Path) -> None:
    for view in ("execution", "tree"):
        missing = client.get(f"/api/{view}/nope")
        assert (missing.status_code, missing.json()) == (404, {"error": f"no execution nope in {study_run}"}), view


def test_the_host_check_comes_first_then_the_token_then_the_routes(study_run: Path) -> None:
    app = create_app(ViewerState(RunIndex.open(study_run).build()), token=TOKEN)
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    rebound = client.get("/api/run", headers={"Host": "attacker.example"})
    assert rebound.status_code == 403 and "is not allowed" in rebound.text
    unknown = client.get("/api/nothing")  # no token: refused before the router says 404
    assert unknown.status_code == 403 and "a token is needed" in unknown.text
    assert client.get("/api/nothing", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
    assert client.get("/api/tree/nope", headers={"Authorization": f"token {TOKEN}"}).status_code == 404
