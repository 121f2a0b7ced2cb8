"""The commands of docs/models.md's "Response cache (`--cache`)" section run as a reader would
(tests/docs/pages.py: on the simulated model), and the second run sends nothing.

The rest of that page serves vLLM on a GPU, so the page is not in test_pages_run.py's list;
this section's commands run here with the same workspace and changes."""

from __future__ import annotations

from tests.conftest import REPO
from tests.docs.pages import Workspace, page_commands

HEADING = "## Response cache (`--cache`)"


def section_commands() -> list:
    """The page's commands below the section's heading (up to the next heading)."""
    lines = (REPO / "docs" / "models.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADING) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [c for c in page_commands("models") if start < c.line <= end]


def test_the_response_cache_section_runs_and_its_rerun_sends_nothing(tmp_path, isolated_cache, monkeypatch):
    ws = Workspace.make(tmp_path, "http://127.0.0.1:9/v1")  # the section asks no judge
    monkeypatch.chdir(ws.root)
    commands = section_commands()
    assert [c.words[1] for c in commands] == ["run", "run", "fork"]
    outputs = [ws.run_command(c) or "" for c in commands]
    assert "response cache: 0 of" in outputs[0]
    assert "model calls answered from the cache, 0 sent" in outputs[1]
    assert "response cache: 0 of" not in outputs[1]
    assert (ws.root / "runs" / "response-cache" / "responses.sqlite").is_file()
