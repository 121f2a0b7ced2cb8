"""The viewer closed to other pages (issue 28): it answers only loopback Host names (a
DNS-rebinding page sends its own name: 403), and only requests that carry its per-start token
(`--no-token` opts out); tests/retrieval/test_server_hosts.py checks `retrieval serve`."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from starlette.testclient import TestClient

from branchpoint.evaluation.viewer import RunIndex, ViewerState, create_app
from branchpoint.loopback import host_name
from tests.evaluation.viewer.runs import view_process

TOKEN = "0123456789abcdef" * 3


@pytest.fixture(scope="module")
def viewer(study_run):
    return create_app(ViewerState(RunIndex.open(study_run).build()), token=TOKEN)


@pytest.mark.parametrize(
    "header, name",
    [
        ("127.0.0.1:8765", "127.0.0.1"),
        ("LOCALHOST", "localhost"),
        ("[::1]:80", "[::1]"),
        ("evil.example:1", "evil.example"),
    ],
)
def test_host_names_lose_their_port(header, name):
    assert host_name(header) == name


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "localhost"])
def test_the_viewer_answers_loopback_names_with_the_token(viewer, host):
    client = TestClient(viewer, base_url=f"http://{host}")
    assert client.get("/api/run", params={"token": TOKEN}).status_code == 200


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8765", "127.0.0.1.nip.io", "192.168.1.5:8765"])
def test_the_viewer_refuses_other_host_names_even_with_the_token(viewer, host):
    client = TestClient(viewer, base_url=f"http://{host}")
    for path in ("/", "/api/run", "/api/rows", "/static/viewer.js"):
        response = client.get(path, params={"token": TOKEN})
        assert response.status_code == 403 and "is not allowed" in response.text, (host, path)


def test_the_viewer_needs_its_token_then_a_cookie_carries_it(viewer):
    client = TestClient(viewer, base_url="http://127.0.0.1:8765")
    for path in ("/", "/api/run", "/api/rows", "/static/viewer.js"):
        assert client.get(path).status_code == 403, path
    assert client.get("/api/run", params={"token": "f" * 48}).status_code == 403
    assert client.get("/api/run", headers={"Authorization": f"token {TOKEN}"}).status_code == 200
    page = client.get("/", params={"token": TOKEN})  # the URL `view` prints
    assert page.status_code == 200 and "HttpOnly" in page.headers["set-cookie"]
    assert "SameSite=Strict" in page.headers["set-cookie"]
    assert client.get("/api/rows").status_code == 200  # the page's own requests: the cookie


def test_without_a_token_the_host_check_still_holds(study_run):
    client = TestClient(create_app(ViewerState(RunIndex.open(study_run).build())), base_url="http://127.0.0.1")
    assert client.get("/api/run").status_code == 200
    assert client.get("/api/run", headers={"Host": "attacker.example"}).status_code == 403


def test_view_no_token_prints_a_bare_url_that_answers(study_run):
    with view_process(study_run, "--no-token") as line:
        url = re.search(r"http://127\.0\.0\.1:\d+/(\S*)", line)
        assert url and url.group(1) == "", line
        for _ in range(200):
            try:
                response = httpx.get(url.group(0) + "api/run", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert response.status_code == 200
        assert httpx.get(url.group(0) + "api/run", headers={"Host": "attacker.example"}).status_code == 403
