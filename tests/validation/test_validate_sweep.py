"""validate's sweep run (epochs × the effort × cap grid) and its comparisons: every estimate of
metrics.json's `epochs`, `effort_cap_frontier` and `budgets` is joined to its truth, and a planted
bug moves the estimate away from a truth that stays put."""

from __future__ import annotations

from pathlib import Path

import pytest

from branchpoint.sim.study_truth import StudyTruth
from branchpoint.validation.mutants import mutant_named
from branchpoint.validation.study_setup import StudySettings, stratified_questions
from branchpoint.validation.sweep import CAPS, efforts, run_sweep, sweep_metrics, sweep_truth
from branchpoint.validation.sweep_compare import sweep_rows

NO_STATES = StudyTruth(states=[], natural={}, questions={}, minimal=[])


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory):
    from branchpoint.models.spec import SimServerSpec
    from branchpoint.sim import SimServer
    from branchpoint.sim.profile import load_profile

    root = tmp_path_factory.mktemp("sweep")
    questions = stratified_questions(root / "questions.jsonl")
    settings = StudySettings(
        profile="instruct", policy="constrained", questions=str(questions), answerable=8, unanswerable=8, resamples=400
    )
    prof = load_profile("instruct")
    sim = SimServerSpec(profile="instruct", questions=str(questions), latency_scale=0.0)
    with SimServer(sim, served_name=prof.served_name) as server:
        spec = run_sweep(settings, 20, root / "run", base_url=server.base_url, served_name=prof.served_name)
    return settings, sweep_truth(settings, spec, root / "run")


def test_every_estimate_of_the_sweep_is_joined_to_its_truth(swept) -> None:
    settings, truth = swept
    assert efforts(settings) == ("low",)  # completions: the simulator ignores the effort
    assert len(truth.conditions) == len(CAPS)
    rows, na, missing = sweep_rows(truth, sweep_metrics(settings, 20, truth), NO_STATES, {})
    assert not missing, missing
    assert all("no state has both actions" in why for why in na.values()) and len(na) == 3  # decision quality
    for effort in efforts(settings):
        for cap in CAPS:
            tag = f"[{effort}, cap {cap}]"
            for name in ("pass@2", "pass^3", "flip rate", "frontier accuracy", "frontier TPC", "budget reached share"):
                assert f"{name} {tag}" in rows, f"{name} {tag}"
        assert f"cap step added cost [{effort}, cap 1→3]" in rows
    # one study (seed 20): its rows share draws (accuracy, TPC, cost and budget rows of one condition the same executions), so this is no
    # coverage test (validate's are over studies), only that no estimate is far from its truth
    for name, r in rows.items():
        half = (r["ci"][1] - r["ci"][0]) / 2
        assert r["covered"] is not None and abs(r["estimate"] - r["truth"]) <= 2 * half + 1e-9, (name, r)
    assert sum(r["covered"] for r in rows.values()) >= 0.75 * len(rows)
    # the truth of what a cap allows: every execution at cap 1 that searched reached it
    reach = rows["budget reached share [low, cap 1]"]
    use = rows["budget use share [low, cap 1]"]
    assert reach["truth"] == pytest.approx(use["truth"]) and 0 < reach["truth"] < 1


@pytest.mark.parametrize(
    ("mutant", "quantity", "shift"),
    [
        # the plug-in is low by E[(1 − c/n)^3] − (1 − p)^3 > 0 on every question whose epochs disagree
        ("pass@k plug-in", "pass@3 [low, cap 3]", -0.02),
        ("search cap counted one higher", "budget use share [low, cap 1]", -0.3),
        ("frontier steps taken backwards", "cap step added cost [low, cap 1→3]", -100.0),
    ],
)
def test_a_planted_bug_moves_the_estimate_not_the_truth(swept, mutant: str, quantity: str, shift: float) -> None:
    settings, truth = swept
    clean = sweep_rows(truth, sweep_metrics(settings, 20, truth), NO_STATES, {})[0][quantity]
    with mutant_named(mutant).planted():
        planted = sweep_rows(truth, sweep_metrics(settings, 20, truth), NO_STATES, {})[0][quantity]
    assert planted["truth"] == clean["truth"]
    assert (planted["estimate"] - clean["estimate"]) / shift > 1.0, (clean, planted)


def test_the_epoch_reader_off_by_one_loses_the_last_k(swept) -> None:
    settings, truth = swept
    with mutant_named("epoch 0 dropped").planted():
        rows, _, missing = sweep_rows(truth, sweep_metrics(settings, 20, truth), NO_STATES, {})
    assert "pass@3 [low, cap 1]" in missing and "flip rate [low, cap 1]" in rows


def test_the_sweep_run_lives_beside_the_study(tmp_path: Path) -> None:
    from branchpoint.validation.sweep import sweep_dir

    assert sweep_dir(tmp_path / "study-3") == tmp_path / "study-3-sweep"
