"""The truth of repeated executions and budget use (`sim.run_truth`, `TruthModel.search_counts`,
`TruthModel.first_decision`) against what the simulator does: many epochs of a real run on the
simulated server, and the estimators' expectations summed exactly over the Binomial."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from scipy import stats as sps

from branchpoint.evaluation import epochs as pipeline_epochs
from branchpoint.sim import run_truth as RT

EPOCHS = 40
CAP = 2


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("p", [0.0, 0.13, 0.5, 0.91, 1.0])
def test_each_truth_is_the_expectation_of_its_estimator(n: int, p: float) -> None:
    pmf = sps.binom.pmf(range(n + 1), n, p)
    for k in range(1, n + 1):
        at = sum(w * pipeline_epochs.pass_at_k(n, c, k) for c, w in enumerate(pmf))
        hat = sum(w * pipeline_epochs.pass_hat_k(n, c, k) for c, w in enumerate(pmf))
        assert at == pytest.approx(RT.pass_at_k(p, k), abs=1e-12)
        assert hat == pytest.approx(RT.pass_hat_k(p, k), abs=1e-12)
        # the truth's own copies of the estimators are the pipeline's definitions
        for c in range(n + 1):
            assert RT.est_pass_at_k(n, c, k) == pytest.approx(pipeline_epochs.pass_at_k(n, c, k))
            assert RT.est_pass_hat_k(n, c, k) == pytest.approx(pipeline_epochs.pass_hat_k(n, c, k))
    flips = sum(w * RT.est_flip(n, c, 0) for c, w in enumerate(pmf))
    assert flips == pytest.approx(RT.flip(p, n), abs=1e-12)
    # the variance by enumeration against the Bernoulli's closed form at k = n (pass@n = 1{c ≥ 1})
    q = 1.0 - (1.0 - p) ** n
    assert RT.estimator_variance(RT.est_pass_at_k, n, p, n) == pytest.approx(q * (1 - q), abs=1e-12)


def test_the_plug_in_pass_at_k_is_biased() -> None:
    # what the `pass@k plug-in` mutant computes: low by E[(1 − ĉ)^k] − (1 − p)^k > 0
    n, p, k = 3, 0.5, 3
    pmf = sps.binom.pmf(range(n + 1), n, p)
    plug_in = sum(w * (1 - (1 - c / n) ** k) for c, w in enumerate(pmf))
    assert RT.pass_at_k(p, k) - plug_in == pytest.approx(0.125, abs=1e-9)


@pytest.fixture(scope="module")
def epochs_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, dict]:
    """A real run of the simulated server: 8 questions × 40 epochs at search cap 2 (constrained)."""
    from branchpoint.datasets import load_questions
    from branchpoint.experiments.runner import run_experiment
    from branchpoint.experiments.source_pool import SourcePool
    from branchpoint.experiments.spec import QuestionsSpec, SampleSpec
    from branchpoint.experiments.spec.run import RunSpec
    from branchpoint.models.spec import SimServerSpec
    from branchpoint.sim import SimServer
    from branchpoint.sim.profile import load_profile
    from branchpoint.sim.question_set import QuestionBank
    from branchpoint.validation.study_setup import StudySettings, shared_server_opener, study_spec
    from branchpoint.validation.truth_setup import search_function, truth_model

    root = tmp_path_factory.mktemp("epochs-truth")
    settings = StudySettings(profile="instruct", policy="constrained", search_cap=CAP)
    prof = load_profile("instruct")
    spec = study_spec(settings, 11, prof.served_name)
    spec = spec.model_copy(
        update={
            "questions": QuestionsSpec(path="demo", sample=SampleSpec(answerable=4, unanswerable=4)),
            "run": RunSpec(epochs=EPOCHS),
        }
    )
    with SimServer(SimServerSpec(profile="instruct", latency_scale=0.0), served_name=prof.served_name) as server:
        run_experiment(spec, root, progress=False, model_opener=shared_server_opener(server.base_url), concurrency=8)
    questions = load_questions("demo")
    by_id = {q.id: q for q in questions}
    pool = SourcePool(progress=False)
    try:
        truth = truth_model(settings, spec, prof, QuestionBank(questions), "completion", search_function(pool, spec))
        counts = {q: truth.search_counts(by_id[q], CAP, "main") for q in RT.epochs_by_condition(root).popitem()[1][1]}
        first = {q: truth.first_decision(by_id[q], CAP) for q in counts}
        natural = {q: truth.natural(by_id[q], CAP, "main") for q in counts}
    finally:
        pool.close()
    return root, (counts, first, natural), by_id


def _records(root: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in RT.latest(RT.read_lines(root / "executions.jsonl")):
        out.setdefault(str(r["question_id"]), []).append(r)
    return out


def test_epochs_are_counted_from_the_raw_records(epochs_run) -> None:
    root, _, _ = epochs_run
    [(cond, epochs)] = RT.epochs_by_condition(root).values()
    assert len(epochs) == 8 and set(epochs.values()) == {EPOCHS} and cond == {}


def test_search_counts_match_the_simulator(epochs_run) -> None:
    """Pearson's X² of every question's 40 search counts against `search_counts`, and the share
    reaching the cap against `reach_share`, on a real run of the simulated server."""
    root, (counts, _, natural), _ = epochs_run
    x2, df = 0.0, 0
    for q, recs in _records(root).items():
        seen = Counter(int(r["search_calls"]) for r in recs)
        dist = counts[q]
        assert sum(dist.values()) == pytest.approx(1.0)
        assert sum(k * w for k, w in dist.items()) == pytest.approx(natural[q].searches)  # the recursion's mean
        assert set(seen) <= {k for k, w in dist.items() if w > 0}, (q, seen, dist)
        for k, w in dist.items():
            if 1e-9 < w < 1 - 1e-9:
                x2 += (seen.get(k, 0) - EPOCHS * w) ** 2 / (EPOCHS * w)
                df += 1
        df -= 1 if sum(1 for w in dist.values() if 1e-9 < w < 1 - 1e-9) else 0
    assert df > 3
    assert sps.chi2.sf(x2, df) > 1e-3, (x2, df)
    reached = sum(int(r["search_calls"]) >= CAP for recs in _records(root).values() for r in recs) / (8 * EPOCHS)
    truth = RT.reach_share(list(counts.values()), CAP)
    se = math.sqrt(sum(w * (1 - w) for w in (d.get(CAP, 0.0) for d in counts.values())) / 8) / math.sqrt(8 * EPOCHS)
    assert abs(reached - truth) < 4 * se + 1e-9, (reached, truth, se)


def test_first_decisions_match_the_simulator(epochs_run) -> None:
    root, (counts, first, _), _ = epochs_run
    searched = answered = 0
    p_search = p_answer = 0.0
    for q, recs in _records(root).items():
        searched += sum(int(r["search_calls"]) > 0 for r in recs)
        answered += sum(int(r["search_calls"]) == 0 and r["status"] == "ok" for r in recs)
        p_search += EPOCHS * first[q][0]
        p_answer += EPOCHS * first[q][1]
        assert first[q][0] == pytest.approx(1.0 - counts[q].get(0, 0.0), abs=1e-9)  # searched first = made a search
    for seen, expected in ((searched, p_search), (answered, p_answer)):
        sd = math.sqrt(expected * (1 - expected / (8 * EPOCHS)))
        assert abs(seen - expected) < 4 * sd + 1e-9, (seen, expected, sd)


def test_pass_at_k_truth_matches_the_epochs(epochs_run) -> None:
    """pass@3 and the flip rate over 40 epochs split into blocks of 3 (independent draws) against
    the truth from each question's exact p."""
    root, (_, _, natural), by_id = epochs_run
    from branchpoint.sim.behaviour import is_success

    est, truth, var = [], [], []
    for q, recs in _records(root).items():
        ok = [is_success(by_id[q], r.get("final_answer")) and r["status"] == "ok" for r in recs]
        blocks = [ok[i : i + 3] for i in range(0, EPOCHS - 2, 3)]
        est += [pipeline_epochs.pass_at_k(3, sum(b), 3) for b in blocks]
        p = natural[q].p
        truth += [RT.pass_at_k(p, 3)] * len(blocks)
        var += [RT.estimator_variance(RT.est_pass_at_k, 3, p, 3)] * len(blocks)
    n = len(est)
    assert abs(sum(est) / n - sum(truth) / n) < 4 * math.sqrt(sum(var)) / n
