"""Seed 002's remaining analyses (`seed_analyses` and its modules) on hand-computed tables:
paired router differences, simultaneous intervals, per-stratum panels, the spread of gains,
the power calculation and failure rates; then the sections in value.json and the report."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from branchpoint.evaluation.value.bootstrap import bootstrap_means, count_chunks, home_groups, label_codes
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.failures import failure_rates
from branchpoint.evaluation.value.gain_spread import gain_spread, spread_columns, spread_stats
from branchpoint.evaluation.value.json_numbers import num
from branchpoint.evaluation.value.power import detectable_difference, power_at, required_n
from branchpoint.evaluation.value.seed_analyses import ScoreColumns, power_section, router_differences
from branchpoint.evaluation.value.simultaneous import max_standardised
from branchpoint.evaluation.value.strata_panels import bootstrap_stratum_means, strata_panels
from branchpoint.evaluation.value.study import value_study
from branchpoint.evaluation.value.value_file import read_value, value_file_text
from tests.evaluation.value.helpers import make_states
from tests.evaluation.value.test_study import make_run

# --- power (§4.2) ------------------------------------------------------------------------------


def test_power_reproduces_the_seed_sample_size():
    # seed 002 §4.2: σ 0.0651, δ 0.01, 80% power (two-sided 5%) -> about 333 questions:
    # ((1.959964 + 0.841621) · 0.0651 / 0.01)² = 18.2383² = 332.64 -> 333
    assert required_n(0.0651, 0.01) == 333
    assert required_n(0.0651, -0.01) == 333  # the sign of the difference does not matter
    assert required_n(0.0651, 0.02) == math.ceil(332.64 / 4)  # 83.16 -> 84
    assert detectable_difference(0.0651, 333) == pytest.approx(2.801585 * 0.0651 / math.sqrt(333), rel=1e-6)
    # at n(δ) the power is at least 0.8, one question fewer it is below
    assert power_at(0.0651, 333, 0.01) >= 0.8 > power_at(0.0651, 332, 0.01)
    assert required_n(0.0651, 0.0) is None


def test_power_section_uses_the_per_state_paired_sd():
    # three states, L of f and of the comparator: differences [0.1, 0.3, 0.2] -> σ = 0.1 (ddof 1)
    names = ["L/f", "L/historical_mean"]
    values = np.array([[0.3, 0.2], [0.5, 0.2], [0.4, 0.2]])
    sc = ScoreColumns(names, values, {"L/f": 0.4, "L/historical_mean": 0.2}, {}, None, ["f", "historical_mean"], [], 0)  # type: ignore[arg-type]
    entry = power_section(sc, num)["contrasts"]["gain_risk: f - historical_mean"]
    assert entry["sd"] == pytest.approx(0.1)
    assert entry["n"] == 3 and entry["difference"] == pytest.approx(0.2)
    assert entry["required_n"]["0.01"] == math.ceil((2.801585 * 0.1 / 0.01) ** 2)  # 784.9 -> 785
    assert entry["detectable_difference"] == pytest.approx(2.801585 * 0.1 / math.sqrt(3), rel=1e-6)


# --- simultaneous intervals (Appendix B) -----------------------------------------------------


def test_max_standardised_on_a_hand_table():
    # column 0: ±1 (se √(4/3)), column 1: ±2, 0, 0 (se √(8/3)); standardised |dev|: 0.866… and
    # √1.5 = 1.2247 / 0; row maxima [1.2247, 1.2247, 0.866, 0.866]; their median (level 0.5)
    # = (√3/2 + √1.5)/2; the constant column 2 has no spread and is left out
    samples = np.array([[1.0, 2.0, 5.0], [-1.0, -2.0, 5.0], [1.0, 0.0, 5.0], [-1.0, 0.0, 5.0]])
    sim = max_standardised([0.0, 0.0, 5.0], samples, level=0.5)
    c = (math.sqrt(3) / 2 + math.sqrt(1.5)) / 2
    assert sim.critical == pytest.approx(c)
    assert sim.se[0] == pytest.approx(math.sqrt(4 / 3)) and sim.se[1] == pytest.approx(math.sqrt(8 / 3))
    assert sim.intervals[0] == pytest.approx((-c * math.sqrt(4 / 3), c * math.sqrt(4 / 3)))
    assert sim.intervals[2] is None and sim.se[2] is None and 2 in sim.excluded


def test_max_standardised_reaches_family_wise_coverage():
    # K independent normal contrasts: c solves (2Φ(c) − 1)^K = level (Šidák), wider than 1.96
    rng = np.random.default_rng(3)
    k, level = 10, 0.95
    samples = rng.normal(size=(40_000, k)) * np.arange(1, k + 1)
    sim = max_standardised(np.zeros(k), samples, level)
    expected = norm.ppf((1 + level ** (1 / k)) / 2)  # 2.80
    assert sim.critical == pytest.approx(expected, abs=0.03)
    assert sim.critical > 1.96


def test_rounding_noise_is_no_spread():
    samples = np.column_stack([np.full(50, 0.3) + np.linspace(0, 1e-16, 50), np.linspace(-1, 1, 50)])
    sim = max_standardised([0.3, 0.0], samples, 0.95)
    assert 0 in sim.excluded and sim.intervals[1] is not None


# --- paired router differences (§5.4–5.5) -----------------------------------------------------


def test_router_differences_are_paired_over_resamples():
    # a and the reference move together: their difference is 0.1, 0.05, 0.1, 0.05 in the four
    # resamples, so the paired interval is [0.05, 0.1]; each alone spans 0.2 or more
    boot = {
        "U/0/a": np.array([0.5, 0.6, 0.4, 0.5]),
        "U/0/always_search": np.array([0.4, 0.55, 0.3, 0.45]),
    }
    point = {"U/0/a": 0.5, "U/0/always_search": 0.4}
    sc = ScoreColumns(list(point), np.zeros((1, 2)), point, boot, None, [], ["0"], 0)  # type: ignore[arg-type]
    out = router_differences(sc, 0.95, num)["by_price"]["0"]
    assert out["a - always_search"]["difference"] == pytest.approx(0.1)
    assert out["a - always_search"]["interval"] == pytest.approx([0.05, 0.1])
    assert "always_search - always_search" not in out


# --- gain spread (§5.2, Figure 4 left, Appendix B) -------------------------------------------


def spread_table():
    # s1: T [0,0] S [1,1]: Δ̄ 1, θ̂ 1, noise 0; s2: T [1,1] S [1,1]: Δ̄ 0, θ̂ 0, noise 0;
    # s3: T [1,0] S [1,1]: Δ̄ ½, θ̂ 1 + 0 − 2·½ = 0, noise s²_T/2 = ½/2 = ¼
    return make_states([[0, 0], [1, 1], [1, 0]], [[1, 1], [1, 1], [1, 1]])


def test_gain_spread_hand_numbers():
    # means: θ̂ ⅓, Δ̄ ½, Δ̄² 5/12, noise 1/12 -> V_Δ = 1/12, V_obs = 1/6, N = 1/12, share ½
    out = gain_spread(spread_table(), resamples=0, seed=0, level=0.95, num=num)
    assert out["gain_variance"]["value"] == pytest.approx(1 / 12)
    assert out["observed_variance"]["value"] == pytest.approx(1 / 6)
    assert out["noise_variance"]["value"] == pytest.approx(1 / 12)
    assert out["noise_share"]["value"] == pytest.approx(0.5)
    assert out["gain_sd"]["value"] == pytest.approx(math.sqrt(1 / 12))
    assert out["sd_distribution"] is None


def test_gain_spread_resamples_keep_the_identity_and_the_seeded_draws():
    st = make_states(
        [[0, 0], [1, 1], [1, 0], [0, 1], [0, 0], [1, 1]],
        [[1, 1], [1, 1], [1, 1], [0, 0], [1, 0], [0, 1]],
        strata=["a", "a", "a", "b", "b", "b"],
    )
    out = gain_spread(st, resamples=300, seed=4, level=0.95, num=num)
    boot = spread_stats(bootstrap_means(spread_columns(st), st.component, st.stratum, resamples=300, seed=4))
    np.testing.assert_allclose(boot["observed_variance"], boot["gain_variance"] + boot["noise_variance"])
    lo, hi = np.quantile(np.sqrt(np.maximum(boot["gain_variance"], 0)), [0.025, 0.975])
    assert out["gain_sd"]["interval"] == pytest.approx([lo, hi])
    dist = out["sd_distribution"]
    assert sum(dist["histogram"]["counts"]) == 300
    assert dist["undefined_share"] == pytest.approx(float(np.mean(boot["gain_variance"] <= 0)))


# --- per-stratum panels (Figure 3) -----------------------------------------------------------


def test_stratum_bootstrap_is_the_studys_resamples():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(9, 2))
    comps = np.array(["c0", "c0", "c1", "c2", "c3", "c3", "c4", "c5", "c5"], dtype=object)
    strata = np.array(["a", "a", "a", "a", "b", "b", "b", "b", "b"], dtype=object)
    got = bootstrap_stratum_means(values, comps, strata, resamples=50, seed=7)
    # by hand: the same seeded draw counts, then each stratum's mean over its drawn states
    comp, n_comp = label_codes(comps)
    counts = np.concatenate(list(count_chunks(n_comp, 50, 7, home_groups(comps, strata))))
    for s in ("a", "b"):
        for b in range(50):
            w = np.array([counts[b, comp[i]] if strata[i] == s else 0 for i in range(9)], dtype=float)
            np.testing.assert_allclose(got[s][b], (w[:, None] * values).sum(axis=0) / w.sum())
    # with one stratum the panel is value.json's own balanced bootstrap, draw for draw
    one = np.array(["a"] * 9, dtype=object)
    same = bootstrap_stratum_means(values, comps, one, resamples=50, seed=7)["a"]
    np.testing.assert_allclose(same, bootstrap_means(values, comps, one, resamples=50, seed=7))


def test_strata_panels_hand_means_and_single_component_stratum():
    names = ["U/0/r", "brier/f", "brier/p"]
    values = np.array([[1.0, 0.2, 0.1], [0.0, 0.4, 0.1], [0.5, 0.3, 0.3], [0.7, 0.1, 0.2]])
    comps = np.array(["c0", "c1", "c2", "c2"], dtype=object)
    strata = np.array(["a", "a", "b", "b"], dtype=object)
    out = strata_panels(
        names,
        values,
        comps,
        strata,
        panels={"utility:0": {"r": "U/0/r"}, "diff": {"f - p": ("brier/f", "brier/p")}},
        resamples=100,
        seed=0,
        level=0.95,
        num=num,
    )
    assert out["panels"]["utility:0"]["r"]["a"]["value"] == pytest.approx(0.5)
    assert out["panels"]["utility:0"]["r"]["b"]["value"] == pytest.approx(0.6)
    assert out["panels"]["diff"]["f - p"]["a"]["value"] == pytest.approx(0.2)  # (0.1 + 0.3)/2
    assert out["panels"]["diff"]["f - p"]["b"]["value"] == pytest.approx(-0.05)  # (0 − 0.1)/2
    assert out["panels"]["utility:0"]["r"]["a"]["interval"] is not None
    assert out["panels"]["utility:0"]["r"]["b"]["interval"] is None and "b" in out["no_interval"]
    assert out["strata"] == {"a": {"states": 2, "components": 2}, "b": {"states": 2, "components": 1}}


# --- failure rates (Appendices A, C–E) ---------------------------------------------------------


def test_failure_rates_hand_table():
    st = make_states(
        [[1, 0, 1, 0], [1, 1, 1, 1], [0, 1, 0, 1]],
        [[1, 1], [0, 1], [1, 1]],
        strata=["a", "a", "b"],
        think_status=[["ok", "malformed", "ok", "length"], ["ok"] * 4, ["length", "ok", "ok", "ok"]],
    )
    out = failure_rates(st, incomplete=5, resamples=0, seed=0, level=0.95, num=num)
    rows = out["by_role"]["T"]["rows"]
    assert out["incomplete_records"] == 5 and out["by_role"]["T"]["actions"] == ["THINK"]
    assert rows["all"]["executions"] == 12 and rows["all"]["ok"] == 9
    assert rows["all"]["malformed"] == 1 and rows["all"]["length"] == 2
    # per-state failed shares ½, 0 (stratum a: ¼) and ¼ (stratum b): balanced (¼ + ¼)/2 = ¼
    assert rows["all"]["failed_rate"]["value"] == pytest.approx(0.25)
    # malformed ¼, 0 | 0 -> (⅛ + 0)/2; length ¼, 0 | ¼ -> (⅛ + ¼)/2
    assert rows["all"]["malformed_rate"]["value"] == pytest.approx(1 / 16)
    assert rows["all"]["length_rate"]["value"] == pytest.approx(3 / 16)
    assert rows["stratum:a"]["failed_rate"]["value"] == pytest.approx(0.25)
    assert rows["all"]["failed_reward"] == 0.0  # the failed repeats' rewards: 0, 0, 0
    assert out["by_role"]["S"]["rows"]["all"]["failed_rate"]["value"] == 0.0


# --- value.json and the report ---------------------------------------------------------------


def test_sections_in_value_json_and_the_report(tmp_path):
    from branchpoint.evaluation.report import write_report

    run = make_run(tmp_path, n_questions=16)
    report = value_study(run, config=ValueConfig(judge="given", resamples=400))
    for key in ("router_differences", "simultaneous", "strata_panels", "gain_spread", "power", "failure_rates"):
        assert report[key], key
    # the paired difference is the difference of the two utilities value.json reports
    by_price = report["utility"]["by_price"]["0.005"]
    diff = report["router_differences"]["by_price"]["0.005"]["sample_informed - always_search"]
    assert diff["difference"] == pytest.approx(
        by_price["sample_informed"]["utility"] - by_price["always_search"]["utility"]
    )
    # simultaneous intervals are at least as wide as the marginal critical value makes them
    fam = report["simultaneous"]["families"]["utility - always_search"]
    assert fam["critical"] >= report["simultaneous"]["marginal_critical"]
    # the SD of gains is √V_Δ of value.json
    assert report["gain_spread"]["gain_sd"]["value"] == pytest.approx(math.sqrt(report["gain_variance"]))
    # the file reads back through the model and writes back unchanged
    text = (run / "value.json").read_text()
    assert value_file_text(read_value(run)) == text
    assert json.loads(text)["strata_panels"]["strata"].keys() == {"hop2", "hop3"}
    path, figures = write_report(run)
    md = path.read_text()
    for title in (
        "### Paired router differences",
        "### Simultaneous intervals",
        "### Per-stratum panels",
        "### Spread of gains",
        "### Power of the paired comparisons",
        "### Failure rates",
    ):
        assert title in md
    assert figures["strata_panels"] is not None and figures["strata_panels"].is_file()
    assert figures["gain_sd"] is not None and figures["gain_sd"].with_suffix(".csv").is_file()
    assert "figures/strata_panels.png" in md
