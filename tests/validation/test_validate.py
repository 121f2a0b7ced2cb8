"""`branchpoint validate --quick`: whole studies on the simulator, every estimate against the truth.

Each case runs the CLI as a user would (about a minute on a 2-core machine), for every built-in
policy and two `module:function` ones (one overrides the model). Before fork branches kept the checkpoint's transcript (issue
12) the chat policies failed here: their branches were shown a state without its evidence, which
the branch-outcome checks caught.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_validate(tmp_path: Path, policy: str, *extra: str, timeout: int = 600) -> tuple[int, dict, str]:
    out = tmp_path / "val"
    proc = subprocess.run(
        [sys.executable, "-m", "branchpoint.cli", "validate", "--quick", "--policy", policy, "--out", str(out), *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    report = json.loads((out / "validation.json").read_text()) if (out / "validation.json").is_file() else {}
    return proc.returncode, report, proc.stdout + proc.stderr


def check_report(report: dict, policy: str) -> None:
    assert 0.0 <= report["coverage"] <= 1.0
    provenance = report["provenance"]  # where validation.json came from
    assert provenance["command"] == "branchpoint validate" and provenance["argv"][1] == "validate"
    assert [s["kind"] for s in provenance["model_servers"]] == ["branchpoint-sim"]
    study = report["per_study"][0]
    for row in study["quantities"].values():
        assert set(row) >= {"estimate", "truth", "ci", "covered"}
    names = ["answer accuracy", "branch success: THINK", "goodness of fit: THINK"]
    na = report["not_applicable"]  # every quantity left out says why
    assert all(entry["reason"] for entry in na.values())
    if policy == "no_search":  # no search offered: THINK branches only, no search-value estimates
        assert "no state has both actions" in na["theta (mean Δ²)"]["reason"]
        assert "branch success: SEARCH" not in report["quantities"]
    else:
        names += ["U(0) always THINK", "theta (mean Δ²)", "R²_Δ truth forecaster", "branch success: SEARCH"]
        names += ["Brier canary", "mean Δ"]
        assert any(c["quantity"] == "states" and c["passed"] for c in report["checks"])
    if report["policy_style"] == "completion":  # token costs are exact on the completion endpoint
        names += [
            "TPC",
            "U(0.02) always SEARCH",
            "U(0.005) consistency (two-probe)",
            "level split: variation",
            "factorial(0) query_gain_query_cost − best constant",
        ]
    elif policy != "no_search":
        assert "not modelled" in na["U(0.02) always SEARCH"]["reason"]
    # the sweep run (epochs × effort × cap) of every study, and decision quality at initial
    names += ["pass@2 [low, cap 1]", "pass^3 [low, cap 3]", "flip rate [low, cap 3]", "frontier accuracy [low, cap 1]"]
    names += ["cap step accuracy change [low, cap 1→3]"]
    if report["policy_style"] == "completion":  # one effort: the simulator ignores it on completions
        names += ["frontier TPC [low, cap 3]", "cap step added cost [low, cap 1→3]"]
        assert not any("[high," in name for name in report["quantities"])
    else:
        names += ["pass^3 [high, cap 3]", "effort step accuracy change [cap 3, low→high]"]
        assert "not modelled" in na["frontier TPC [low, cap 3]"]["reason"]
    if report["policy_style"] != "no_search" and report["policy"] in ("constrained", "native", "tagged"):
        top = "low" if report["policy_style"] == "completion" else "high"  # one effort on completions
        names += ["decision at initial: F1", "budget reached share [low, cap 1]", f"budget use share [{top}, cap 3]"]
    for name in names:
        assert name in report["quantities"], name
    if policy != "no_search":  # the minimal-search study runs: compared, or skipped where no correct execution searched
        assert "over-search %" in report["quantities"] or "over-search %" in na
    assert (Path(study["run_dir"]).parent.parent / "delta_states.png").is_file()
    if policy != "no_search":  # the errors of Δ̄ against the exact Binomial model (a diagnostic, no check)
        d = report["dispersion"]
        assert d["states"] == sum(s["states"] for s in report["per_study"])
        assert 0.0 <= d["study_rms_z"]["p"] <= 1.0 and d["state_ratio"]["model_mean"] > 0.5


@pytest.mark.parametrize(
    "policy",
    [
        "no_search",  # constrained: test_validate_mutants, whose run is the quick validation and more
        # a user's policies: one follows the model, one overrides it (its truth runs its own code)
        "tests.experiments.user_policy:careful",
        "tests.experiments.user_policy:one_search",
        "native",
        "tagged",
    ],
)
def test_quick_validation_passes(tmp_path: Path, policy: str) -> None:
    # one quick study per policy (the chat policies two): every check's code runs on the policy's
    # own states; the many-study evidence per policy is benchmarks/validation.py's (BENCHMARKS.md)
    studies = "2" if policy in ("native", "tagged") else "1"
    code, report, output = run_validate(tmp_path, policy, "--studies", studies)
    assert report, output[-2000:]
    check_report(report, policy)
    failed = [c for c in report["checks"] if not c["passed"]]
    assert code == 0 and not failed, failed


def test_validate_refuses_an_unknown_policy(tmp_path: Path) -> None:
    code, report, output = run_validate(tmp_path, "no-such-policy")
    assert code == 2 and "unknown policy" in output and not report
