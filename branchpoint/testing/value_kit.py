"""Conformance of a search-value forecaster and of a router, on the kit's state table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import (
    Forecast,
    ForecasterUnavailable,
    Registered,
    registered_forecasters,
    run_forecaster,
)
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.routers import ROUTER, run_router
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.testing.demo import dev_mask, sample_states


def _with_other_test_outcomes(states: StateTable, dev: np.ndarray) -> StateTable:
    """`states` with every test row's outcomes flipped (1 − y): what a forecaster or router that
    reads only the dev rows' outcomes cannot tell apart from `states`."""

    def flipped(role: RoleOutcomes) -> RoleOutcomes:
        y = [row if d else 1.0 - row for row, d in zip(role.y, dev)]
        return replace(role, y=y)

    return replace(states, think=flipped(states.think), search=flipped(states.search))


def _entry(forecaster: str | Registered | Callable[..., Any], fitted: bool) -> Registered:
    if isinstance(forecaster, Registered):
        return forecaster
    if isinstance(forecaster, str):
        found = [e for e in registered_forecasters() if e.name == forecaster]
        if found:
            return found[0]
        try:
            entry = REGISTRY.get("forecaster", forecaster)
        except RegistryError as exc:
            raise AssertionError(str(exc)) from None
        return Registered(entry.name, entry.obj, fitted, False, entry.settings_model)
    name = getattr(forecaster, "__name__", type(forecaster).__name__)
    try:
        REGISTRY.check_component("forecaster", name, forecaster, {}, f"{getattr(forecaster, '__module__', '?')}:{name}")
    except RegistryError as exc:
        raise AssertionError(str(exc)) from None
    return Registered(name, forecaster, fitted)


def check_forecaster(
    forecaster: str | Registered | Callable[..., Any],
    settings: Mapping[str, Any] | None = None,
    *,
    fitted: bool = False,
    states: StateTable | None = None,
) -> Forecast | str:
    """Exercise a forecaster as `branchpoint value` does and raise AssertionError on a violation.

    `forecaster` is a registered name, a `Registered` entry or a function `fn(states, dev)`
    (`fitted`: it needs dev rows). On the kit's state table (`demo.sample_states`, or `states`)
    it must return one probability in [0, 1] per state for q_T and q_S (`Forecast.check`), read
    no test outcome (the development view refuses them, and flipping every test outcome must
    not change its forecasts), and give the same forecasts when run again; a forecaster that is
    not fitted must also run without dev rows. Returns the forecast, or the reason it gave for
    not running here (`ForecasterUnavailable`: e.g. a model folder it needs).
    """
    entry = _entry(forecaster, fitted)
    table = states if states is not None else sample_states()
    dev = dev_mask(table)

    def run(t: StateTable, d: np.ndarray) -> Forecast:
        view = DevView.of(t, d)
        try:
            return run_forecaster(entry, view, view.dev, settings)
        except InputError as exc:
            raise AssertionError(str(exc)) from None

    try:
        first = run(table, dev)
    except ForecasterUnavailable as exc:
        return str(exc)
    where = f'forecaster "{entry.name}"'
    for label, fc in (
        ("run again", run(table, dev)),
        ("with every test outcome flipped", run(_with_other_test_outcomes(table, dev), dev)),
    ):
        same = np.allclose(fc.q_think, first.q_think) and np.allclose(fc.q_search, first.q_search)
        if not same:
            raise AssertionError(
                f"{where}: its forecasts changed {label} (it must read dev outcomes only, deterministically)"
            )
    if not entry.fitted:
        try:
            run(table, np.zeros(len(table), dtype=bool))
        except ForecasterUnavailable as exc:
            raise AssertionError(f"{where}: not fitted, yet it does not run without dev rows ({exc})") from None
    return first


def check_router(
    router: str | Callable[..., Any], *, price: float = 0.0, states: StateTable | None = None
) -> np.ndarray:
    """Exercise a router as `branchpoint value` does and raise AssertionError on a violation:
    on the kit's state table its P(SEARCH) is one number in [0, 1] per state, it reads no test
    outcome (flipping them changes nothing), and it is the same when run again. `router` is a
    registered name or a function `fn(states, dev, price)`. Returns P(SEARCH) per state."""
    if isinstance(router, str):
        try:
            entry = REGISTRY.get(ROUTER, router)
        except RegistryError as exc:
            raise AssertionError(str(exc)) from None
        name, fn = entry.name, entry.obj
    else:
        name, fn = getattr(router, "__name__", type(router).__name__), router
        try:
            REGISTRY.check_component("router", name, fn, {}, f"{getattr(fn, '__module__', '?')}:{name}")
        except RegistryError as exc:
            raise AssertionError(str(exc)) from None
    table = states if states is not None else sample_states()
    dev = dev_mask(table)

    def run(t: StateTable) -> np.ndarray:
        try:
            return run_router(name, fn, DevView.of(t, dev), price)
        except InputError as exc:
            raise AssertionError(str(exc)) from None

    first = run(table)
    if not np.allclose(run(table), first) or not np.allclose(run(_with_other_test_outcomes(table, dev)), first):
        raise AssertionError(f'router "{name}": its P(SEARCH) changed run again or with the test outcomes flipped')
    return first
