"""One rule for every path in a spec (`branchpoint.spec_paths`): relative paths written in a spec
file resolve against its folder (or its `base_dir`), those given with `--set` against the working
directory; the loaded spec holds them absolute, so the copy `branchpoint run` writes into the run
folder resolves the same from anywhere. Sweep values written in the file keep their spelling
(condition labels stay short) and resolve when the conditions are expanded, against the same
folder, which the copy records as `base_dir`; sweep values given with `--set` are made absolute
when the spec is loaded.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from branchpoint.errors import InputError
from branchpoint.experiments.spec.sections import ExperimentSpec
from branchpoint.spec_paths import Location, absolute, dotted, path_settings, set_at


def base_folder(spec_file: Path, data: dict[str, Any]) -> Path:
    """The folder a spec file's relative paths resolve against: its `base_dir` (itself relative
    to the file's folder when relative), else the file's own folder."""
    folder = spec_file.resolve().parent
    base = data.get("base_dir")
    return Path(absolute(str(base), folder)) if isinstance(base, str) and base.strip() else folder


def _from(keys: Iterable[str]) -> Callable[[str], bool]:
    """Whether a dotted location was set by one of `keys` (the key itself or a section above it)."""
    given = [k for k in keys if k]
    return lambda loc: any(loc == k or loc.startswith(k + ".") for k in given)


def resolve_paths(
    spec: ExperimentSpec, base: Path, cli_keys: Iterable[str] = (), cwd: Path | None = None
) -> ExperimentSpec:
    """`spec` with every relative path made absolute: against `cwd` where one of `cli_keys`
    (`--set` keys) set it, else against `base`; `base_dir` set to `base`. Sweep values are left
    as they are (see `resolve_condition_paths`)."""
    from_cli = _from(cli_keys)
    here = cwd or Path.cwd()
    data = spec.model_dump(mode="json")
    for loc, marker, value in path_settings(spec):
        if loc[0] != "sweep" and marker.is_relative_path(value):
            set_at(data, loc, absolute(value, here if from_cli(dotted(loc)) else base))
    data["base_dir"] = str(base)
    return ExperimentSpec.model_validate(spec.drop_inherited_questions(data))


def resolve_condition_paths(condition: ExperimentSpec, base: Path | None) -> ExperimentSpec:
    """A sweep condition's spec with the relative paths its sweep values set made absolute
    against `base` (the spec's folder); unchanged when there are none or no base is known."""
    if base is None:
        return condition
    relative = [(loc, value) for loc, marker, value in path_settings(condition) if marker.is_relative_path(value)]
    if not relative:
        return condition
    data = condition.model_dump(mode="json")
    for loc, value in relative:
        set_at(data, loc, absolute(value, base))
    return ExperimentSpec.model_validate(condition.drop_inherited_questions(data))


def absolute_sweep_values(
    spec: ExperimentSpec, axes: Iterable[str], cwd: Path, set_path: Callable[..., None]
) -> ExperimentSpec:
    """`spec` with the relative paths in the values of sweep `axes` (given with `--set
    sweep.AXIS=…`) made absolute against `cwd`. Each value is applied to the spec to find the
    path settings it sets (`set_path`: how a sweep value is applied); a value that does not
    validate is left for the sweep expansion to report."""
    chosen = [a for a in axes if a in spec.sweep]
    if not chosen:
        return spec
    base = spec.model_dump(mode="json", exclude={"sweep", "fork"})
    sweep = copy.deepcopy(spec.sweep)
    for axis in chosen:
        prefix: Location = tuple(axis.split("."))
        values = []
        for value in sweep[axis]:
            probe = copy.deepcopy(base)
            try:
                set_path(probe, axis, value, "--set")
                applied = ExperimentSpec.model_validate(probe)
            except (ValidationError, InputError):
                values.append(value)
                continue
            for loc, marker, found in path_settings(applied):
                if not marker.is_relative_path(found):
                    continue
                if loc == prefix:
                    value = absolute(found, cwd)
                elif loc[: len(prefix)] == prefix and isinstance(value, dict):
                    value = copy.deepcopy(value)
                    try:
                        set_at(value, loc[len(prefix) :], absolute(found, cwd))
                    except (KeyError, IndexError, TypeError):
                        pass  # the path is the base spec's, not this value's
            values.append(value)
        sweep[axis] = values
    return spec.model_copy(update={"sweep": sweep})
