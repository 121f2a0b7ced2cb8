"""docs/recipes.md: every command in its `bash` blocks runs as written, at the page's small
sizes, on the scripted model (the spec's model replaced with `--set model=...`, the augment
model with `--model-spec`), with runs/, corpora/ and reports/ moved to a temporary folder."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from tests.conftest import REPO
from tests.evaluation.fake_openai import chat_body, fake_openai

PAGE = REPO / "docs" / "recipes.md"
SHARED_DATA = REPO.parent / "shared" / "data"
#: Decide to search once, then answer (the constrained policy's JSON continuation); cycled.
SCRIPT = ['search", "text": "capital city"}', 'answer", "text": "Canberra"}']
SCRIPTED_MODEL = "model=" + yaml.safe_dump({"provider": "scripted", "script": SCRIPT}, default_flow_style=True).strip()
DOCUMENT = (
    "No reliable source records this; the premise of the question is not established, so the honest "
    "answer is that it cannot be known from any available evidence. "
) * 4


def recipe_commands(text: str) -> list[list[str]]:
    """The `branchpoint ...` commands of the page's bash blocks, split like a shell line."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip().startswith("branchpoint "):
                commands.append(shlex.split(line)[1:])
    return commands


def test_the_page_maps_every_table_and_figure_of_both_studies():
    text = PAGE.read_text()
    for item in [*(f"Table {i}" for i in range(2, 11)), *(f"Figure {i}" for i in (1, 2, 3, 4, 5, 6, 8, 9))]:
        assert item in text.split("## Search-value study")[0], f"over-searching study: {item}"
    value_part = text.split("## Search-value study")[1]
    for item in ["Table 1", *(f"Figure {i}" for i in range(1, 9))]:
        assert item in value_part, f"search-value study: {item}"
    assert "issue 14" in text and "vLLM" in text


def judge_reply(path: str, body: dict) -> tuple[int, dict]:
    """A judge server for the LLM-judge recipes: a label of the kind each judge prompt asks for."""
    prompt = body["messages"][-1]["content"]
    if "Gold answers" in prompt:
        label = "CORRECT" if "Canberra" in prompt.split("Response:")[-1] else "INCORRECT"
    elif "Document:" in prompt:
        label = "POSITIVE"
    else:
        label = "ABSTAINED" if "know" in prompt.split("Response:")[-1].lower() else "ANSWERED"
    return 200, chat_body(f"LABEL: {label}")


def _run_recipes(commands: list[list[str]], tmp_path, judge_url: str | None = None) -> int:
    model_spec = tmp_path / "scripted-model.yaml"
    model_spec.write_text(yaml.safe_dump({"provider": "scripted", "script": [DOCUMENT]}))
    runner = CliRunner()
    for args in commands:
        args = [re.sub(r"(^|=)(runs|corpora|reports)/", rf"\g<1>{tmp_path}/\g<2>/", a) for a in args]
        if judge_url is not None:  # the page's vLLM judge at 127.0.0.1:8000 is a loopback fake here
            args = [judge_url if a == "http://127.0.0.1:8000/v1" else a for a in args]
        if args[0] in ("run", "quickstart"):
            args += ["--set", SCRIPTED_MODEL]
        if args[0] == "augment":
            args += ["--model-spec", str(model_spec)]
        if args[0] in ("run", "quickstart", "fork", "evaluate", "value", "augment"):
            args += ["--no-progress"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, f"branchpoint {shlex.join(args)}\n{result.output}"
    return len(commands)


def _needs_shared_data(args: list[str]) -> bool:
    text = " ".join(args)
    return any(s in text for s in ("../shared/data", "runs/bench", "runs/corpora", "experiments/corpora.yaml"))


def _is_corpora(args: list[str]) -> bool:
    return "corpora.yaml" in " ".join(args) or "runs/corpora" in " ".join(args)


def test_every_recipe_command_runs(tmp_path, isolated_cache, monkeypatch):
    monkeypatch.chdir(REPO)
    commands = recipe_commands(PAGE.read_text())
    assert len(commands) >= 25
    offline = [c for c in commands if not _needs_shared_data(c)]
    assert any("--judge-base-url" in c for c in offline)  # the LLM-judge recipes run too
    with fake_openai() as judge:
        judge.responder = judge_reply
        assert _run_recipes(offline, tmp_path, judge.base_url) >= 20
        assert judge.bodies("/v1/chat/completions")  # the judge was asked
    assert (tmp_path / "runs" / "fork-study" / "value.json").is_file()
    assert (tmp_path / "reports" / "mitigations" / "report.md").is_file()


def test_the_benchmark_recipe_runs_on_the_shared_data(tmp_path, isolated_cache, monkeypatch):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent (the builder recipe reads CoCoNot and Bamboogle from it)")
    monkeypatch.chdir(REPO)
    bench = [c for c in recipe_commands(PAGE.read_text()) if _needs_shared_data(c) and not _is_corpora(c)]
    assert _run_recipes(bench, tmp_path) == 2
    assert (tmp_path / "runs" / "bench" / "bench.pairing.png").is_file()


@pytest.mark.slow
def test_the_corpora_recipe_runs_on_the_shared_data(tmp_path, isolated_cache, monkeypatch):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent (the stale corpus is FlashRAG's sample in it)")
    monkeypatch.chdir(REPO)
    corpora = [c for c in recipe_commands(PAGE.read_text()) if _is_corpora(c)]
    with fake_openai() as judge:  # its LLM-judge command too
        judge.responder = judge_reply
        # builds the 1,000-passage index once (minutes on 2 cores)
        assert _run_recipes(corpora, tmp_path, judge.base_url) == 4
