"""Shared pieces of the report-file models (`metrics_file.MetricsReport`, `value.value_file.ValueReport`):
the JSON number type, intervals, and the versioned reader both files use.

JSON has no infinity or NaN, so the files write +inf / −inf as the strings "inf" / "-inf" and NaN
as null. `Num` reads those strings back as floats and writes floats the same way, so a model
read from a file dumps to the same JSON it was read from. Objects allow additional keys (a
later minor version may add some; they are kept and written back unchanged).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationError

from branchpoint.errors import InputError


def _read_num(value: Any) -> Any:
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return value


def _write_num(value: int | float) -> int | float | str | None:
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


#: A number as the report files hold it: int or float, ±inf written as "inf" / "-inf".
Num = Annotated[int | float, BeforeValidator(_read_num), PlainSerializer(_write_num, when_used="json")]
#: A percentile interval [lo, hi] (either end None when undefined), or None when there is none.
Interval = list[Num | None] | None


class FileModel(BaseModel):
    """A part of a report file: extra keys are allowed and kept."""

    model_config = ConfigDict(extra="allow")


M = TypeVar("M", bound=BaseModel)


def check_version(source: Path, data: dict[str, Any], supported: int, *, default: int | None) -> None:
    """InputError unless `data["schema_version"]` is an integer ≤ `supported` (files are
    forward-readable within a version, never across one). `default` is the version of files
    written before the field existed (None: the field is required)."""
    version = data.get("schema_version", default)
    if version is None:
        raise InputError(f'{source}: field "schema_version" missing (expected an integer ≤ {supported})')
    if isinstance(version, bool) or not isinstance(version, int):
        raise InputError(f'{source}: field "schema_version" must be an integer, got {version!r}')
    if version > supported:
        raise InputError(
            f'{source}: field "schema_version" is {version}, newer than this branchpoint reads ({supported}); '
            "upgrade branchpoint, or re-run the command that wrote the file"
        )


def read_model(source: Path, model: type[M], what: str, hint: str, supported: int, *, default_version: int | None) -> M:
    """Read a JSON report file into `model`; every failure is an InputError naming the file and
    the first bad field (dotted path) with what was expected."""
    if not source.is_file():
        raise InputError(f"{source}: not found ({hint})")
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: not {what} ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: not {what} (expected a JSON object, got {type(data).__name__})")
    check_version(source, data, supported, default=default_version)
    return validate(source, model, data, what)


def _field_path(loc: tuple[Any, ...]) -> str:
    """A dotted field path without pydantic's union-branch tags (`int`, `float`, `list[...]`, ...)."""
    tags = {"int", "float", "str", "bool", "none", "dict", "list"}
    parts = [str(p) for p in loc if not (isinstance(p, str) and (p in tags or "[" in p or p.startswith("function-")))]
    return ".".join(parts) or "(top level)"


def validate(source: Path | str, model: type[M], data: Any, what: str) -> M:
    """`model.model_validate(data)`, a failure as an InputError naming `source` and the field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        field = _field_path(errors[0]["loc"])
        if errors[0]["type"] == "missing":
            raise InputError(f'{source}: field "{field}" missing (expected {what})') from None
        same = [e for e in errors if _field_path(e["loc"]) == field]
        msg = " or ".join(dict.fromkeys(e["msg"].removeprefix("Input should be ").split(",")[0] for e in same))
        got = repr(errors[0].get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        raise InputError(f'{source}: field "{field}" should be {msg}, got {got} (expected {what})') from None


def dump_json(model: BaseModel) -> str:
    """The file text of a report model: the keys it was built from (none added), indent 2."""
    data = model.model_dump(mode="json", exclude_unset=True, by_alias=True)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"
