"""Three-pair composition in seed 002's disjoint development / test design (Appendix D,
"Component composition"): the histories ran other questions, so each component's moments come
from its states of the target state's stratum and boundary kind (then its kind, then its mean)."""

from __future__ import annotations

import pytest

from branchpoint.evaluation.value import ValueConfig, value_study
from branchpoint.evaluation.value.analyses import three_pair_forecast
from branchpoint.evaluation.value.study import load_states
from branchpoint.traces import write_records
from tests.evaluation.value.helpers import fork_record


def _study(path, outcomes):
    """A fork study: per question id (stratum, {action: labels}) at the initial state."""
    recs = []
    for qid, (stratum, per_action) in outcomes.items():
        for action, ys in per_action.items():
            for rep, y in enumerate(ys):
                recs.append(
                    fork_record(
                        f"{path.name}-{qid}",
                        "c",
                        action,
                        rep,
                        question_id=qid,
                        stratum=stratum,
                        support_group=qid,
                        answer=f"a{rep}{y}",
                        label="CORRECT" if y else "INCORRECT",
                    )
                )
    write_records(path / "forks.jsonl", recs)
    return path


def _histories(tmp_path):
    # (p_T, Δ) per stratum — A/X s1 (.5, .5) s2 (0, .5); A/Y s1 (.5, −.5) s2 (0, 1); B/X s1 (1, −.5) s2 (.5, .5)
    ax = _study(
        tmp_path / "ax",
        {"h0": ("s1", {"THINK": [1, 0], "SEARCH": [1, 1]}), "h1": ("s2", {"THINK": [0, 0], "SEARCH": [0, 1]})},
    )
    ay = _study(
        tmp_path / "ay",
        {"h2": ("s1", {"THINK": [1, 0], "SEARCH": [0, 0]}), "h3": ("s2", {"THINK": [0, 0], "SEARCH": [1, 1]})},
    )
    bx = _study(
        tmp_path / "bx",
        {"h4": ("s1", {"THINK": [1, 1], "SEARCH": [1, 0]}), "h5": ("s2", {"THINK": [0, 1], "SEARCH": [1, 1]})},
    )
    return ax, ay, bx


def test_disjoint_design_composes_stratum_moments_by_hand(tmp_path):
    ax, ay, bx = _histories(tmp_path)
    target = _study(
        tmp_path / "by",
        {
            "t0": ("s1", {"THINK": [1, 1], "SEARCH": [0, 0]}),
            "t1": ("s2", {"THINK": [0, 1], "SEARCH": [1, 1]}),
            "t2": ("s3", {"THINK": [1, 0], "SEARCH": [1, 0]}),
        },
    )
    config = ValueConfig(judge="given", resamples=0, dev_split=0.0)
    states = load_states(target, config)[0]
    hist = [load_states(h, config)[0] for h in (ax, ay, bx)]
    order = [states.question_id.index(q) for q in ("t0", "t1", "t2")]
    fc, info = three_pair_forecast(states, hist)  # auto: no question shared → disjoint
    # t0 (s1): q_T = 1, Δ = −.5 + (−.5) − .5 → q_S = clip(−.5) = 0
    # t1 (s2): q_T = .5, Δ = .5 + 1 − .5 → q_S = clip(1.5) = 1
    # t2 (s3, in no history): the kind's moments = each history's means: q_T = .75, Δ = 0 + .25 − .5 → .5
    assert fc.q_think[order] == pytest.approx([1.0, 0.5, 0.75])
    assert fc.q_search[order] == pytest.approx([0.0, 1.0, 0.5])
    assert info["design"] == "disjoint" and info["fallbacks"] == {"stratum_and_kind": 6, "kind": 3, "history_mean": 0}
    assert (info["matched_questions"], info["unmatched_states"]) == (0, 3)
    # the old design on disjoint histories: every state falls back to the histories' means
    same, info_same = three_pair_forecast(states, hist, "same_questions")
    assert same.q_think == pytest.approx([0.75] * 3) and same.q_search == pytest.approx([0.5] * 3)
    assert info_same["unmatched_states"] == 3
    report = value_study(target, config=config, three_pair=[ax, ay, bx], write=False)
    block = report["three_pair_composition"]
    assert block["design"] == "disjoint" and block["fallbacks"]["kind"] == 3
    # Brier = ½ Σ_a mean_j (q_a − Y_a,j)²: t0 0; t1 ½(.25 + 0); t2 ½(.3125 + .25) (one state per stratum)
    assert report["brier"]["three_pair"]["brier"] == pytest.approx((0 + 0.125 + 0.28125) / 3)


def test_three_pair_design_is_a_setting():
    assert ValueConfig(three_pair_design="disjoint").three_pair_design == "disjoint"
    with pytest.raises(ValueError):
        ValueConfig(three_pair_design="sideways")
