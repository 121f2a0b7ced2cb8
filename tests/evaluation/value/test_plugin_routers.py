"""A plug-in router is scored by `branchpoint value` like the built-in ones: it appears in
value.json's utility by price, with intervals, in the command's utility table and in the
report's markdown; it sees the development view only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.markdown import value_markdown
from branchpoint.evaluation.value.routers import registered_routes, route
from branchpoint.evaluation.value.scoring import score
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.testing.demo import dev_mask, sample_states
from tests.evaluation.value.test_study import make_run

PLUGIN = """\
import numpy as np
from branchpoint.evaluation.value.routers import router

@router("search_at_the_start")
def search_at_the_start(states, dev, price):
    return (states.boundary_kind == "initial").astype(float)
"""


@pytest.fixture()
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    REGISTRY.names("router")
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))  # registered for this test only


def test_a_router_module_is_scored_by_the_value_command(tmp_path, monkeypatch, scratch_registry) -> None:
    (tmp_path / "my_router_plugin.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    run = make_run(tmp_path)
    result = CliRunner().invoke(
        app, ["value", str(run), "--judge", "given", "--resamples", "50", "--forecaster-module", "my_router_plugin"]
    )
    assert result.exit_code == 0, result.output
    assert "search_at_the_start" in result.output  # the utility table
    report = json.loads((run / "value.json").read_text())
    for pk, routed in report["utility"]["by_price"].items():
        mine = routed["search_at_the_start"]
        assert 0 < mine["search_rate"] < 1 and mine["chosen_on"] == "dev", pk
        assert report["intervals"]["utility"][pk]["search_at_the_start"] is not None
        # beside the built-in routers
        assert {"always_think", "always_search", "best_constant"} <= set(routed)
    assert "`search_at_the_start`" in value_markdown(report)


def test_registered_routes_score_the_test_rows_from_the_dev_view(scratch_registry) -> None:
    states = sample_states()
    dev = dev_mask(states)
    seen = {}

    @REGISTRY.register("router", "remember_view")
    def remember_view(view, dev_rows, price):
        seen["view"] = view
        return (view.boundary_kind == "initial").astype(float)

    routed = registered_routes(states, ~dev, dev, 0.005, "dev")
    expected = route(states.boundary_kind[~dev] == "initial", states.subset(~dev), 0.005)
    assert np.allclose(routed["remember_view"].utility, expected.utility)
    assert routed["remember_view"].info == {"chosen_on": "dev", "in_sample": False}
    with pytest.raises(AttributeError, match="not in it"):
        _ = seen["view"].think  # test outcomes are not in what a router sees
    report = score(states, dev, {}, ValueConfig(resamples=0))
    assert "remember_view" in report["utility"]["by_price"]["0"]


def test_a_router_that_breaks_the_contract_is_refused(scratch_registry) -> None:
    with pytest.raises(RegistryError, match=r'router "two_args" .*does not take the arguments \(states, dev, price\)'):
        REGISTRY.add("router", "two_args", lambda states, dev: None)
    from branchpoint.evaluation.value.routers import router

    with pytest.raises(RegistryError, match='router "oracle": the name of a router value scores itself'):
        router("oracle")
    REGISTRY.add("router", "too_many", lambda states, dev, price: np.ones(len(states) + 1))
    states = sample_states()
    with pytest.raises(InputError, match=r'router "too_many": returned shape \(25,\), expected \(24,\)'):
        registered_routes(states, ~dev_mask(states), dev_mask(states), 0.0, "dev")
