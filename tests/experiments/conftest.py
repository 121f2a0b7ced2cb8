"""Runner fixtures: a deterministic responder for the scripted model and a spec writer."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from branchpoint.models import ScriptedModel


def fewshot_responder(prompt: str, request: dict | None = None) -> str:
    """Answers the few-shot prompt's last block: search once if allowed, then answer with the
    first passage's title (or "I do not know" without evidence)."""
    block = prompt.rsplit("Question: ", 1)[-1]
    question = block.splitlines()[0]
    answer_only = bool(request and request.get("grammar") and "search" not in request["grammar"])
    if "Evidence: (none)" in block and not answer_only:
        return f'search", "text": "{question}"}}'
    match = re.search(r'\[1\] "([^"]+)"', block)
    answer = match.group(1) if match else "I do not know"
    return f'answer", "text": "{answer}"}}'


def search_until_told_responder(prompt: str, request: dict | None = None) -> str:
    """Searches whenever it may (so executions spend the whole cap); answers with the first
    passage's title when the grammar allows only an answer (a forced answer)."""
    answer_only = bool(request and request.get("grammar") and "search" not in request["grammar"])
    block = prompt.rsplit("Question: ", 1)[-1]
    if not answer_only:
        n = block.count('] "')
        return f'search", "text": "{block.splitlines()[0]} {n}"}}'
    match = re.search(r'\[1\] "([^"]+)"', block)
    answer = match.group(1) if match else "I do not know"
    return f'answer", "text": "{answer}"}}'


class CountingOpener:
    """A model opener for `run_experiment` that yields scripted models and counts what it opened."""

    def __init__(self, fail_first: int = 0, responder=None) -> None:
        self.opened = 0
        self.models: list[ScriptedModel] = []
        self.fail_first = fail_first
        self.responder = responder or fewshot_responder

    @contextmanager
    def __call__(self, spec, run_dir):
        self.opened += 1
        model = ScriptedModel(responder=self.responder, fail_first=self.fail_first)
        self.models.append(model)
        yield model

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.models)


SPEC = {
    "name": "unit",
    "questions": {"path": "demo", "sample": {"answerable": 3, "unanswerable": 3}},
    "model": {"provider": "scripted", "script": ["unused"], "max_tokens": 32},
    "agent": {"policy": "constrained", "search_cap": 2, "top_k": 2},
    "sweep": {"agent.search": [True, False]},
}


@pytest.fixture()
def write_spec(tmp_path):
    def write(overrides: dict | None = None, name: str = "spec.yaml") -> Path:
        data = {**SPEC, **(overrides or {})}
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    return write
