"""The judge that `branchpoint evaluate --judge NAME` asks for, built from its options.

Any registered judge (`rule`, `given`, `llm`, `llm-answer`, a plug-in's, or `package.module:attr`)
is built by `judges.judge_from_command_line`; judges with settings that call a model get their
SQLite judgment cache (default: `judge_cache.sqlite` beside the traces), so cached judgments
are reused across calls.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.evaluation.judges import BatchJudge, JudgeRun, judge_from_command_line
from branchpoint.traces import JUDGE_CACHE_FILE


def judge_from_options(
    judge: str,
    traces: Path,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    cache: Path | None = None,
    retries: int | None = None,
    concurrency: int | None = None,
    evidence: bool | None = None,
    progress: bool = True,
) -> BatchJudge:
    """The judge `evaluate` runs; options left at None take the judge's own defaults. Its cache
    (for judges that keep one) defaults to `judge_cache.sqlite` beside the traces."""
    traces = Path(traces)
    run = JudgeRun(cache or (traces if traces.is_dir() else traces.parent) / JUDGE_CACHE_FILE, progress=progress)
    return judge_from_command_line(
        judge,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        run=run,
        retries=retries,
        concurrency=concurrency,
        evidence=evidence,
    )
