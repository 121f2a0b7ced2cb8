"""The page runner's own checks fail where a page is wrong: an error it shows but the command
does not print, a `curl` answer with other keys, a server command it shows failing that serves."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.docs.page_files import write_flashrag_corpus, write_flashrag_index, write_shown_file
from tests.docs.page_servers import PageServers
from tests.docs.pages import console_outputs, page_commands, shows_error


def test_console_outputs_are_the_lines_under_each_prompt():
    body = "$ branchpoint a \\\n  --b 1\nserving 12 passages\n$ branchpoint c\nerror: c: holds 1000 rows\n"
    assert console_outputs(10, body) == {10: "serving 12 passages", 13: "error: c: holds 1000 rows"}


def test_an_error_matches_but_for_numbers_digests_cuts_and_wrapping():
    shown = "error: x.index: holds 1000 vectors (fingerprint b593f07d…) but wiki-18.jsonl has 999 passages"
    assert shows_error(
        shown, "error: x.index: holds 79 vectors (fingerprint 0a1b2c3d4e5f6071) but\nwiki-18.jsonl has 78 passages"
    )
    assert not shows_error(
        shown, "error: x.index: holds 79 rows (fingerprint 0a1b2c3d) but wiki-18.jsonl has 78 passages"
    )
    assert not shows_error(
        shown, "Error: x.index: holds 79 vectors (fingerprint 0a1b2c3d) but wiki-18.jsonl has 78 passages"
    )


def test_the_pages_shown_errors_are_found():
    errors = [c for c in page_commands("coming-from") if c.shown_error]
    assert len(errors) == 3, [c.text for c in errors]
    assert all(c.shown_error.startswith("error: ") for c in errors)


class _Health(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok", "passages": 3}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_curl_answers_must_have_the_keys_the_page_shows(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        servers = PageServers(tmp_path, ports={8011: server.server_address[1]})
        words = ["curl", "-s", "http://127.0.0.1:8011/health"]
        servers.curl(words, '{"status":"ok","passages":1000}', "page line 1")
        with pytest.raises(AssertionError, match="the page shows"):
            servers.curl(words, '{"status":"ok","passages":1000,"kind":"flat"}', "page line 1")
        with pytest.raises(AssertionError, match="no server of the page"):
            servers.curl(["curl", "-s", "http://127.0.0.1:9999/health"], "", "page line 2")
    finally:
        server.shutdown()


def test_a_server_the_page_shows_failing_must_not_serve(tmp_path):
    write_flashrag_index(tmp_path, "minilm_Flat.index", "minilm-onnx")
    write_flashrag_corpus(tmp_path)
    args = [
        "retrieval",
        "serve",
        "--index",
        "minilm_Flat.index",
        "--corpus",
        "wiki-18.jsonl",
        "--encoder",
        "minilm-onnx",
    ]
    with pytest.raises(AssertionError, match="served instead of failing"):
        PageServers(tmp_path).refused(args, "page line 3", patience_s=20)


def test_a_file_the_page_shows_is_written_as_shown(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```yaml\n# spec.yaml\nname: x\n```\n", encoding="utf-8")
    assert write_shown_file(page, "spec.yaml", tmp_path).read_text() == "# spec.yaml\nname: x\n"
    with pytest.raises(AssertionError, match="no yaml block starts with '# other.yaml'"):
        write_shown_file(page, "other.yaml", tmp_path)
