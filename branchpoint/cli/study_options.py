"""Which options of the running command the user gave: only those override the run's spec.

A typer option always has a value, so "was it given?" is asked of the command's context
(`ctx: typer.Context`): an option left at its default (or a default map) is not given; one on the
command line or from its environment variable is. Without a context (the function called
directly), every option counts as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

#: The parameter sources of an option the user did not give.
_NOT_GIVEN = frozenset({"DEFAULT", "DEFAULT_MAP"})


def given_options(ctx: typer.Context | None) -> set[str] | None:
    """The parameter names the user gave to the running command (None: no context)."""
    if ctx is None:
        return None
    given = set()
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in _NOT_GIVEN:
            given.add(name)
    return given


def given_settings(ctx: typer.Context | None, options: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """The settings the given options set: `options` maps a parameter name to (setting key,
    value); options left at their defaults are left out."""
    given = given_options(ctx)
    return {key: value for name, (key, value) in options.items() if given is None or name in given}
