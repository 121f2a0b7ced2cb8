"""`branchpoint validate --quick --mutants`: every planted bug fails a check, the real pipeline
passes them all (two quick studies of the `constrained` policy are this run's baseline).

A mutant replaces one pipeline function wherever it is bound, for the block only; the quick run
plants each of them around real studies. Before the truth was computed apart from the
pipeline, swapped role labels, branches dropped at random or by outcome, and a dropped stratum
passed every check (issue 27).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from branchpoint.validation.mutants import MUTANTS, mutant_named, patched
from tests.validation.test_validate import check_report, run_validate

#: The check each mutant must fail, at least (the run's table lists every one that failed).
EXPECTED = {
    "role labels swapped": "Brier truth: unbiased",
    "THINK/SEARCH outcomes swapped": "Brier truth: unbiased",
    "10% of branches dropped": "states: every state scored with all its branches",
    "10% of failed SEARCH branches dropped": "states: every state scored with all its branches",
    "repeats collapsed to one draw": "theta (mean Δ²): unbiased",
    "test outcomes leaked to forecasters": "Brier canary: unbiased",
    "answer normalisation broken": "goodness of fit: THINK: fits the truth",
    "one stratum dropped": "mean gain (value.json): unbiased",
    "pass@k plug-in": "pass@3 [low, cap 1]: unbiased",
    "epoch 0 dropped": "pass@3 [low, cap 1]: estimate present",
    "decisions read one search late": "decision at initial: over-search rate: unbiased",
    "frontier steps taken backwards": "cap step added cost [low, cap 1→3]: unbiased",
    "search cap counted one higher": "budget use share [low, cap 1]: unbiased",
}


@pytest.mark.timeout(1500)
def test_every_mutant_is_caught_and_the_pipeline_passes(tmp_path: Path) -> None:
    # two quick studies (seeds 1, 2), each also evaluated with the 12 evaluation mutants and run
    # and forked again with the fork mutant: 6 minutes on 2 cores at a load average of 11
    code, report, output = run_validate(tmp_path, "constrained", "--mutants", "--studies", "2", timeout=1400)
    assert report, output[-2000:]
    check_report(report, "constrained")
    failed = [c for c in report["checks"] if not c["passed"]]
    assert not failed, failed
    table = {m["name"]: m for m in report["mutants"]}
    assert set(table) == {m.name for m in MUTANTS} == set(EXPECTED)
    for name, check in EXPECTED.items():
        assert table[name]["caught"] and check in table[name]["caught_by"], (name, table[name]["caught_by"])
    assert code == 0 and "every mutant caught" in output


def test_a_mutant_replaces_every_binding_and_restores_them() -> None:
    import branchpoint.evaluation.gold_matching as gm
    import branchpoint.evaluation.value.routers as routers
    from branchpoint.evaluation.answer_normalization import normalize_answer

    m = mutant_named("answer normalisation broken")
    with m.planted():
        assert gm.normalize_answer is routers.normalize_answer is not normalize_answer
        assert gm.normalize_answer("Apollo 11 in 1969") == "apollo in"
    assert gm.normalize_answer is routers.normalize_answer is normalize_answer
    from branchpoint.experiments.branch_planning import BranchTask

    prop = BranchTask.__dict__["seed_key"]
    with patched("branchpoint.experiments.branch_planning:BranchTask.seed_key", lambda p: property(lambda self: "k")):
        assert BranchTask.__dict__["seed_key"] is not prop
    assert BranchTask.__dict__["seed_key"] is prop


def test_an_unknown_mutant_is_refused_before_any_work(tmp_path: Path) -> None:
    code, report, output = run_validate(tmp_path, "constrained", "--mutant", "no such bug")
    assert code == 2 and "unknown mutant" in output and not report


@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mutant_is_documented(m: object) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "validate.md").read_text(encoding="utf-8")
    assert f"`{m.name}`" in doc  # type: ignore[attr-defined]
