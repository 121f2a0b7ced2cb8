"""The judge that `branchpoint evaluate` runs, and its settings, from the spec and the command line.

Any registered judge (`rule`, `given`, `llm`, `llm-answer`, a plug-in's, or `package.module:attr`)
takes the settings its settings model declares (`registry.check_settings`): from the run's spec
(`evaluation: {judge: NAME, KEY: VALUE, ...}`), updated by the command line's judge options
(`--judge-model`, `--judge-base-url`, `--judge-api-key-env`, `--judge-retries`, ...) and then by
`--judge-arg KEY=VALUE`. Judges that call a model get their SQLite judgment cache (default:
`judge_cache.sqlite` beside the traces), so cached judgments are reused across calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.evaluation.judges import BatchJudge, JudgeRun, build_judge, judge_settings_model
from branchpoint.registry import REGISTRY, merge_settings
from branchpoint.traces import JUDGE_CACHE_FILE

#: The flat command-line options that set a field of `model` in a judge's settings.
MODEL_OPTIONS = {"model": "name", "base_url": "base_url", "api_key_env": "api_key_env"}


def flat_judge_settings(name: str, search_paths: Sequence[str | Path] = (), **options: Any) -> dict[str, Any]:
    """The settings the flat judge options give (None: not given): `model`, `base_url` and
    `api_key_env` become `model: {name, base_url, api_key_env}`; `retries`, `concurrency`,
    `evidence`, ... are kept where the judge takes them. A judge without settings refuses a model."""
    takes = judge_settings_model(name, search_paths)
    given = {k: v for k, v in options.items() if v is not None}
    model = {MODEL_OPTIONS[k]: given.pop(k) for k in list(given) if k in MODEL_OPTIONS}
    if takes is None:
        if model.get("name") or model.get("base_url"):
            with_settings = [n for n in REGISTRY.names("judge") if REGISTRY.get("judge", n).settings_model]
            raise InputError(
                f"--judge-model and --judge-base-url apply to judges with settings "
                f"({', '.join(with_settings)}), not --judge {name}"
            )
        return {}
    settings = {k: v for k, v in given.items() if k in takes.model_fields}
    return {**settings, "model": model} if model else settings


def check_judge_model(name: str, settings: Mapping[str, Any], search_paths: Sequence[str | Path] = ()) -> None:
    """A judge whose settings name a model needs the model's name and server, said in terms of
    the options that give them."""
    takes = judge_settings_model(name, search_paths)
    if takes is None or "model" not in takes.model_fields:
        return
    chosen = settings.get("model")
    if not isinstance(chosen, Mapping) or not chosen.get("name") or not chosen.get("base_url"):
        raise InputError(
            f"--judge {name} needs --judge-model NAME and --judge-base-url URL (an OpenAI-compatible server), "
            "or `model: {name, base_url}` in the spec's evaluation section"
        )


def judge_cache_path(traces: Path, cache: Path | None = None) -> Path:
    """Where a judge keeps its judgments: `cache`, or judge_cache.sqlite beside the traces."""
    traces = Path(traces)
    return cache or (traces if traces.is_dir() else traces.parent) / JUDGE_CACHE_FILE


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
    base: Mapping[str, Any] | None = None,
    args: Mapping[str, Any] | None = None,
    search_paths: Sequence[str | Path] = (),
) -> BatchJudge:
    """The judge `name` built from `base` settings (e.g. the spec's), the flat judge options
    (`flat_judge_settings`; None: not given) and then `args` (`--judge-arg`); settings left out
    take the judge's own defaults."""
    flat = flat_judge_settings(
        judge,
        search_paths,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        retries=retries,
        concurrency=concurrency,
        evidence=evidence,
    )
    settings = merge_settings(merge_settings(base, flat), args)
    check_judge_model(judge, settings, search_paths)
    run = JudgeRun(judge_cache_path(traces, cache), progress=progress)
    return build_judge(judge, settings, run, search_paths)
