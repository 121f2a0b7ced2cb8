"""`value_study` on hand-made fork records: numbers, keys, determinism, errors, forecast files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.evaluation.value.scores import brier, gain_risk, theta_hat
from branchpoint.evaluation.value.study import ValueConfig, load_states, value_study
from branchpoint.traces import write_records
from tests.evaluation.value.helpers import fork_record

KEYS = {"brier", "gain_risk", "theta", "gain_variance", "gain_r2", "intervals", "utility"}


def make_run(tmp_path, n_questions=12, seed=0):
    """A run folder with forks.jsonl only: 2 checkpoints per question, 4 repeats per action."""
    rng = np.random.default_rng(seed)
    records = []
    for q in range(n_questions):
        for ckpt, boundary in (("c0", "initial"), ("c1", "after_search_1")):
            p_t, p_s = rng.uniform(), rng.uniform()
            for action, p, tok in (("THINK", p_t, (300, 10)), ("SEARCH", p_s, (900, 40))):
                for rep in range(4):
                    records.append(fork_record(
                        f"p{q}", ckpt, action, rep, boundary=boundary, stratum=["hop2", "hop3"][q % 2],
                        support_group=f"page{q // 2}", label="CORRECT" if rng.uniform() < p else "INCORRECT",
                        answer=f"a{rep}", tokens=tok,
                    ))
    run = tmp_path / "run"
    write_records(run / "forks.jsonl", records)
    return run


def test_value_json_numbers_and_keys(tmp_path):
    run = make_run(tmp_path)
    forecasts = tmp_path / "mine.jsonl"
    forecasts.write_text("".join(
        json.dumps({"parent_execution_id": f"p{q}", "checkpoint_id": c, "q_think": 0.3, "q_search": 0.6}) + "\n"
        for q in range(12) for c in ("c0", "c1")
    ) + json.dumps({"parent_execution_id": "ghost", "checkpoint_id": "c0", "q_think": 0.1, "q_search": 0.2}) + "\n")
    config = ValueConfig(judge="given", resamples=500)
    report = value_study(run, config=config, forecast_files=[forecasts])
    saved = json.loads((run / "value.json").read_text())
    assert KEYS <= set(saved) and saved["brier"] == report["brier"]

    states, _, _ = load_states(run, config)
    assert report["states"]["scored"] == len(states) == 24
    assert report["states"]["dev"] + report["states"]["test"] == 24
    assert report["states"]["components"]["dev"] == 2  # round(0.3 · 6 support pages)
    assert set(report["brier"]) >= {"historical_mean", "stratum_prior", "boundary_prior", "file:mine",
                                    "file:mine+ridge", "file:mine+affine", "file:mine+logistic", "file:mine+isotonic"}
    assert report["forecasters"]["file:mine"]["info"]["n_unknown"] == 1

    # recompute the constant forecaster's numbers on the test rows by hand (strata balanced)
    from branchpoint.evaluation.value.outcomes import dev_split

    test = ~dev_split(states, 0.3, 0)
    tt = states.subset(test)
    strata = tt.stratum.astype(str)
    bal = lambda v: np.mean([v[strata == s].mean() for s in sorted(set(strata))])  # noqa: E731
    q_t, q_s = np.full(len(tt), 0.3), np.full(len(tt), 0.6)
    theta = theta_hat(tt.think, tt.search)
    assert report["theta"] == pytest.approx(bal(theta))
    assert report["brier"]["file:mine"]["brier"] == pytest.approx(bal(brier(q_t, q_s, tt.think, tt.search)))
    risk = bal(gain_risk(q_s - q_t, tt.dbar, theta))
    assert report["gain_risk"]["file:mine"] == pytest.approx(risk)
    v = bal(theta) - bal(tt.dbar) ** 2
    assert report["gain_variance"] == pytest.approx(v)
    assert report["gain_r2"]["file:mine"] == pytest.approx(1 - risk / v)
    parts = report["brier"]["file:mine"]
    assert parts["level"] + parts["gain"] + parts["variance"] == pytest.approx(parts["brier"])

    pair = report["paired"]["historical_mean - file:mine"]["brier"]  # pairs in scoring order: A - B
    assert pair["difference"] == pytest.approx(
        report["brier"]["historical_mean"]["brier"] - report["brier"]["file:mine"]["brier"])
    lo, hi = pair["interval"]
    assert lo <= pair["difference"] <= hi

    by_price = report["utility"]["by_price"]
    assert list(by_price) == ["0", "0.001", "0.005", "0.01", "0.02"]
    assert {"always_think", "always_search", "best_constant", "consistency", "sample_informed", "oracle",
            "threshold:file:mine"} <= set(by_price["0"])
    assert by_price["0"]["oracle"]["utility"] >= by_price["0"]["always_search"]["utility"]
    assert report["intervals"]["utility"]["0.01"]["consistency"][0] <= by_price["0.01"]["consistency"]["utility"]
    lo, hi = report["intervals"]["brier"]["historical_mean"]
    assert lo <= report["brier"]["historical_mean"]["brier"] <= hi


def test_same_seed_same_report(tmp_path):
    run = make_run(tmp_path)
    config = ValueConfig(judge="given", resamples=300, seed=5)
    a = value_study(run, config=config, write=False)
    b = value_study(run, config=config, write=False)
    assert a == b
    c = value_study(run, config=ValueConfig(judge="given", resamples=300, seed=6), write=False)
    assert c["intervals"] != a["intervals"]


def test_no_dev_rows_skips_fitted_forecasters(tmp_path):
    run = make_run(tmp_path)
    report = value_study(run, config=ValueConfig(judge="given", resamples=0, dev_split=0.0), write=False)
    assert report["brier"] == {} and "historical_mean" in report["skipped_forecasters"]
    assert report["states"]["test"] == 24 and report["intervals"]["theta"] is None
    assert "best_constant" not in report["utility"]["by_price"]["0"]


def test_errors_are_for_people(tmp_path):
    (tmp_path / "empty_run").mkdir()
    with pytest.raises(InputError, match=r"forks.jsonl: not found.*run `branchpoint fork .*empty_run` first"):
        value_study(tmp_path / "empty_run")
    run = make_run(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"parent_execution_id": "p0", "checkpoint_id": "c0", "q_search": 0.5}\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["value", str(run), "--forecasts", str(bad), "--judge", "given",
                                      "--resamples", "0"])
    assert result.exit_code == 2
    assert 'bad.jsonl line 1: field "q_think" missing' in result.output
    one_repeat = tmp_path / "one"
    write_records(one_repeat / "forks.jsonl", [fork_record("p", "c", a, 0) for a in ("THINK", "SEARCH")])
    with pytest.raises(InputError, match="no state can be scored: of 1 forked states, 0 lack .* 1 have fewer than 2"):
        value_study(one_repeat, config=ValueConfig(judge="given"))


def test_forecaster_module_plugs_a_function_into_the_command(tmp_path, monkeypatch):
    from branchpoint.evaluation.value import forecasters as registry

    monkeypatch.setattr(registry, "_FORECASTERS", dict(registry._FORECASTERS))
    (tmp_path / "my_value_plugin.py").write_text(
        "import numpy as np\n"
        "from branchpoint.evaluation.value import forecaster\n\n"
        "@forecaster('always_sixty_forty')\n"
        "def sixty_forty(states, dev):\n"
        "    return np.full(len(states), 0.6), np.full(len(states), 0.4)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    run = make_run(tmp_path)
    result = CliRunner().invoke(app, ["value", str(run), "--judge", "given", "--resamples", "0",
                                      "--forecaster-module", "my_value_plugin"])
    assert result.exit_code == 0, result.output
    report = json.loads((run / "value.json").read_text())
    assert report["brier"]["always_sixty_forty"]["brier"] is not None
    assert "always_sixty_forty - historical_mean" in report["paired"]  # registered forecasters by name
    result = CliRunner().invoke(app, ["value", str(run), "--forecaster-module", "no_such_module_xyz"])
    assert result.exit_code == 2 and "--forecaster-module no_such_module_xyz: cannot import" in result.output


def test_a_forecasts_file_matching_no_state_warns_on_the_console(tmp_path):
    run = make_run(tmp_path)
    other = tmp_path / "other_run_forecasts.jsonl"
    other.write_text('{"parent_execution_id": "elsewhere", "checkpoint_id": "c9", "q_think": 0.4, "q_search": 0.6}\n',
                     encoding="utf-8")
    result = CliRunner().invoke(app, ["value", str(run), "--forecasts", str(other), "--judge", "given", "--resamples", "0"])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "none of its 1 forecasts matches a scored state" in result.output
    assert "elsewhere / c9" in result.output
