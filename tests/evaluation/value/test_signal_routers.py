"""Seed 002's missing router analyses on hand-built tables: vague probes never agree, the
two-probe router's token accounting, confidence / entropy / novelty routers with dev-chosen
thresholds, and the share of Brier improvement recovered by task priors."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value import derived, routers, signal_routers
from branchpoint.evaluation.value.forecasters import Forecast
from tests.evaluation.value.helpers import make_states


def test_vague_probes_never_agree_but_sodium_does():
    for vague in ("Not sure", "not sure.", "idk", "IDK", "N/A", "n/a", "I'm not sure", "no idea"):
        assert not routers.probes_agree((vague, vague), ("ok", "ok")), vague
    assert routers.probes_agree(("Na", "na."), ("ok", "ok"))  # sodium's symbol is an answer
    assert routers.probes_agree(("Paris", "paris"), ("ok", "ok"))


def test_vague_probes_send_the_router_to_search():
    states = make_states(
        think=[[1, 1, 1, 1]],
        search=[[0, 0, 0, 0]],
        think_answers=[["Not sure", "Not sure", "idk", "idk"]],
    )
    r = routers.consistency(states, 0.0)
    # no pair agrees → SEARCH at every split, reward Ȳ_S = 0 (the old rule agreed on 2 of 6 pairs)
    assert r.search == pytest.approx([1.0]) and r.utility == pytest.approx([0.0])


def test_consistency_token_accounting_by_hand():
    states = make_states(
        think=[[1, 1, 0, 0], [1, 0, 1, 0]],
        search=[[1, 1, 0, 1], [1, 1, 1, 1]],
        think_tokens=[[100, 120, 140, 160], [200] * 4],
        search_tokens=[[1000] * 4, [2000] * 4],
        think_answers=[["Paris", "paris.", "Rome", "x"], ["Rome", "Rome", "Rome", "N/A"]],
    )
    acc = routers.consistency_accounting(states)
    # state 0: pair (0,1) agrees → THINK on draws 2,3 (reward 0, 150 tokens); five pairs → SEARCH
    #   saved (1000 − 150)/6; probes (220 + 240 + 260 + 260 + 280 + 300)/6 = 260; success (0.75 − 0)/6
    # state 1: pairs (0,1) (0,2) (1,2) agree; rest {2,3} {1,3} {0,3} → rewards 0.5, 0, 0.5, tokens 200
    #   saved 3·(2000 − 200)/6 = 900; probes 400; success (1 − 0.5 + 1 − 0 + 1 − 0.5)/6 = 2/6
    assert acc["agreement_rate"] == pytest.approx([1 / 6, 3 / 6])
    assert acc["tokens_saved"] == pytest.approx([850 / 6, 900.0])
    assert acc["probe_tokens"] == pytest.approx([260.0, 400.0])
    assert acc["net_tokens_saved"] == pytest.approx([850 / 6 - 260, 500.0])
    assert acc["success_cost"] == pytest.approx([0.125, 1 / 3])
    # the accounting is the router's: its tokens = T̄_S − saved + probes, its reward = Ȳ_S − cost
    r = routers.consistency(states, 0.0)
    assert r.tokens == pytest.approx(states.search.mean_tokens - acc["net_tokens_saved"])
    assert r.utility == pytest.approx(states.search.mean_y - acc["success_cost"])


def test_binary_entropy_and_doubt():
    h = signal_routers.binary_entropy(np.array([0.0, 0.5, 0.25, 1.0]))
    assert h == pytest.approx([0.0, 1.0, -(0.25 * np.log2(0.25) + 0.75 * np.log2(0.75)), 0.0])
    assert signal_routers.doubt(np.array([0.2, 0.9])) == pytest.approx([0.8, 0.1])


def test_threshold_grid_and_dev_choice_by_hand():
    # two states: high signal where SEARCH wins, low where THINK wins
    states = make_states(think=[[0, 0], [1, 1]], search=[[1, 1], [0, 0]])
    signal = np.array([0.9, 0.1])
    grid = signal_routers.threshold_grid(signal)
    deciles = 0.1 + 0.08 * np.arange(11)
    assert grid[0] == -np.inf and grid[-1] == np.inf
    assert grid[1:-1] == pytest.approx((deciles[:-1] + deciles[1:]) / 2)
    tau, size = signal_routers.choose_tau(signal, states, np.array([True, True]), 0.0)
    # every τ in [0.1, 0.9) is the oracle (utility 1); ties go to the largest such midpoint
    assert tau == pytest.approx((0.82 + 0.9) / 2) and size == 12


def test_signal_routes_choose_on_dev_and_score_on_test():
    # rows 0-1 dev, rows 2-3 test; the raw forecast's doubt (1 − q_T) separates the dev rows
    states = make_states(
        think=[[0, 0], [1, 1], [0, 1], [1, 1]],
        search=[[1, 1], [0, 0], [1, 1], [0, 1]],
    )
    fc = {
        "raw": Forecast(np.array([0.1, 0.9, 0.2, 0.7]), np.full(4, 0.5)),
        "flat": Forecast(np.array([0.5, 0.5, 0.2, 0.7]), np.full(4, 0.5)),
    }
    dev = np.array([True, True, False, False])
    out = signal_routers.signal_routes(states, ~dev, dev, fc, ["raw", "flat"], 0.0, "dev")
    conf = out["confidence:raw"]
    # dev doubts 0.9, 0.1 → τ = 0.86: test doubts 0.8, 0.3 both ≤ τ → THINK at both
    assert conf.info["tau"] == pytest.approx(0.86) and conf.info["in_sample"] is False
    assert conf.search == pytest.approx([0.0, 0.0]) and conf.utility == pytest.approx([0.5, 1.0])
    ent = out["entropy:flat"]  # dev entropies equal (H(0.5) = 1): every τ ties → +∞, never SEARCH
    assert ent.info["tau"] == "inf" and ent.search == pytest.approx([0.0, 0.0])
    assert "novelty:query" not in out  # no public-prefix features on this table


def test_novelty_routers_read_the_public_prefix_features():
    states = make_states(think=[[0, 0], [1, 1]], search=[[1, 1], [0, 0]])
    prefix = np.zeros((2, 5))
    prefix[:, 3] = [0.75, 0.0]  # query novelty
    states.features["public_prefix"] = prefix
    out = signal_routers.signal_routes(states, np.ones(2, bool), np.ones(2, bool), {}, [], 0.0, "scored")
    assert out["novelty:query"].search == pytest.approx([1.0, 0.0])
    assert out["novelty:query"].info["in_sample"] is True
    # document novelty is 0 everywhere: a constant signal, τ = +∞ wins the tie (never SEARCH)
    assert out["novelty:document"].search == pytest.approx([0.0, 0.0])


def test_task_prior_share_reproduces_the_seed_figures():
    # seed 002 §5.1: global means 0.2145, stratum means 0.1836, map 0.1797 → 88.9% (88.79% from the
    # rounded figures); the level term carries 0.034763 of the map's 0.034800 → 99.9%
    point = {
        "brier/historical_mean": 0.2145,
        "brier/stratum_prior": 0.1836,
        "brier/map": 0.1797,
        "level/historical_mean": 0.05,
        "level/stratum_prior": 0.03,
        "level/map": 0.05 - 0.034763,
    }
    out = derived.task_prior_share(["historical_mean", "stratum_prior", "map"], point, {}, 0.95)
    entry = out["forecasters"]["map"]
    assert entry["share"]["value"] == pytest.approx(0.0309 / 0.0348)
    assert round(entry["share"]["value"], 3) == 0.888
    assert entry["level_share"]["value"] == pytest.approx(0.034763 / 0.0348)
    assert "map" in out["forecasters"] and "stratum_prior" not in out["forecasters"]
    worse = dict(point, **{"brier/map": 0.25})
    assert (
        derived.task_prior_share(["historical_mean", "stratum_prior", "map"], worse, {}, 0.95)["forecasters"]["map"][
            "share"
        ]["value"]
        is None
    )
    assert "skipped" in derived.task_prior_share(["map"], point, {}, 0.95)


def test_ratio_interval_counts_undefined_resamples_at_both_ends():
    num, den = np.array([1.0, 1.0, 1.0, 1.0]), np.array([2.0, 4.0, -1.0, 1.0])
    iv, share, why = derived.ratio_interval(num, den, 0.95)
    assert iv is None and share == 0.25 and "25.0%" in why
    # level 0.5: α = 0.25 tolerates one undefined resample of four; ratios 0.5, 0.25, (undefined), 1
    iv, share, why = derived.ratio_interval(num, den, 0.5)
    # lower: 25% "lower" order statistic of [−∞, 0.25, 0.5, 1] = −∞; upper: 75% "higher" of [0.25, 0.5, 1, +∞] = +∞
    assert iv == [-np.inf, np.inf] and why is None
    iv, _, _ = derived.ratio_interval(np.ones(5), np.array([1.0, 2.0, 4.0, 5.0, 10.0]), 0.5)
    assert iv == pytest.approx([0.2, 0.5])


def test_value_json_has_the_new_routers_accounting_and_prior_share(tmp_path):
    import json

    from branchpoint.evaluation.value.config import ValueConfig
    from branchpoint.evaluation.value.markdown import value_markdown
    from branchpoint.evaluation.value.outcomes import dev_split
    from branchpoint.evaluation.value.scores import balanced_mean
    from branchpoint.evaluation.value.study import load_states, value_study
    from tests.evaluation.value.test_study import make_run

    run = make_run(tmp_path)
    forecasts = tmp_path / "mine.jsonl"
    forecasts.write_text(
        "".join(
            json.dumps({"parent_execution_id": f"p{q}", "checkpoint_id": c, "q_think": 0.1 + 0.05 * q, "q_search": 0.6})
            + "\n"
            for q in range(12)
            for c in ("c0", "c1")
        )
    )
    config = ValueConfig(judge="given", resamples=200)
    report = value_study(run, config=config, forecast_files=[forecasts])
    by_price = report["utility"]["by_price"]
    for name in ("confidence:file:mine", "entropy:file:mine", "novelty:query", "novelty:document", "evidence_gap"):
        assert name in by_price["0.005"], name
        assert report["intervals"]["utility"]["0.005"][name] is not None
    assert "confidence:file:mine+ridge" not in by_price["0"]  # raw forecasts only

    states, _, _ = load_states(run, config)
    tt = states.subset(~dev_split(states, config.dev_split, config.seed))
    acc = routers.consistency_accounting(tt)
    block = report["consistency_accounting"]
    for key in routers.ACCOUNTING_COLUMNS:
        assert block[key]["value"] == pytest.approx(float(balanced_mean(acc[key], tt.stratum))), key
    lo, hi = block["net_tokens_saved"]["interval"]
    assert lo <= block["net_tokens_saved"]["value"] <= hi
    # every THINK repeat answers a0..a3 (all distinct) in make_run: no pair agrees, nothing is saved
    assert block["agreement_rate"]["value"] == 0.0 and block["tokens_saved"]["value"] == 0.0

    share = report["task_prior_share"]
    g, s = share["brier_global_means"], share["brier_task_prior"]
    assert g == pytest.approx(report["brier"]["historical_mean"]["brier"])
    mine = report["brier"]["file:mine"]["brier"]
    entry = share["forecasters"]["file:mine"]["share"]
    assert entry["value"] == (pytest.approx((g - s) / (g - mine)) if g > mine else None)
    md = value_markdown(report)
    assert "### Two-probe consistency: token accounting" in md and "### Improvement recovered by task priors" in md
    assert "`confidence:file:mine`" in md
