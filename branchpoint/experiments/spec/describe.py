"""Validation errors of a spec as one line naming each field, with a did-you-mean for unknown keys."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from branchpoint.experiments.spec.sections import ExperimentSpec


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that holds the last part of `loc` (a validation error's location)."""
    cls: Any = ExperimentSpec
    expect_key = False  # the previous part was a dict field: this part is a free key
    for part in loc[:-1]:
        if expect_key:
            expect_key = False
            continue
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or part not in cls.model_fields:
            return None
        annotation: Any = cls.model_fields[part].annotation
        while True:  # unwrap Annotated / Optional / unions to the model or dict inside
            origin = typing.get_origin(annotation)
            if origin is typing.Annotated:
                annotation = typing.get_args(annotation)[0]
            elif origin in (typing.Union, types.UnionType):
                annotation = next(
                    (a for a in typing.get_args(annotation) if a is not type(None)),
                    None,
                )
            elif origin is dict:
                annotation = typing.get_args(annotation)[1]
                while typing.get_origin(annotation) is typing.Annotated:
                    annotation = typing.get_args(annotation)[0]
                expect_key = True
                break
            else:
                break
        cls = annotation
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def _fields_of(cls: type[BaseModel]) -> list[str]:
    """The settings a key under `cls` may be: its fields, or for a source (whose class its
    `kind` picks) the fields of every registered source kind."""
    from branchpoint.registry import REGISTRY
    from branchpoint.retrieval.sources import SourceSpec

    if cls is SourceSpec:
        return list(dict.fromkeys(f for e in REGISTRY.entries("source") for f in e.obj.model_fields))
    return list(cls.model_fields)


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    """` (did you mean "x"?)` for the closest choice (difflib), or "" when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def describe_spec_error(exc: ValidationError) -> str:
    """Like `describe_validation_error`, with a did-you-mean for each unknown key."""
    parts = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        text = f'field "{".".join(str(p) for p in loc) or "(spec)"}": {err["msg"]}'
        if err.get("type") == "extra_forbidden" and loc:
            cls = _model_at(loc)
            if cls is not None:
                text += did_you_mean(str(loc[-1]), _fields_of(cls))
        parts.append(text)
    return "; ".join(parts)
