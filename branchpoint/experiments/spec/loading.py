"""Reading a spec: YAML, `--set` overrides, validation with errors that name the field (and a
did-you-mean for unknown keys), and the checks made before any work (policies, judges, model)."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from branchpoint.errors import InputError, check_nesting
from branchpoint.experiments.spec.conditions import expand_conditions, set_sweep_value
from branchpoint.experiments.spec.describe import describe_spec_error, did_you_mean
from branchpoint.experiments.spec.paths import absolute_sweep_values, base_folder, resolve_paths
from branchpoint.experiments.spec.sections import ExperimentSpec
from branchpoint.registry import parse_yaml_value


def apply_overrides(data: dict[str, Any], overrides: typing.Sequence[str], source: str = "--set") -> dict[str, Any]:
    """A copy of raw spec data with `KEY=VALUE` overrides applied (values read as YAML).

    `KEY` is a dotted path into the spec (`agent.search_cap=3`, `questions.sample={answerable: 4}`;
    a mapping merges into a section), or `sweep.AXIS` for a sweep axis
    (`sweep.agent.search_cap=[0, 1, 2]`; `sweep.AXIS=null` removes the axis; `sweep={}` is
    refused, as it would change nothing). Setting a swept setting directly is refused: the sweep
    would override it.
    """
    out: dict[str, Any] = json.loads(json.dumps(data, default=str))
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        where = f"{source} {item!r}"
        if not sep or not key or any(not part for part in key.split(".")):
            raise InputError(f"{where}: expected KEY=VALUE with a dotted KEY, e.g. --set agent.search_cap=3")
        value = parse_yaml_value(raw, where)
        if key.startswith("sweep."):
            axis = key.removeprefix("sweep.")
            sweep = out.setdefault("sweep", {}) or {}
            out["sweep"] = sweep
            if value is None:
                sweep.pop(axis, None)
                continue
            if not isinstance(value, list) or not value:
                raise InputError(f"{where}: a sweep axis takes a non-empty list, e.g. --set {key}=[1, 2]")
            sweep[axis] = value
            continue
        if key == "sweep" and not value:  # a mapping merges into the sweep: {} (or null) would change nothing
            axes = " ".join(f"--set sweep.{axis}=null" for axis in out.get("sweep") or {}) or "none to remove"
            raise InputError(
                f"{where}: a mapping merges into the sweep, so this would change nothing; remove its axes one by "
                f"one ({axes}) or set one, e.g. --set 'sweep.agent.search=[true]'"
            )
        if key in (out.get("sweep") or {}):
            raise InputError(
                f"{where}: {key} is a sweep axis of this spec (the sweep would override it); "
                f"set the axis instead, e.g. --set sweep.{key}=[{raw.strip()}]"
            )
        parts = key.split(".")
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise InputError(f"{where}: {'.'.join(parts[: i + 1])} is a setting, not a section")
            node = child
        last = parts[-1]
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last] = {**node[last], **value}
        else:
            node[last] = value
    return out


def load_spec(
    path: str | Path, overrides: typing.Sequence[str] = (), *, check_policy: bool = True, recorded: bool = False
) -> ExperimentSpec:
    """Read and validate a YAML spec (safe loading); errors name the file and the field or line.

    `overrides` are `KEY=VALUE` settings applied before validation (see `apply_overrides`), so
    the spec returned, and stored with a run, is the resolved one. Relative paths resolve
    against the spec's folder (its `base_dir`, which the run folder's copy records), those
    given in `overrides` against the working directory (`spec.paths`). With `check_policy`,
    every condition's agent policy must resolve (registered, or an importable `module:function`
    beside the spec or in the working directory); a run folder's recorded `spec.yaml` is read
    without it where the policy module may be gone. `recorded`: the file is a run folder's copy;
    one written before copies recorded `base_dir` keeps the rule it was made under (relative
    paths against the working directory), so older run folders still fork and evaluate.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: spec file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise InputError(f"{path}{where}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to read (is this a spec?)") from None
    check_nesting(data, str(path))
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of spec fields at the top level")
    base = folder = base_folder(path, data)
    if recorded and "base_dir" not in data:
        base = Path.cwd()  # paths only; modules are still looked for beside the file, as then
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        spec = ExperimentSpec.model_validate(data)
        cli_keys = [item.partition("=")[0].strip() for item in overrides]
        spec = resolve_paths(spec, base, [k for k in cli_keys if not k.startswith("sweep.")])
        spec = absolute_sweep_values(spec, [k.removeprefix("sweep.") for k in cli_keys], Path.cwd(), set_sweep_value)
    except ValidationError as exc:
        raise InputError(f"{path}: {describe_spec_error(exc)}") from None
    spec._source_dir = folder
    if spec.fork is not None:
        spec.fork.check(str(path))  # a fork study `run` does after the run: refused before any work
    conditions = expand_conditions(spec, source=str(path))  # check the sweep axes now, before any work
    for condition, resolved in conditions:
        check_model_identity(resolved, str(path), condition)
        spec.run.check(resolved.model.temperature, str(path), condition)  # epochs that would be copies
    check_judges(spec, source=str(path), search_paths=[spec._source_dir])
    if check_policy:
        check_policies(
            [resolved for _, resolved in conditions],
            source=str(path),
            search_paths=[spec._source_dir],
        )
    return spec


def check_policies(
    specs: list[ExperimentSpec],
    source: str = "spec",
    search_paths: list[Path] | None = None,
) -> None:
    """Refuse an agent policy that is neither registered nor an importable `module:function`
    (looked for in `search_paths` and the working directory), naming the spec file."""
    from branchpoint.agents import resolve_policy

    for policy in dict.fromkeys(s.agent.policy for s in specs):
        try:
            resolve_policy(policy, search_paths or [])
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None


#: The name of the model the embedded server loads when `model.server.gguf` is not set.
PACKAGED_MODEL_NAME = "gemma-3-270m"


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def check_model_identity(spec: ExperimentSpec, source: str = "spec", condition: dict[str, Any] | None = None) -> None:
    """Refuse a spec whose `model.name` is not the model the embedded server would load.

    The embedded provider serves one GGUF under whatever name the spec gives, so a name that
    disagrees with it records one model's outputs under another's name. With the packaged GGUF
    the name must be `gemma-3-270m`; with `model.server.gguf` the name must appear in the file's
    name (ignoring case and punctuation).
    """
    model = spec.model
    if model.provider != "embedded":
        return
    where = f" (sweep condition {condition})" if condition else ""
    if model.server.gguf is None:
        if model.name != PACKAGED_MODEL_NAME:
            raise InputError(
                f'{source}: field "model.name"{where}: the embedded provider loads the packaged '
                f"{PACKAGED_MODEL_NAME}, not {model.name!r}; set model.name: {PACKAGED_MODEL_NAME}, or serve "
                f"{model.name} (e.g. with vLLM) and use provider: openai with its base_url"
            )
        return
    if _squash(model.name) not in _squash(Path(model.server.gguf).name):
        raise InputError(
            f'{source}: field "model.name"{where}: {model.name!r} does not name the GGUF the embedded server '
            f"loads ({Path(model.server.gguf).name}); set model.name to that model"
        )


def check_judges(spec: ExperimentSpec, source: str = "spec", search_paths: typing.Sequence[Path] = ()) -> None:
    """Refuse a judge that is not registered (`evaluation.judge`, `fork.judge`), and settings the
    evaluation's judge does not take (checked against its settings model; nothing is opened)."""
    from branchpoint.evaluation.judges import check_judge, judge_settings_model

    name, settings = spec.evaluation.judge, spec.evaluation.judge_settings
    try:
        takes = judge_settings_model(name, search_paths)
    except InputError as exc:
        raise InputError(f'{source}: field "evaluation.judge": {exc}') from None
    try:
        if settings and takes is None:
            key = next(iter(settings))  # most likely a misspelt setting of the section itself
            raise InputError(
                f'judge "{name}" takes no settings (got: {", ".join(settings)})'
                f"{did_you_mean(key, type(spec.evaluation).model_fields)}"
            )
        check_judge(name, settings, search_paths)
    except InputError as exc:
        raise InputError(f'{source}: field "evaluation": {exc}') from None
    if spec.fork is not None:
        try:
            check_judge(spec.fork.judge, None, search_paths)
        except InputError as exc:
            raise InputError(f'{source}: field "fork.judge": {exc}') from None
