"""What a run folder belongs to: a spec's outcome-relevant settings, their fingerprint, and the
refusal to run another spec into a folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.experiments.spec.conditions import MODEL_REACH
from branchpoint.experiments.spec.sections import ExperimentSpec

#: Settings that do not change what a run folder's executions are: where and how the model is
#: reached (the response cache included: it answers as the server did), how the run is scored,
#: its description and the folder it was read from (its paths are resolved), a fork study's plan,
#: the value scoring, `questions.limit` (a prefix of the same selection, e.g. `run --limit`) and
#: `run` (more epochs add executions, like more sweep values; epoch e keeps its id whatever the
#: number of epochs).
_NOT_OUTCOME = (
    "description",
    "run",
    "base_dir",
    "evaluation",
    "fork",
    "value",
    "sweep",
    "questions.limit",
    *(f"model.{name}" for name in MODEL_REACH),
)


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def run_identity(spec: ExperimentSpec) -> dict[str, Any]:
    """The outcome-relevant settings of a spec as dotted fields: what a run folder belongs to.

    Everything that enters execution ids (see `condition_fingerprint`) plus the name, seed and
    question selection; the settings a sweep axis sets are left out (the axis names stand for
    them, under `sweep axes`), so adding values to an axis keeps the identity.
    """
    flat: dict[str, Any] = {}
    _flatten(spec.model_dump(mode="json"), "", flat)
    dropped = (*_NOT_OUTCOME, *spec.sweep)
    out = {k: v for k, v in flat.items() if not any(k == d or k.startswith(d + ".") for d in dropped)}
    out["sweep axes"] = sorted(spec.sweep)
    return out


def spec_fingerprint(spec: ExperimentSpec) -> str:
    """A short hash of `run_identity`: equal for specs that may share a run folder."""
    return hashlib.sha256(json.dumps(run_identity(spec), sort_keys=True, default=str).encode()).hexdigest()[:16]


def identity_differences(recorded: ExperimentSpec, new: ExperimentSpec) -> list[str]:
    """The dotted fields whose outcome-relevant values differ between two specs (sorted)."""
    a, b = run_identity(recorded), run_identity(new)
    return sorted(k for k in set(a) | set(b) if a.get(k, "<unset>") != b.get(k, "<unset>"))


def check_same_run(recorded: ExperimentSpec, new: ExperimentSpec, run_dir: str | Path) -> None:
    """Refuse to run `new` into a folder that holds the run of another spec, naming the fields.

    A run folder belongs to one spec (`spec_fingerprint`); the sweep's values may grow or shrink.
    """
    diff = identity_differences(recorded, new)
    if not diff:
        return
    a, b = run_identity(recorded), run_identity(new)
    shown = "; ".join(
        f"{k}: {json.dumps(a.get(k, '<unset>'), default=str)} there, {json.dumps(b.get(k, '<unset>'), default=str)} now"
        for k in diff[:5]
    )
    more = f" (and {len(diff) - 5} more)" if len(diff) > 5 else ""
    raise InputError(
        f"{run_dir} holds the run of another spec (fingerprint {spec_fingerprint(recorded)}, this one "
        f"{spec_fingerprint(new)}): {shown}{more}. Use a new --out folder for this spec; only sweep "
        "values may change within one run folder"
    )
