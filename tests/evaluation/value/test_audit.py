"""Shared-label audit bounds and three-pair composition, against numbers computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value.audit import (
    brier_contrast,
    gain_contrast,
    label_intervals,
    shared_label_bounds,
    three_pair_composition,
)
from branchpoint.evaluation.value.scores import brier
from tests.evaluation.value.helpers import make_states


def _one_state(search_answers):
    states = make_states(think=[[1, 0]], search=[[1, 1]], think_answers=[["A", "B"]])
    states.search.answers[0] = list(search_answers)
    return states


def test_one_shared_variable_for_every_occurrence_of_an_answer():
    # f = 0.5, b = 0: D = 0.25 − (Ȳ_S − Ȳ_T); per-repeat coefficients +0.5 (THINK), −0.5 (SEARCH)
    contrast = gain_contrast(np.array([0.5]), np.array([0.0]))
    low = ([np.array([0.0, 0.0])], [np.array([0.0, 1.0])])  # A uncertain, B fixed 0 | A uncertain, C fixed 1
    high = ([np.array([1.0, 0.0])], [np.array([1.0, 1.0])])
    shared = shared_label_bounds(_one_state(["A", "C"]), contrast, low, high)
    # original: 0.25 − (1 − 0.5) = −0.25; "A" occurs in both actions: coefficient 0.5 − 0.5 = 0, no range
    assert (shared.original[0], shared.lower[0], shared.upper[0]) == pytest.approx((-0.25, -0.25, -0.25))
    assert shared.uncertain_pairs == 1
    # SEARCH's uncertain answer is "D" instead: two variables, A (+0.5) and D (−0.5)
    apart = shared_label_bounds(_one_state(["D", "C"]), contrast, low, high)
    # lower: 0.25 + (C: −0.5) + min(0, 0.5) + min(0, −0.5) = −0.75; upper: 0.25 − 0.5 + 0.5 + 0 = 0.25
    assert (apart.lower[0], apart.upper[0]) == pytest.approx((-0.75, 0.25)) and apart.uncertain_pairs == 2
    # inclusion probability 0.5: corrections doubled: A (0 − 0.5)/0.5 = −1, D (−0.5 − (−0.5))/0.5 = 0
    sampled = shared_label_bounds(_one_state(["D", "C"]), contrast, low, high, inclusion=np.array([0.5]))
    assert sampled.lower[0] == pytest.approx(0.25 - 0.5 + (0.5 - 1.0) + (-0.5))
    # audit-sampling variance of the lower bound's corrections: (−0.5)²·(1 − 0.5)/0.5² + 0 = 0.5
    assert sampled.sampling_variance[0] == pytest.approx(0.5) and apart.sampling_variance == (0.0, 0.0)


def test_brier_contrast_is_linear_in_the_rewards():
    states = make_states(think=[[1, 0, 1]], search=[[0, 1]])
    qa, qb = (np.array([0.3]), np.array([0.8])), (np.array([0.6]), np.array([0.4]))
    c = brier_contrast(qa[0], qa[1], qb[0], qb[1])
    direct = brier(*qa, states.think, states.search) - brier(*qb, states.think, states.search)
    assert c.const + c.alpha_think * states.think.mean_y + c.alpha_search * states.search.mean_y == pytest.approx(
        direct
    )


def test_label_intervals_from_two_panels():
    a = ([np.array([1.0, 0.0])], [np.array([1.0])])
    b = ([np.array([1.0, 1.0])], [np.array([0.0])])
    low, high = label_intervals(a, b)
    assert low[0][0].tolist() == [1.0, 0.0] and high[0][0].tolist() == [1.0, 1.0]
    assert low[1][0].tolist() == [0.0] and high[1][0].tolist() == [1.0]


def test_three_pair_composition_by_hand():
    q_t, q_s = three_pair_composition(
        np.array([0.6, 0.9]), np.array([0.1, 0.05]), np.array([0.3, 0.2]), np.array([0.2, -0.1])
    )
    # Δ_BY = 0.1 + 0.3 − 0.2 = 0.2 → q_S = 0.8; second: 0.05 + 0.2 + 0.1 = 0.35 → 1.25 clipped to 1
    assert q_t.tolist() == [0.6, 0.9] and q_s == pytest.approx([0.8, 1.0])


def _study(path, outcomes):
    """A fork study at `path`: per question id, THINK and SEARCH labels at the initial state."""
    from branchpoint.traces import write_records
    from tests.evaluation.value.helpers import fork_record

    recs = []
    for qid, per_action in outcomes.items():
        for action, ys in per_action.items():
            for rep, y in enumerate(ys):
                recs.append(
                    fork_record(
                        f"{path.name}-{qid}",
                        "c",
                        action,
                        rep,
                        question_id=qid,
                        stratum="s",
                        support_group=qid,
                        answer=f"a{rep}{y}",
                        label="CORRECT" if y else "INCORRECT",
                    )
                )
    write_records(path / "forks.jsonl", recs)
    return path


def test_three_pair_composition_in_value_json_by_hand(tmp_path):
    from branchpoint.evaluation.value import ValueConfig, value_study
    from branchpoint.evaluation.value.markdown import value_markdown

    # histories: (p_T, Δ) per question — A/X q0 (.5, .5) q1 (0, .5); A/Y q0 Δ −.5, q1 Δ 1; B/X q0 (1, −.5), q1 (.5, .5)
    ax = _study(tmp_path / "ax", {"q0": {"THINK": [1, 0], "SEARCH": [1, 1]}, "q1": {"THINK": [0, 0], "SEARCH": [0, 1]}})
    ay = _study(tmp_path / "ay", {"q0": {"THINK": [1, 0], "SEARCH": [0, 0]}, "q1": {"THINK": [0, 0], "SEARCH": [1, 1]}})
    bx = _study(tmp_path / "bx", {"q0": {"THINK": [1, 1], "SEARCH": [1, 0]}, "q1": {"THINK": [0, 1], "SEARCH": [1, 1]}})
    target = _study(
        tmp_path / "by",
        {
            "q0": {"THINK": [1, 1], "SEARCH": [0, 0]},
            "q1": {"THINK": [0, 1], "SEARCH": [1, 1]},
            "q2": {"THINK": [1, 0], "SEARCH": [1, 0]},
        },
    )
    report = value_study(
        target, config=ValueConfig(judge="given", resamples=0, dev_split=0.0), three_pair=[ax, ay, bx], write=False
    )
    # composed: q0 q_T = 1, Δ = −.5 − .5 − .5 → q_S = clip(−.5) = 0;  q1 q_T = .5, Δ = .5 + 1 − .5 → q_S = 1;
    # q2 (in no history) from the histories' means: q_T = .75, Δ = 0 + .25 − .5 → q_S = .5
    # Brier = ½[mean (q_T − Y_T)² + mean (q_S − Y_S)²]: q0 0, q1 ½(.25 + 0), q2 ½(.3125 + .25)
    block = report["three_pair_composition"]
    assert (block["matched_questions"], block["unmatched_states"]) == (2, 1)
    assert block["scores"]["brier"]["value"] == pytest.approx((0 + 0.125 + 0.28125) / 3)
    # L = f² − 2fΔ̄ + θ̂: q0 f=−1, Δ̄=−1, θ̂=1 → 0; q1 f=.5, Δ̄=.5, θ̂=0 → −.25; q2 f=−.25, Δ̄=0, θ̂=−.5 → −.4375
    assert block["scores"]["gain_risk"]["value"] == pytest.approx((0 - 0.25 - 0.4375) / 3)
    assert report["forecasters"]["three_pair"]["kind"] == "composition"
    assert block["comparator"] is None  # historical_mean is fitted on dev rows; there are none here
    assert block["histories"] == {"A/X": str(ax), "A/Y": str(ay), "B/X": str(bx)}
    assert "### Three-pair composition" in value_markdown(report)
    # with dev rows, against historical_mean, paired (the difference of the two Brier scores), with intervals
    extra = {f"q{i}": {"THINK": [i % 2, 1], "SEARCH": [1, (i // 2) % 2]} for i in range(3, 12)}
    target = _study(tmp_path / "by2", {"q0": {"THINK": [1, 1], "SEARCH": [0, 0]}, **extra})
    report = value_study(
        target, config=ValueConfig(judge="given", resamples=200, dev_split=0.3), three_pair=[ax, ay, bx], write=False
    )
    block = report["three_pair_composition"]
    assert block["comparator"] == "historical_mean"
    diff = block["scores"]["brier_minus_comparator"]
    assert diff["value"] == pytest.approx(
        report["brier"]["three_pair"]["brier"] - report["brier"]["historical_mean"]["brier"]
    )
    assert diff["interval"][0] <= diff["value"] <= diff["interval"][1]
    # V_Δ ≤ 0 in most resamples of these 10 test states: R²_Δ's interval is withheld, and value.json says why
    undefined = report["intervals"]["gain_r2_undefined"]
    assert undefined["share"] > undefined["max_share"] and "V_Δ ≤ 0 in" in undefined["withheld"]
    assert block["scores"]["gain_r2"]["interval"] is None and block["scores"]["gain_risk"]["interval"] is not None


def test_value_cli_three_pair(tmp_path):
    import json

    from typer.testing import CliRunner

    from branchpoint.cli import app

    runs = [
        _study(tmp_path / name, {"q0": {"THINK": [1, 0], "SEARCH": [1, 1]}, "q1": {"THINK": [0, 0], "SEARCH": [0, 1]}})
        for name in ("ax", "ay", "bx", "by")
    ]
    result = CliRunner().invoke(
        app,
        [
            "value",
            str(runs[3]),
            "--judge",
            "given",
            "--resamples",
            "0",
            "--dev-split",
            "0",
            "--three-pair",
            ",".join(str(r) for r in runs[:3]),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    block = json.loads((runs[3] / "value.json").read_text())["three_pair_composition"]
    # every history equals the target: q_T = p_BX,T, Δ = Δ_BX + Δ_AY − Δ_AX = Δ_BX → q0 (.5, 1), q1 (0, .5)
    # Brier: q0 ½[.25 + 0] = .125, q1 ½[0 + .25] = .125
    assert block["scores"]["brier"]["value"] == pytest.approx(0.125)
    result = CliRunner().invoke(app, ["value", str(runs[3]), "--three-pair", str(runs[0])])
    assert result.exit_code == 2 and "--three-pair: expected three fork studies" in result.output
