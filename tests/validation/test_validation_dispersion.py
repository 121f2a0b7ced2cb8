"""`validation.dispersion`: errors of Δ̄ against the exact Binomial model of the same states."""

from __future__ import annotations

import numpy as np

from branchpoint.validation.dispersion import dispersion


def _studies(rng: np.random.Generator, *, shared_sd: float = 0.0, n_studies: int = 30) -> list[dict]:
    """Studies of 20 questions x 4 states, outcomes drawn from the true p; `shared_sd` adds one
    offset per study to every state's Δ̄ (errors correlated across questions)."""
    out = []
    for s in range(n_studies):
        offset = rng.normal(0.0, shared_sd) if shared_sd else 0.0
        rows = []
        for q in range(20):
            for _ in range(4):
                pt, ps = rng.uniform(0.1, 0.9, size=2)
                dbar = (rng.binomial(4, ps) - rng.binomial(4, pt)) / 4 + offset
                rows.append(
                    {
                        "question_id": f"q{q}",
                        "answerable": q % 2 == 0,
                        "dbar": float(dbar),
                        "delta": float(ps - pt),
                        "p_think": float(pt),
                        "p_search": float(ps),
                        "m_think": 4,
                        "m_search": 4,
                    }
                )
        out.append({"seed": s, "per_state": rows})
    return out


def test_binomial_errors_are_within_the_model() -> None:
    d = dispersion(_studies(np.random.default_rng(1)), draws=200, seed=2)
    assert d["studies"] == 30 and d["states"] == 30 * 80
    for key in ("state_ratio", "question_ratio", "study_rms_z"):
        assert abs(d[key]["model_mean"] - 1.0) < 0.05
        assert d[key]["p"] > 0.01, (key, d[key])


def test_an_offset_shared_by_a_studys_questions_is_found_at_the_study_level_only() -> None:
    # sd 0.05 per study: RMS z about 1.7 (the sum of 80 errors has SE 2.8, the offset adds sd 4)
    d = dispersion(_studies(np.random.default_rng(3), shared_sd=0.05), draws=200, seed=4)
    assert d["study_rms_z"]["observed"] > 1.3 and d["study_rms_z"]["p"] < 0.01
    assert d["answerable_unanswerable_corr"]["observed"] > 0.3
    # the excess grows with the number of states summed: one state barely shows it
    excess = {k: d[k]["observed"] - 1.0 for k in ("state_ratio", "question_ratio")}
    assert d["study_rms_z"]["observed"] ** 2 - 1.0 > 5 * excess["question_ratio"] > 5 * excess["state_ratio"]


def test_rows_without_repeats_or_category_fall_back_to_the_design() -> None:
    studies = _studies(np.random.default_rng(5), n_studies=3)
    for s in studies:
        for r in s["per_state"]:
            del r["m_think"], r["m_search"], r["answerable"]
            r["question_id"] = "demo-a01" if r["question_id"] < "q5" else "demo-u01"
    d = dispersion(studies, repeats=4, draws=100)
    assert d["states"] == 240 and 0.0 <= d["state_ratio"]["p"] <= 1.0
