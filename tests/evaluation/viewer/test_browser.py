"""The viewer in a real browser: Debian's chromium driven by Playwright (never a downloaded browser).

Skips, with the reason, where the playwright package or the chromium binary is missing or the
browser cannot start. Set BRANCHPOINT_VIEWER_SCREENSHOTS=docs/img to write each view's
screenshot for the docs page (docs/viewing-runs.md).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from branchpoint.evaluation.viewer import RunIndex, ViewerState
from branchpoint.evaluation.viewer.export import export_run
from branchpoint.evaluation.viewer.server import running
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, dump_record, read_records

SHOTS = os.environ.get("BRANCHPOINT_VIEWER_SCREENSHOTS")


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright; it is in the dev extra)")
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium)")
    with sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        except Error as exc:
            pytest.skip(f"chromium at {exe} could not be launched: {str(exc).splitlines()[0]}")
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    pg.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="module")
def served(study_run: Path) -> Iterator[str]:
    with running(ViewerState(RunIndex.open(study_run).start())) as url:
        yield url


def _shot(page: Any, name: str, full: bool = False) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"viewer-{name}.png"), full_page=full)


def _table(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#bp-table tr.clickable")
    page.wait_for_function("state.done")


def test_table_filters_sorts_and_searches(page: Any, served: str, study_run: Path) -> None:
    _table(page, served)
    rows = read_records(study_run / EXECUTIONS_FILE)
    assert page.inner_text("#bp-count") == f"{len(rows)} of {len(rows)} executions"
    _shot(page, "table")
    page.select_option("select[name=outcome]", "wrong_answer")
    index = RunIndex.open(study_run).build()
    wrong = [r for r in rows if index.entry(r.execution_id).row["outcome"] == "wrong_answer"]
    assert wrong
    assert page.inner_text("#bp-count").startswith(f"{len(wrong)} of")
    assert page.locator("#bp-table tbody tr").count() == len(wrong)
    assert "#/?outcome=wrong_answer" in page.url  # the filter is in the link
    page.click("#bp-clear")
    page.fill("input[name=q]", "mona lisa")
    page.wait_for_function("document.querySelector('#bp-count').textContent.startsWith('2 of')")
    assert all("Mona Lisa" in t for t in page.locator("#bp-table tbody tr td:nth-child(2)").all_inner_texts())
    page.click("#bp-clear")
    page.click("th[data-sort=cost]")
    page.click("th[data-sort=cost]")  # descending
    first_cost = page.locator("#bp-table tbody tr").first.locator("td").nth(8).inner_text()
    assert float(first_cost.replace(",", "")) == max(index.entry(r.execution_id).row["cost"] for r in rows)
    page.select_option("select[name=kind]", "fork")
    assert page.inner_text("#bp-count").endswith("fork branches")


def test_execution_timeline_tree_branch_and_side_by_side(page: Any, served: str, study_run: Path) -> None:
    fork = next(f for f in read_records(study_run / FORKS_FILE) if not f.answerable)  # evidence labels too
    parent = fork.parent.execution_id
    _table(page, served)
    page.fill("input[name=q]", parent[:12])
    page.locator(f"tr[data-id='{parent}']").click()
    page.wait_for_selector(".timeline .step")
    text = page.inner_text("main")
    assert "checkpoint initial" in text and fork.parent.checkpoint_id in text
    assert "query " in text and "source wiki" in text and "TPC cost" in text and "Judge labels" in text
    assert "llm: NEGATIVE" in text and "llm: POSITIVE" in text  # evidence labels on the passages
    page.locator(".step details summary").first.click()  # reasoning text, folded by default
    assert "I need evidence about" in page.inner_text(".step .reasoning")
    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, "execution")
    page.locator(".ckpt a", has_text="branches").first.click()
    page.wait_for_selector(".state")
    tree = page.inner_text("main")
    assert "Δ = p_SEARCH − p_THINK" in tree and "Δ = p_SEARCH − p_STOP" in tree and "95% [" in tree
    assert "1 forecast for this state" in tree and "file:forecasts" in tree and "replay" in tree
    _shot(page, "tree", full=True)
    branch = page.locator(".state a[data-branch]").first
    branch_id = branch.get_attribute("data-branch")
    page.locator(".state input[data-pick]").nth(0).check()
    page.locator(".state input[data-pick]").nth(2).check()
    branch.click()
    page.wait_for_selector(".timeline")
    branch_text = page.inner_text("main")
    assert "forked from" in branch_text and branch_id in branch_text
    assert "before the fork" in branch_text and "temperature 0.6" in branch_text
    page.go_back()
    page.wait_for_selector(".state")
    page.locator(".state input[data-pick]").nth(0).check()
    page.locator(".state input[data-pick]").nth(2).check()
    page.click("#bp-compare-branches")
    page.wait_for_selector("#bp-right .timeline")
    assert page.locator(".side .card").count() == 2
    _shot(page, "compare")


def test_static_export_opens_from_disk(page: Any, study_run: Path, tmp_path: Path) -> None:
    export_run(ViewerState(RunIndex.open(study_run)), tmp_path / "export")
    index_url = (tmp_path / "export" / "index.html").as_uri()
    _table(page, index_url)
    assert "executions" in page.inner_text("#bp-count")
    parent = read_records(study_run / FORKS_FILE)[0].parent.execution_id
    page.goto(f"{index_url}#/tree/{parent}")
    page.wait_for_selector(".state")
    assert "success rate" in page.inner_text("main")
    page.goto(f"{index_url}#/execution/{parent}")
    page.wait_for_selector(".timeline .step")


def test_broken_lines_are_error_rows_and_the_rest_is_shown(page: Any, study_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(study_run, run)
    lines = (run / FORKS_FILE).read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "repeat": "twice"})
    (run / FORKS_FILE).write_text("\n".join(lines) + "\n")
    with running(ViewerState(RunIndex.open(run).start())) as url:
        _table(page, url)
        errors = page.inner_text("#bp-errors")
        assert "1 line could not be read" in errors and "forks.jsonl" in errors and 'field "repeat"' in errors
        assert page.locator("#bp-errors tr.error-row td").nth(1).inner_text() == "3"
        page.select_option("select[name=kind]", "fork")
        assert page.inner_text("#bp-count").startswith(f"{len(lines) - 1} of")
        _shot(page, "errors")


def test_two_runs_requests_replies_judge_outputs_diff_and_live(
    page: Any, logged_run: Path, study_run: Path, tmp_path: Path
) -> None:
    """One server over two runs: the conditions × runs grid and the run filter; one execution's
    requests as sent, replies and the LLM judge's output; two executions' requests diffed; and
    a record appended to a run while the page is open appears without a reload."""
    run = tmp_path / "logged"
    shutil.copytree(logged_run, run)
    logged = read_records(run / EXECUTIONS_FILE)
    state = ViewerState(RunIndex.open(run), more=[RunIndex.open(study_run)]).start()
    with running(state) as url:
        _table(page, url)
        study = read_records(study_run / EXECUTIONS_FILE)
        assert page.inner_text("#bp-count") == f"{len(logged) + len(study)} of {len(logged) + len(study)} executions"
        grid = page.inner_text("#bp-grid")
        assert "logged" in grid and "study" in grid and f"n {len(logged)}" in grid
        _shot(page, "runs")
        page.select_option("select[name=run]", "1")
        assert page.inner_text("#bp-count").startswith(f"{len(study)} of")
        page.click("#bp-clear")
        searched = [r for r in logged if r.search_calls >= 1][:2]
        page.goto(f"{url.split('?')[0]}#/execution/{searched[0].execution_id}")
        page.wait_for_selector(".step details.request")
        for d in page.locator(".step details.request, .step details.reply").all():
            d.evaluate("el => el.open = true")
        text = page.inner_text("main")
        assert "request as sent" in text and "requests.jsonl line" in text and "tools offered: search" in text
        assert "temperature 0.6" in text and "reply as received" in text and "finish tool_calls" in text
        assert page.locator(".request .msg.role-tool").count() >= 1
        outputs = page.inner_text(".judge-output")
        assert "raw output" in outputs and "It matches." in outputs and "Weighing the response" in outputs
        page.locator(".step details.request").nth(1).scroll_into_view_if_needed()
        _shot(page, "request")
        page.locator(".judge-output").first.scroll_into_view_if_needed()
        _shot(page, "judge")
        a, b = searched[0].execution_id, searched[1].execution_id
        page.goto(f"{url.split('?')[0]}#/compare/{a}/{b}")
        page.wait_for_selector("details.diff")
        assert "lines differ" in page.inner_text("details.diff >> nth=0")
        assert page.locator("details.diff .del").count() and page.locator("details.diff .add").count()
        page.locator("details.diff").first.scroll_into_view_if_needed()
        _shot(page, "diff")
        page.goto(url)
        page.wait_for_function("state.done")
        late = logged[0].model_copy(update={"execution_id": "late-1", "question": "A late question?"})
        with (run / EXECUTIONS_FILE).open("a") as fh:
            fh.write(dump_record(late) + "\n")
        page.wait_for_function(
            f"document.querySelector('#bp-count').textContent.startsWith('{len(logged) + len(study) + 1} of')",
            timeout=10_000,
        )
        assert "A late question?" in page.inner_text("#bp-table")


def test_requests_rebuilt_from_checkpoints_are_labelled_rebuilt(page: Any, rebuilt_run: Path) -> None:
    """A run made without --log-requests, its requests rebuilt (`branchpoint requests rebuild`):
    each model step unfolds into its request, labelled as rebuilt from its checkpoint and as
    matching the fingerprint of what was sent, beside the reply as received."""
    searched = next(r for r in read_records(rebuilt_run / EXECUTIONS_FILE) if r.search_calls >= 1)
    with running(ViewerState(RunIndex.open(rebuilt_run)).start()) as url:
        _table(page, url)  # the token's cookie, then the execution
        page.goto(f"{url.split('?')[0]}#/execution/{searched.execution_id}")
        page.wait_for_selector(".step details.request.rebuilt")
        for d in page.locator(".step details.request, .step details.reply").all():
            d.evaluate("el => el.open = true")
        requests = page.locator(".step details.request")
        assert requests.count() == page.locator(".step details.request.rebuilt").count() >= 2
        text = page.inner_text("main")
        assert "rebuilt from checkpoint" in text and "requests.rebuilt.jsonl line" in text
        assert "matches the fingerprint recorded from what was sent" in text and "request as sent" not in text
        assert "tools offered: search" in text and "reply as received" in text
        assert page.locator(".request .msg.role-tool").count() >= 1
        requests.nth(1).scroll_into_view_if_needed()
        _shot(page, "request-rebuilt")
