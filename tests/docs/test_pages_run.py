"""Every shell command on the user pages runs, in the page's order, on the simulated model
(tests/docs/pages.py says what is changed and why), so a documented command that breaks fails
the suite. The quick pages run in the fast suite; whole studies carry the integration marker."""

from __future__ import annotations

import re

import pytest

from tests.docs.pages import (
    ABRIDGED,
    NOT_RUN,
    PREREQUISITES,
    Workspace,
    judge_reply,
    not_run_reason,
    page_commands,
)
from tests.evaluation.fake_openai import fake_openai

#: The user pages whose commands run: (page, marks). The search-value, forking, training, recipes
#: and validation pages run whole studies (minutes on 2 cores); the question-sets page's builder
#: embeds 4,611 public questions (about a minute), where the public data is present.
PAGES = [
    ("quickstart", ()),
    ("agents", ()),
    ("specs", ()),
    ("conditions", ()),
    ("evaluation", ()),
    ("reliability", ()),
    ("trace-contract", ()),
    ("questions", (pytest.mark.integration,)),
    ("training", (pytest.mark.integration,)),
    ("forking", (pytest.mark.integration,)),
    ("search-value", (pytest.mark.integration,)),
    ("validate", (pytest.mark.integration,)),
    ("recipes", (pytest.mark.integration,)),
    ("coming-from", (pytest.mark.integration,)),
]


@pytest.fixture()
def workspace(tmp_path, isolated_cache, monkeypatch):
    monkeypatch.setenv("MY_KEY_VAR", "not-a-real-key")  # the page's `--judge-api-key-env MY_KEY_VAR`
    with fake_openai() as judge:
        judge.responder = judge_reply
        ws = Workspace.make(tmp_path, judge.base_url)
        monkeypatch.chdir(ws.root)
        try:
            yield ws
        finally:
            ws.close()


@pytest.mark.parametrize("page", [pytest.param(p, marks=m, id=p) for p, m in PAGES])
def test_every_command_of_the_page_runs(page, workspace):
    commands = page_commands(page)
    ran = 0
    for cmd in commands:
        if not_run_reason(cmd) is None:
            workspace.run_command(cmd)
            ran += 1
    assert ran, f"docs/{page}.md: no command ran"


def test_every_exception_is_used():
    """Each NOT_RUN, ABRIDGED and PREREQUISITES entry still matches a command of a page."""
    commands = [c for page, _ in PAGES for c in page_commands(page)]
    texts = [c.text for c in commands]
    for pattern, _why in NOT_RUN:
        assert any(re.search(pattern, t) for t in texts), f"NOT_RUN entry matches no command: {pattern}"
    for pattern, _extra, _why in ABRIDGED:
        assert any(re.search(pattern, t) for t in texts), f"ABRIDGED entry matches no command: {pattern}"
    for run_dir in PREREQUISITES:
        assert any(run_dir in t for t in texts), f"no page command reads {run_dir}"


def test_only_set_up_commands_are_left_out():
    """What is not run is named, with its reason, and is never a branchpoint command."""
    for page, _ in PAGES:
        for cmd in page_commands(page):
            if not_run_reason(cmd) is not None:
                assert cmd.words[0] == "make", f"{cmd.where()}: {cmd.text}"
