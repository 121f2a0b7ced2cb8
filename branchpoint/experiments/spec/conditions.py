"""A spec's sweep expanded into conditions, and the fingerprint that enters execution ids."""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any

from pydantic import ValidationError

from branchpoint.errors import InputError
from branchpoint.experiments.spec.describe import describe_spec_error, did_you_mean
from branchpoint.experiments.spec.paths import resolve_condition_paths
from branchpoint.experiments.spec.sections import ExperimentSpec


def _left_out_field(keys: list[str]) -> bool:
    """Whether `keys` names a setting a dump leaves out at its default (e.g. `agent.protocol`,
    `agent.budget_disclosure`: see `AgentSpec._dump_new_fields_if_set`), so it may be swept too."""
    model: Any = ExperimentSpec
    for key in keys:
        fields = getattr(model, "model_fields", None)
        if not fields or key not in fields:
            return False
        model = fields[key].annotation
    return True


def set_sweep_value(data: dict[str, Any], dotted: str, value: Any, source: str) -> None:
    """Apply one sweep axis value to raw spec data (a mapping merges into a section)."""
    keys = dotted.split(".")
    node: Any = data
    for key in keys[:-1]:
        if not isinstance(node, dict) or key not in node or not isinstance(node[key], dict):
            sections = [k for k, v in node.items() if isinstance(v, dict)] if isinstance(node, dict) else []
            raise InputError(
                f'{source}: field "sweep.{dotted}": {key!r} is not a section of the spec{did_you_mean(key, sections)}'
            )
        node = node[key]
    if not isinstance(node, dict) or (keys[-1] not in node and not _left_out_field(keys)):
        hint = did_you_mean(keys[-1], node) if isinstance(node, dict) else ""
        raise InputError(f'{source}: field "sweep.{dotted}": no such setting {keys[-1]!r}{hint}')
    if isinstance(value, dict) and isinstance(node[keys[-1]], dict):
        # a mapping value overrides several settings of a section at once and keeps the rest,
        # e.g. `model: [{name: a, base_url: …}, {name: b, base_url: …}]`
        node[keys[-1]] = {**node[keys[-1]], **value}
    else:
        node[keys[-1]] = value


def expand_conditions(spec: ExperimentSpec, source: str = "spec") -> list[tuple[dict[str, Any], ExperimentSpec]]:
    """The cartesian product of the sweep axes: (condition dict, spec with those values set, its
    relative paths resolved against the spec's folder)."""
    if not spec.sweep:
        return [({}, spec)]
    axes = sorted(spec.sweep)
    for axis in axes:
        if axis.startswith("sweep") or not spec.sweep[axis]:
            raise InputError(f'{source}: field "sweep.{axis}": expected a non-empty list of values')
        if axis == "run" or axis.startswith("run."):
            raise InputError(
                f'{source}: field "sweep.{axis}": the run section is not a sweep axis (epochs are draws of every '
                "condition, not conditions); set run.epochs itself"
            )
    base = spec.drop_inherited_questions(spec.model_dump(exclude={"sweep", "fork"}))
    out = []
    for values in itertools.product(*(spec.sweep[a] for a in axes)):
        data = json.loads(json.dumps(base))
        for axis, value in zip(axes, values):
            set_sweep_value(data, axis, value, source)
        try:
            resolved = resolve_condition_paths(ExperimentSpec.model_validate(data), spec.source_dir)
        except ValidationError as exc:
            raise InputError(f"{source}: sweep value: {describe_spec_error(exc)}") from None
        resolved._source_dir = spec.source_dir
        out.append((dict(zip(axes, values)), resolved))
    return out


#: Model settings that say where and how the model is reached, not what it answers: no execution
#: id or run identity holds them (`response_cache` answers what the server answered).
MODEL_REACH = ("base_url", "api_key_env", "timeout_s", "retries", "server", "max_connections", "response_cache")


def condition_fingerprint(spec: ExperimentSpec) -> str:
    """A hash of every setting that can change an execution's outcome (not timeouts, URLs, ports)."""
    # where and how the model is reached does not change what it answers; the simulator's
    # settings matter only to it (and leave other ids unchanged), and not where its question file
    # lies (the questions are in the ids) or how fast it answers
    reach = set(MODEL_REACH)
    sim_only = {"questions", "latency_scale", "host", "port", "startup_timeout_s"}
    model = spec.model.model_dump(
        exclude={**dict.fromkeys(reach, True), "sim": sim_only if spec.model.provider == "sim" else True}
    )
    relevant = {
        "seed": spec.seed,
        "model": model,
        "agent": spec.agent.model_dump(),
        "retrieval": spec.retrieval.model_dump(),
        "multi_turn": spec.multi_turn.model_dump() if spec.multi_turn else None,
    }
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]
