"""Forecasters from plug-ins: one registered with `registry.add` from a `@plugin` function (no
`fitted` / `calibrate` metadata) is scored like any other."""

from __future__ import annotations

import sys
import textwrap

import pytest

from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.study import value_study
from tests.evaluation.value.test_study import make_run
from tests.registry.test_plugins import install

PLUGIN_FN = textwrap.dedent('''
    """A plug-in whose entry point is a `@plugin` function that adds a forecaster by hand."""
    import numpy as np

    from branchpoint.registry import plugin


    def constant(states, dev):
        return np.full(len(states), 0.25), np.full(len(states), 0.75)


    @plugin
    def register(registry):
        registry.add("forecaster", "plugin_constant", constant)
''')


def test_a_forecaster_added_by_a_plugin_function_is_scored(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "plugin"
    folder.mkdir()
    install(folder, "bp_forecaster_plugin", PLUGIN_FN, monkeypatch)
    (folder / "bp_forecaster_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[branchpoint.plugins]\nbp_forecaster_plugin = bp_forecaster_plugin:register\n", encoding="utf-8"
    )
    try:
        report = value_study(make_run(tmp_path), config=ValueConfig(judge="given", resamples=0))
    finally:
        sys.modules.pop("bp_forecaster_plugin", None)
    assert report["forecasters"]["plugin_constant"] == {"kind": "registered", "fitted": False}
    assert report["brier"]["plugin_constant"]["brier"] is not None
