"""Forecasters and calibration maps from plug-ins: one registered with `registry.add` from a
`@plugin` function (no `fitted` / `calibrate` metadata) is scored like any other; they see the
development view of the states, so one that reaches for test outcomes fails."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import numpy as np
import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import Forecast, calibrator, forecaster
from branchpoint.evaluation.value.outcomes import StateTable, dev_split
from branchpoint.evaluation.value.study import load_states, value_study
from branchpoint.registry import REGISTRY
from tests.conftest import REPO
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


def test_a_forecaster_that_peeks_at_test_outcomes_is_refused(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It gets the development view: every row's outcomes are not reachable from it (an error
    naming the forecaster), and the dev rows' own table holds the dev rows only."""
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))  # registered for this test only
    seen: dict[str, object] = {}

    @forecaster("peek")
    def peek(states, dev):
        return states.think.mean_y, states.search.mean_y  # the scored outcomes themselves

    run = make_run(tmp_path)
    config = ValueConfig(judge="given", resamples=0)
    with pytest.raises(InputError, match=r'forecaster "peek": .*`states.think` \(every row\'s outcomes\) is not in it'):
        value_study(run, config=config, write=False)
    assert not (run / "value.json").exists()
    del REGISTRY._entries[("forecaster", "peek")]

    @forecaster("dev_only")
    def dev_only(states, dev):
        seen["view"] = states
        return np.full(len(states), 0.5), np.full(len(states), 0.5)

    value_study(run, config=config, write=False)
    view = seen["view"]
    states, _, _ = load_states(run, config)
    dev = dev_split(states, config.dev_split, config.seed)
    assert isinstance(view, DevView) and not isinstance(view, StateTable) and len(view) == len(states)
    assert len(view.dev_states) == int(dev.sum()) < len(states)
    assert view.dev_states.keys == [k for k, d in zip(states.keys, dev) if d]
    np.testing.assert_array_equal(view.dev_states.think.mean_y, states.think.mean_y[dev])
    assert not any(hasattr(view, name) for name in ("think", "search", "dbar"))
    assert np.isnan(view.targets()[~dev]).all() and not np.isnan(view.targets()[dev]).any()


def test_a_calibration_map_that_peeks_is_refused(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))

    @calibrator("peek_map")
    def peek_map(raw, states, dev, seed=0):
        return Forecast(states.think.mean_y, states.search.mean_y)

    run = make_run(tmp_path)
    forecasts = tmp_path / "f.jsonl"
    states, _, _ = load_states(run, ValueConfig(judge="given"))
    forecasts.write_text(
        "".join(
            json.dumps({"parent_execution_id": p, "checkpoint_id": c, "q_think": 0.4, "q_search": 0.6}) + "\n"
            for p, c in states.keys
        )
    )
    with pytest.raises(InputError, match=r'calibration map "peek_map": .*not in it'):
        value_study(run, config=ValueConfig(judge="given", resamples=0), forecast_files=[forecasts], write=False)


def test_the_search_value_page_example_is_scored(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/search-value.md's forecaster, copied from the page, runs on the development view."""
    page = (REPO / "docs" / "search-value.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(# my_forecasters.py.*?)```", page, re.DOTALL)
    assert code, "docs/search-value.md: the my_forecasters.py example is missing"
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    exec(compile(code.group(1), "docs/search-value.md", "exec"), {})
    report = value_study(make_run(tmp_path), config=ValueConfig(judge="given", resamples=0), write=False)
    assert report["forecasters"]["search_when_nothing_in_hand"]["fitted"] is True
    assert report["brier"]["search_when_nothing_in_hand"]["brier"] is not None
