"""`value_study` on hand-made fork records: numbers, keys, determinism, errors, forecast files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.scores import brier, gain_risk, theta_hat
from branchpoint.evaluation.value.study import load_states, value_study
from branchpoint.traces import read_records, write_records
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
                    records.append(
                        fork_record(
                            f"p{q}",
                            ckpt,
                            action,
                            rep,
                            boundary=boundary,
                            stratum=["hop2", "hop3"][q % 2],
                            support_group=f"page{q // 2}",
                            label="CORRECT" if rng.uniform() < p else "INCORRECT",
                            answer=f"a{rep}",
                            tokens=tok,
                        )
                    )
    run = tmp_path / "run"
    write_records(run / "forks.jsonl", records)
    return run


def test_value_json_numbers_and_keys(tmp_path):
    run = make_run(tmp_path)
    forecasts = tmp_path / "mine.jsonl"
    forecasts.write_text(
        "".join(
            json.dumps({"parent_execution_id": f"p{q}", "checkpoint_id": c, "q_think": 0.3, "q_search": 0.6}) + "\n"
            for q in range(12)
            for c in ("c0", "c1")
        )
        + json.dumps({"parent_execution_id": "ghost", "checkpoint_id": "c0", "q_think": 0.1, "q_search": 0.2})
        + "\n"
    )
    config = ValueConfig(judge="given", resamples=500)
    report = value_study(run, config=config, forecast_files=[forecasts])
    saved = json.loads((run / "value.json").read_text())
    assert set(saved) >= KEYS and saved["brier"] == report["brier"]

    states, _, _ = load_states(run, config)
    assert report["states"]["scored"] == len(states) == 24
    assert report["states"]["dev"] + report["states"]["test"] == 24
    assert report["states"]["components"]["dev"] == 2  # round(0.3 · 6 support pages)
    assert set(report["brier"]) >= {
        "historical_mean",
        "stratum_prior",
        "boundary_prior",
        "file:mine",
        "file:mine+ridge",
        "file:mine+affine",
        "file:mine+logistic",
        "file:mine+isotonic",
    }
    assert report["forecasters"]["file:mine"]["info"]["n_unknown"] == 1

    # recompute the constant forecaster's numbers on the test rows by hand (strata balanced)
    from branchpoint.evaluation.value.outcomes import dev_split

    test = ~dev_split(states, 0.3, 0)
    tt = states.subset(test)
    strata = tt.stratum.astype(str)
    bal = lambda v: np.mean([v[strata == s].mean() for s in sorted(set(strata))])
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
        report["brier"]["historical_mean"]["brier"] - report["brier"]["file:mine"]["brier"]
    )
    lo, hi = pair["interval"]
    assert lo <= pair["difference"] <= hi

    by_price = report["utility"]["by_price"]
    assert list(by_price) == ["0", "0.001", "0.005", "0.01", "0.02"]
    assert {
        "always_think",
        "always_search",
        "best_constant",
        "consistency",
        "sample_informed",
        "oracle",
        "threshold:file:mine",
    } <= set(by_price["0"])
    assert by_price["0"]["oracle"]["utility"] >= by_price["0"]["always_search"]["utility"]
    assert report["intervals"]["utility"]["0.01"]["consistency"][0] <= by_price["0.01"]["consistency"]["utility"]
    lo, hi = report["intervals"]["brier"]["historical_mean"]
    assert lo <= report["brier"]["historical_mean"]["brier"] <= hi


def test_same_seed_same_report(tmp_path):
    run = make_run(tmp_path)
    config = ValueConfig(judge="given", resamples=300, seed=5)
    a = value_study(run, config=config, write=False)
    b = value_study(run, config=config, write=False)
    a.pop("provenance"), b.pop("provenance")  # where each came from (its time among it)
    assert a == b
    c = value_study(run, config=ValueConfig(judge="given", resamples=300, seed=6), write=False)
    assert c["intervals"] != a["intervals"]


def test_no_dev_rows_chooses_in_sample_and_says_so(tmp_path):
    run = make_run(tmp_path)
    forecasts = tmp_path / "mine.jsonl"
    # f = +0.4 at the initial checkpoints, −0.4 after a search
    forecasts.write_text(
        "".join(
            json.dumps({"parent_execution_id": f"p{q}", "checkpoint_id": c, "q_think": qt, "q_search": 1 - qt}) + "\n"
            for q in range(12)
            for c, qt in (("c0", 0.3), ("c1", 0.7))
        )
    )
    config = ValueConfig(judge="given", resamples=0, dev_split=0.0, taus=(-0.5, 0.0, 0.5))
    report = value_study(run, config=config, forecast_files=[forecasts], write=False)
    assert "historical_mean" in report["skipped_forecasters"] and set(report["brier"]) == {"file:mine"}
    assert report["states"]["test"] == 24 and report["intervals"]["theta"] is None
    assert report["utility"]["in_sample"] is True and any("in-sample" in w for w in report["warnings"])
    states, _, _ = load_states(run, config)
    strata = states.stratum.astype(str)
    bal = lambda v: np.mean([v[strata == s].mean() for s in sorted(set(strata))])
    for pk, price in (("0", 0.0), ("0.02", 0.02)):
        u_t = bal(states.think.mean_y - price * states.think.mean_tokens / 1000)
        u_s = bal(states.search.mean_y - price * states.search.mean_tokens / 1000)
        best = report["utility"]["by_price"][pk]["best_constant"]
        assert best["in_sample"] is True and best["utility"] == pytest.approx(max(u_t, u_s))
        assert best["action"] == ("search" if u_s > u_t else "think")
        thr = report["utility"]["by_price"][pk]["threshold:file:mine"]
        assert thr["in_sample"] is True
        by_tau = thr["test_utility_by_tau"]
        top = max(by_tau.values())
        assert thr["tau"] == min(
            (t for t in (-0.5, 0.0, 0.5) if by_tau[f"{t:g}"] >= top - 1e-12), key=lambda t: (abs(t), t)
        )
        assert thr["utility"] == pytest.approx(top)


def test_errors_are_for_people(tmp_path):
    (tmp_path / "empty_run").mkdir()
    with pytest.raises(InputError, match=r"forks.jsonl: not found.*run `branchpoint fork .*empty_run` first"):
        value_study(tmp_path / "empty_run")
    run = make_run(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"parent_execution_id": "p0", "checkpoint_id": "c0", "q_search": 0.5}\n', encoding="utf-8")
    result = CliRunner().invoke(
        app, ["value", str(run), "--forecasts", str(bad), "--judge", "given", "--resamples", "0"]
    )
    assert result.exit_code == 2
    assert 'bad.jsonl line 1: field "q_think" missing' in result.output
    one_repeat = tmp_path / "one"
    write_records(one_repeat / "forks.jsonl", [fork_record("p", "c", a, 0) for a in ("THINK", "SEARCH")])
    with pytest.raises(InputError, match="no state can be scored: of 1 forked states, 0 lack .* 1 have fewer than 2"):
        value_study(one_repeat, config=ValueConfig(judge="given"))


def test_forecaster_module_plugs_a_function_into_the_command(tmp_path, monkeypatch):

    from branchpoint.registry import REGISTRY

    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))  # registered for this test only
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
    result = CliRunner().invoke(
        app, ["value", str(run), "--judge", "given", "--resamples", "0", "--forecaster-module", "my_value_plugin"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((run / "value.json").read_text())
    assert report["brier"]["always_sixty_forty"]["brier"] is not None
    assert "always_sixty_forty - historical_mean" in report["paired"]  # registered forecasters by name
    result = CliRunner().invoke(app, ["value", str(run), "--forecaster-module", "no_such_module_xyz"])
    assert result.exit_code == 2 and "--forecaster-module no_such_module_xyz: cannot import" in result.output


def test_oracle_range_factorial_and_level_split_in_value_json(tmp_path):
    from branchpoint.evaluation.value.scores import oracle_range

    run = make_run(tmp_path)
    report = value_study(run, config=ValueConfig(judge="given", resamples=200), write=False)
    lo, hi = oracle_range(report["theta"], report["mean_gain"])
    assert report["oracle_range"]["lower"] == pytest.approx(lo) and report["oracle_range"]["upper"] == pytest.approx(hi)
    assert "oracle_bound" not in report["intervals"] and report["utility"]["oracle_plugin_optimistic"] >= hi - 1
    for pk in ("0", "0.005"):
        cells = report["decision_factorial"]["by_price"][pk]["over_best_constant"]
        # fixed gain and fixed cost, both from the dev rows, is the dev-chosen constant action
        assert cells["fixed_gain_fixed_cost"]["difference"] == pytest.approx(0.0, abs=1e-12)
        assert cells["query_gain_query_cost"]["utility"] == pytest.approx(
            report["utility"]["by_price"][pk]["sample_informed"]["utility"]
        )
        c = report["decision_factorial"]["by_price"][pk]["contrasts"]
        assert c["interaction"]["difference"] == pytest.approx(
            c["cost_added_to_gain"]["difference"]
            - cells["fixed_gain_query_cost"]["difference"]
            + cells["fixed_gain_fixed_cost"]["difference"]
        )
    split = report["level_split"]["stratum_prior - historical_mean"]
    parts = report["brier"]
    assert split["level_total"]["value"] == pytest.approx(
        parts["stratum_prior"]["level"] - parts["historical_mean"]["level"]
    )
    assert split["level_mean_bias"]["value"] + split["level_variation"]["value"] == pytest.approx(
        split["level_total"]["value"]
    )
    assert split["level_total"]["interval"] is not None


def test_single_component_stratum_gets_no_interval_and_a_warning(tmp_path):
    run = make_run(tmp_path)
    records = read_records(run / "forks.jsonl")
    extra = [
        fork_record(
            f"solo{q}",
            "c0",
            a,
            rep,
            stratum="four_hop",
            support_group="one_page",
            label="CORRECT" if (rep + q) % 2 else "INCORRECT",
        )
        for q in range(3)
        for a in ("THINK", "SEARCH")
        for rep in range(4)
    ]
    write_records(run / "forks.jsonl", records + extra)
    report = value_study(run, config=ValueConfig(judge="given", resamples=200, dev_split=0.0), write=False)
    assert any("'four_hop' has a single support component" in w for w in report["warnings"])
    assert report["intervals"]["theta"] is None and report["intervals"]["withheld"]
    assert report["theta"] is not None


def test_fitted_forecasters_and_text_head_in_value_json(tmp_path):
    run = make_run(tmp_path)
    forecasts = tmp_path / "mine.jsonl"
    forecasts.write_text(
        "".join(
            json.dumps(
                {"parent_execution_id": f"p{q}", "checkpoint_id": c, "q_think": 0.2 + 0.05 * (q % 5), "q_search": 0.5}
            )
            + "\n"
            for q in range(12)
            for c in ("c0", "c1")
        )
    )
    from branchpoint.retrieval.encoder import get_encoder

    config = ValueConfig(judge="given", resamples=0, text_head=True)
    report = value_study(
        run, config=config, forecast_files=[forecasts], write=False, text_encoder=get_encoder("minilm-onnx").encode
    )
    assert {
        "public_prefix_ridge",
        "metadata_ridge",
        "minilm_ridge",
        "file:mine+beta",
        "file:mine+direct_gain",
        "file:mine+residual",
        "file:mine+public_prefix",
        "file:mine+stop_offset",
        "file:mine+stop_feedback",
    } <= set(report["brier"])
    assert report["forecasters"]["minilm_ridge"]["info"]["penalty"] is not None
    without = value_study(run, config=ValueConfig(judge="given", resamples=0), write=False)
    assert "--text-head" in without["skipped_forecasters"]["minilm_ridge"]


def test_scoring_objectives_on_the_same_executions(tmp_path):
    # one question, 4 repeats each; gold "Paris". THINK answers: "Paris" (CORRECT), "It is Paris."
    # (CORRECT), "the city of paris" (INCORRECT by the given labels), "I don't know".
    # SEARCH: "Paris" ×3 CORRECT, one length failure. One SEARCH repeat is incomplete.
    think = [
        ("Paris", "CORRECT", "ok"),
        ("It is Paris.", "CORRECT", "ok"),
        ("the city of paris", "INCORRECT", "ok"),
        ("I don't know", "INCORRECT", "ok"),
    ]
    search = [("Paris", "CORRECT", "ok")] * 3 + [("Paris", "CORRECT", "length")]
    recs = [
        fork_record("p", "c", "THINK", i, answer=a, label=lab, status=st, gold=["Paris"])
        for i, (a, lab, st) in enumerate(think)
    ]
    recs += [
        fork_record("p", "c", "SEARCH", i, answer=a, label=lab, status=st, gold=["Paris"])
        for i, (a, lab, st) in enumerate(search)
    ]
    recs.append(fork_record("p", "c", "SEARCH", 9, answer="Paris", status="incomplete", gold=["Paris"]))
    run = tmp_path / "run"
    write_records(run / "forks.jsonl", recs)
    report = value_study(run, config=ValueConfig(judge="given", resamples=0, dev_split=0.0), write=False)
    obj = report["scoring_objectives"]["objectives"]
    # correct (given labels): T = 2/4, S = 4/4 (the given label of the length failure is CORRECT)
    assert obj["correct"]["think"]["value"] == 0.5 and obj["correct"]["search"]["value"] == 1.0
    # containment: Paris, It is Paris., the city of paris → 3/4; S: 3/4 (length failure 0)
    assert obj["containment"]["think"]["value"] == 0.75 and obj["containment"]["search"]["value"] == 0.75
    # exact match: only "Paris" → 1/4; S 3/4
    assert obj["exact_match"]["think"]["value"] == 0.25 and obj["exact_match"]["gain"]["value"] == 0.5
    assert obj["exact_match"]["gain_minus_reference"]["value"] == pytest.approx(0.5 - 0.5)
    assert report["scoring_objectives"]["incomplete_records"] == 1


def test_audit_bounds_from_two_judges(tmp_path):
    run = make_run(tmp_path)  # answers "a0".."a3", gold "x": the rule judge says INCORRECT everywhere
    report = value_study(
        run, config=ValueConfig(judge="given", resamples=100, audit_judges=("rule", "given")), write=False
    )
    audit = report["audit_bounds"]
    assert audit["judges"] == ["rule", "given"]
    entry = audit["gain_vs_mean_gain"]["stratum_prior"]
    assert entry["lower"] <= entry["upper"] and entry["uncertain_pairs"] > 0
    assert entry["interval"][0] <= entry["lower"] and entry["interval"][1] >= entry["upper"]
    assert set(audit["brier_vs_mean"]) == set(audit["gain_vs_mean_gain"])
    assert "historical_mean" in audit["gain_vs_zero"]


def test_cli_options_and_report_section(tmp_path):
    from branchpoint.evaluation.report import write_report

    run = make_run(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "value",
            str(run),
            "--judge",
            "given",
            "--resamples",
            "50",
            "--audit-judges",
            "rule,given",
            "--learning-curves",
            "--curve-budgets",
            "2,4",
            "--curve-samples",
            "2",
            "--text-head",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "decision factorial" in result.output
    saved = json.loads((run / "value.json").read_text())
    assert saved["learning_curves"]["budgets"] == [2, 4] and saved["audit_bounds"]["judges"] == ["rule", "given"]
    assert "minilm_ridge" in saved["brier"] and "minilm" in saved["learning_curves"]["families"]
    report, figures = write_report(run)  # no metrics.json: the value section alone
    text = report.read_text()
    for heading in (
        "## Search value",
        "### Forecasters",
        "### Brier contrast against a constant level",
        "### Router utility",
        "### Decision factorial",
        "### Scoring objectives",
        "### Shared-label audit bounds",
        "### Matched-configuration learning curves",
    ):
        assert heading in text
    assert "Zero-price oracle improvement" in text
    # the learning curves are drawn too (the study's Figure 4): PNG, SVG and their data as CSV
    figure = figures["learning_curves"]
    assert figure is not None and figure.is_file() and figure.with_suffix(".svg").is_file()
    rows = figure.with_suffix(".csv").read_text().splitlines()
    assert rows[0].startswith("family,budget,gain_r2") and len(rows) == 1 + 2 * len(
        saved["learning_curves"]["families"]
    )
    assert "![Learning curves](figures/learning_curves.png)" in text
    bad = CliRunner().invoke(app, ["value", str(run), "--audit-judges", "rule"])
    assert bad.exit_code == 2 and "--audit-judges: expected two judge names" in bad.output


def test_oracle_range_interval_spans_both_bounds(tmp_path):
    report = value_study(make_run(tmp_path), config=ValueConfig(judge="given", resamples=300), write=False)
    rng = report["oracle_range"]
    assert rng["interval"][0] <= rng["lower"] <= rng["upper"] <= rng["interval"][1]


def test_a_forecasts_file_matching_no_state_warns_on_the_console(tmp_path):
    run = make_run(tmp_path)
    other = tmp_path / "other_run_forecasts.jsonl"
    other.write_text(
        '{"parent_execution_id": "elsewhere", "checkpoint_id": "c9", "q_think": 0.4, "q_search": 0.6}\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app, ["value", str(run), "--forecasts", str(other), "--judge", "given", "--resamples", "0"]
    )
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "none of its 1 forecasts matches a scored state" in result.output
    assert "elsewhere / c9" in result.output
