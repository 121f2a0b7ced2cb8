"""Paths in a spec, one rule for all of them: a relative path resolves against the folder of the
spec file it is written in (a path given on the command line, `--set`, against the working
directory), and a loaded spec holds it as an absolute path.

A setting is a path when its field is annotated with a `PathSetting` marker (`SpecPath` for the
usual kind, whose value `demo` names the embedded data instead); a plug-in's source kind marks
its own path fields the same way. `path_settings` walks a validated model (nested models, mappings
and lists of them) and yields every marked field with its location, so the spec loader resolves
them all in one place.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel


@dataclass(frozen=True)
class PathSetting:
    """Marks a spec field as a path. `names`: values that name something built in, not a path
    (`demo`); `suffixes`: when given, only a value with one of them (or a folder separator) is
    a path, the others are names (a built-in profile vs a profile file)."""

    names: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()

    def is_relative_path(self, value: Any) -> bool:
        """Whether `value` is a relative path this rule resolves (not a name, URL or absolute path)."""
        if not isinstance(value, str) or not value.strip() or value in self.names or "://" in value:
            return False
        if self.suffixes and not (value.lower().endswith(self.suffixes) or "/" in value or os.sep in value):
            return False
        return not Path(value).expanduser().is_absolute()


SpecPath = Annotated[str, PathSetting(names=("demo",))]
"""A path setting whose value `demo` names the embedded demo data (questions, corpus)."""

Location = tuple[str | int, ...]


def path_settings(model: BaseModel, loc: Location = ()) -> Iterator[tuple[Location, PathSetting, Any]]:
    """Every field of `model` (recursively) marked with a `PathSetting`: its location (field
    names, mapping keys, list indexes), its marker and its value."""
    for name, info in type(model).model_fields.items():
        value = getattr(model, name, None)
        marker = next((m for m in info.metadata if isinstance(m, PathSetting)), None)
        if marker is not None:
            yield (*loc, name), marker, value
        else:
            yield from _nested(value, (*loc, name))


def _nested(value: Any, loc: Location) -> Iterator[tuple[Location, PathSetting, Any]]:
    if isinstance(value, BaseModel):
        yield from path_settings(value, loc)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _nested(item, (*loc, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _nested(item, (*loc, i))


def absolute(value: str, base: Path) -> str:
    """`value` resolved against `base`, normalised (`..` removed; symlinks kept)."""
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def dotted(loc: Location) -> str:
    """A location as a dotted key (`retrieval.sources.demo.corpus`)."""
    return ".".join(str(p) for p in loc)


def set_at(data: Any, loc: Location, value: Any) -> None:
    """Set the value at `loc` in nested dicts / lists (the location must exist up to its parent)."""
    node = data
    for part in loc[:-1]:
        node = node[part]
    node[loc[-1]] = value
