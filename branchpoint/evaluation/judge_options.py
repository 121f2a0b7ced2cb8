"""The judge that `branchpoint evaluate --judge NAME` asks for, built from its options.

A named offline judge (`rule`, `given`) is passed on by name; `llm` is an `LLMJudge` on an
OpenAI-compatible server with its SQLite judgment cache (default: `judge_cache.sqlite` beside
the traces), so cached judgments are reused across calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from branchpoint.traces import JUDGE_CACHE_FILE
from branchpoint.errors import InputError


def judge_from_options(
    judge: str,
    traces: Path,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    cache: Path | None = None,
    retries: int = 1,
    concurrency: int = 4,
    evidence: bool = True,
    progress: bool = True,
) -> Any:
    """The judge `evaluate` runs: the name itself, or for `llm` an `LLMJudge` (model and base_url required)."""
    if judge != "llm" and (model or base_url):
        raise InputError(f"--judge-model and --judge-base-url apply to --judge llm only (got --judge {judge})")
    if judge != "llm":
        return judge
    from branchpoint.evaluation.evaluate import trace_path
    from branchpoint.evaluation.llm_judges import open_llm_judge

    if not model or not base_url:
        raise InputError("--judge llm needs --judge-model NAME and --judge-base-url URL (an OpenAI-compatible server)")
    cache_path = cache or trace_path(traces).parent / JUDGE_CACHE_FILE
    return open_llm_judge(
        model, base_url, api_key_env=api_key_env, cache_path=str(cache_path),
        retries=retries, concurrency=concurrency, evidence=evidence, progress=progress,
    )  # fmt: skip
