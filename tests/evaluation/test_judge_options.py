"""`evaluate --judge NAME` and its options: judges without settings are built by name and refuse a
model; llm needs a model and server."""

from __future__ import annotations

from pathlib import Path

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.judge_options import judge_from_options


def test_offline_judges_are_passed_by_name(tmp_path: Path):
    assert judge_from_options("rule", tmp_path).name == "rule"
    assert judge_from_options("given", tmp_path).name == "given"


def test_llm_options_apply_to_llm_only(tmp_path: Path):
    with pytest.raises(InputError, match="apply to judges with settings"):
        judge_from_options("rule", tmp_path, model="m")


def test_llm_judge_needs_model_and_server(tmp_path: Path):
    with pytest.raises(InputError, match="--judge llm needs --judge-model NAME and --judge-base-url URL"):
        judge_from_options("llm", tmp_path, model="m")


def test_llm_judge_caches_beside_the_traces(tmp_path: Path):
    traces = tmp_path / "executions.jsonl"
    traces.write_text("", encoding="utf-8")
    judge = judge_from_options("llm", traces, model="m", base_url="http://127.0.0.1:9/v1", progress=False)
    assert judge.name.startswith("llm")
    assert judge.cache.path == tmp_path / "judge_cache.sqlite"
    assert not judge.cache.path.exists()  # made on the first judgment: a refused input leaves none
    judge.cache.put("k", "v1", "m", "CORRECT", None)
    assert (tmp_path / "judge_cache.sqlite").exists()
