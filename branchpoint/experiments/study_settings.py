"""A run folder is the study: every command's settings start from the run's spec.yaml.

`evaluate`, `fork`, `replay` and `value` resolve their settings in one order: the built-in
defaults, then what the run folder's spec.yaml sets (its `evaluation`, `fork` and `value`
sections), then the options the user actually gave on the command line (an option left at its
default never overrides the spec). The result says where each setting came from
(`StudySettings.block`: `spec`, `from_spec`, `overrides`), and the commands write that block into
their output (metrics.json, value.json, fork_settings.jsonl). A bare trace file with no spec.yaml
beside it gets the built-in defaults, and its block says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.experiments.spec import ExperimentSpec, load_spec
from branchpoint.redact import redact
from branchpoint.registry import merge_settings
from branchpoint.traces import SPEC_FILE

#: What a settings block says when no spec.yaml was found beside the traces.
NO_SPEC = "no spec.yaml beside the traces: built-in defaults, except the overrides"


def run_spec_file(path: Path) -> Path | None:
    """The spec.yaml of a run folder, or the one beside a trace file (None: there is none)."""
    path = Path(path)
    found = (path if path.is_dir() else path.parent) / SPEC_FILE
    return found if found.is_file() else None


def read_run_spec(path: Path) -> tuple[ExperimentSpec | None, Path | None]:
    """The run's spec (validated; its policy is not imported) and its file, or (None, None)."""
    found = run_spec_file(path)
    if found is None:
        return None, None
    return load_spec(found, check_policy=False, recorded=True), found


def explicit(section: BaseModel | None) -> dict[str, Any]:
    """The settings a spec section writes itself (not its defaults), as JSON-ready values."""
    if section is None:
        return {}
    return section.model_dump(mode="json", include=set(section.model_fields_set))


_UNSET = object()


def _leaves(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, value


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return value


@dataclass(frozen=True)
class StudySettings:
    """A command's settings (`values`) and where they came from: the spec file read (None:
    none), the dotted keys it sets to non-default values, and the dotted keys the command line
    gave."""

    values: dict[str, Any]
    spec: Path | None = None
    from_spec: tuple[str, ...] = ()
    overrides: dict[str, Any] = field(default_factory=dict)
    #: where `module:attr` components named in the settings are imported from: the spec's folder
    search_paths: tuple[Path, ...] = ()

    def source(self) -> dict[str, Any]:
        """Where the settings came from: `spec`, `from_spec`, `overrides` (and `defaults` when
        there was no spec); secrets in strings are masked."""
        out: dict[str, Any] = {
            "spec": str(self.spec) if self.spec is not None else None,
            "from_spec": list(self.from_spec),
            "overrides": _redacted(self.overrides),
        }
        if self.spec is None:
            out["defaults"] = NO_SPEC
        return out

    def block(self) -> dict[str, Any]:
        """The `settings` block an output file records: the values and `source()`."""
        return {**_redacted(self.values), **self.source()}

    def describe(self) -> str:
        """One line for the console: where the settings came from."""
        source = f"settings from {self.spec}" if self.spec is not None else "built-in settings (no spec.yaml)"
        parts = [f"{source}: {', '.join(self.from_spec) or 'none set there'}"] if self.spec is not None else [source]
        if self.overrides:
            parts.append(f"overridden on the command line: {', '.join(self.overrides)}")
        return "; ".join(parts)


def resolve_settings(
    defaults: Mapping[str, Any],
    from_spec: Mapping[str, Any],
    from_cli: Mapping[str, Any],
    spec: ExperimentSpec | None = None,
    spec_file: Path | None = None,
) -> StudySettings:
    """Defaults, then the spec's settings, then the command line's (nested mappings merge key by
    key); records the dotted keys the spec sets to other values than the defaults (`from_spec`:
    a run folder's spec.yaml writes every setting, defaults included) and those the command
    line gave (`overrides`)."""
    values = merge_settings(merge_settings(defaults, from_spec), from_cli)
    overrides = dict(_leaves(from_cli))
    default = dict(_leaves(defaults))
    taken = tuple(
        k
        for k, v in _leaves(from_spec)
        if default.get(k, _UNSET) != v and not any(k == o or k.startswith(o + ".") for o in overrides)
    )
    paths = (spec.source_dir,) if spec is not None and spec.source_dir is not None else ()
    return StudySettings(values, spec_file, taken, overrides, paths)


def evaluation_settings(
    path: Path,
    from_cli: Mapping[str, Any],
    judge_options: Mapping[str, Any] | None = None,
    judge_args: Mapping[str, Any] | None = None,
) -> StudySettings:
    """The settings of `evaluate PATH`: judge, its settings, λ, μ, bootstrap resamples and seed,
    from the run's `evaluation` section, then the command line: `from_cli` (judge, lam, mu,
    bootstrap, bootstrap_seed), the flat judge options (`judge_options`, None: not given; see
    `judge_options.flat_judge_settings`) and `judge_args` (`--judge-arg`). The spec's judge
    settings apply to the spec's judge only: another `--judge` starts from its own defaults."""
    from branchpoint.evaluation import MetricsConfig
    from branchpoint.evaluation.judge_options import check_judge_model, flat_judge_settings

    spec, spec_file = read_run_spec(path)
    cfg = MetricsConfig()
    defaults = {
        "judge": DEFAULT_JUDGE,
        "judge_settings": {},
        "lam": cfg.lam,
        "mu": cfg.mu,
        "bootstrap": cfg.bootstrap,
        "bootstrap_seed": cfg.seed,
    }
    section: dict[str, Any] = {}
    if spec is not None:
        ev = spec.evaluation
        section = {k: v for k, v in explicit(ev).items() if k in defaults}
        if ev.judge_settings:
            section["judge_settings"] = ev.judge_settings
        if "judge" in from_cli and from_cli["judge"] != ev.judge:
            section.pop("judge_settings", None)
    cli = dict(from_cli)
    paths = [spec.source_dir] if spec is not None and spec.source_dir is not None else []
    judge = str(cli.get("judge", section.get("judge", defaults["judge"])))
    given = merge_settings(flat_judge_settings(judge, paths, **(judge_options or {})), judge_args)
    if given:
        cli["judge_settings"] = given
    settings = resolve_settings(defaults, section, cli, spec, spec_file)
    check_judge_model(judge, settings.values["judge_settings"], paths)
    return settings


def fork_settings(run_dir: Path, from_cli: Mapping[str, Any], replay: bool = False) -> StudySettings:
    """The settings of `fork RUN_DIR` (every fork-plan field) or `replay RUN_DIR` (the sampling
    and concurrency fields), from the run's `fork` section, then the command line."""
    from branchpoint.experiments.spec import ForkPlan

    spec, spec_file = read_run_spec(run_dir)
    defaults = ForkPlan().model_dump(mode="json")
    section = explicit(spec.fork if spec is not None else None)
    if replay:
        keep = REPLAY_FIELDS
        defaults = {k: v for k, v in defaults.items() if k in keep}
        defaults["repeats"] = 1
        section = {k: v for k, v in section.items() if k in keep}
    return resolve_settings(defaults, section, from_cli, spec, spec_file)


#: The fork-plan fields a replay takes from the spec's `fork` section (how branches sample).
REPLAY_FIELDS: frozenset[str] = frozenset({"temperature", "top_p", "seed", "allow_identical_repeats", "concurrency"})


def value_settings(
    path: Path,
    from_cli: Mapping[str, Any],
    forecaster_args: Mapping[str, Any] | None = None,
    calibrator_args: Mapping[str, Any] | None = None,
) -> StudySettings:
    """The settings of `value PATH` (every `ValueConfig` field), from the run's `value`
    section, then the command line; `--forecaster-arg` / `--calibrator-arg` settings merge into
    `forecasters` / `calibrators` (per component name)."""
    from branchpoint.evaluation.value import ValueConfig

    spec, spec_file = read_run_spec(path)
    defaults = ValueConfig().model_dump(mode="json")
    section = explicit(spec.value if spec is not None else None)
    cli = dict(from_cli)
    for key, args in (("forecasters", forecaster_args), ("calibrators", calibrator_args)):
        if args:
            cli[key] = merge_settings(cli.get(key), args)
    return resolve_settings(defaults, section, cli, spec, spec_file)
