"""A sampled audit wired into `value`: inverse-inclusion weights reach the shared-label bounds,
unaudited answers keep their labels, and the source-supported subset is scored on its own."""

from __future__ import annotations

import json

import numpy as np
import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.value.audit_sample import read_audit_sample
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.outcomes import dev_split
from branchpoint.evaluation.value.scores import brier, gain_risk, theta_hat
from branchpoint.evaluation.value.study import load_states, value_study
from tests.evaluation.value.test_study import make_run


def _sample(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _bounds(run, tmp_path, rows, name):
    config = ValueConfig(judge="given", resamples=0, audit_judges=("rule", "given"))
    if rows is not None:
        config = config.model_copy(update={"audit_sample": str(_sample(tmp_path, name, rows))})
    return value_study(run, config=config, write=False)["audit_bounds"]


def test_inclusion_weights_reach_the_bounds(tmp_path):
    run = make_run(tmp_path)  # the rule judge says INCORRECT everywhere, `given` varies: disagreements
    states, _, _ = load_states(run, ValueConfig(judge="given"))
    questions = sorted(set(states.question_id))
    plain = _bounds(run, tmp_path, None, "none.jsonl")
    everything = _bounds(run, tmp_path, [{"question_id": q} for q in questions], "all.jsonl")
    half = questions[::2]
    some = _bounds(run, tmp_path, [{"question_id": q, "inclusion": 1.0} for q in half], "some.jsonl")
    halved = _bounds(run, tmp_path, [{"question_id": q, "inclusion": 0.5} for q in half], "half.jsonl")
    quarter = _bounds(run, tmp_path, [{"question_id": q, "inclusion": 0.25} for q in half], "quarter.jsonl")
    key = ("gain_vs_zero", "historical_mean")
    get = lambda b: b[key[0]][key[1]]
    # every question audited with certainty: the unweighted bounds
    assert get(everything)["lower"] == pytest.approx(get(plain)["lower"])
    assert get(everything)["upper"] == pytest.approx(get(plain)["upper"])
    # a subset audited: fewer uncertain pairs, the others keep their labels
    assert 0 < get(some)["uncertain_pairs"] < get(plain)["uncertain_pairs"]
    # π = 0.5 doubles each correction (bound − original), π = 0.25 quadruples it (Horvitz–Thompson)
    orig = get(some)["original"]
    assert get(halved)["original"] == pytest.approx(orig)
    for end in ("lower", "upper"):
        assert get(halved)[end] - orig == pytest.approx(2 * (get(some)[end] - orig))
        assert get(quarter)[end] - orig == pytest.approx(4 * (get(some)[end] - orig))
    # audit-sampling s.e.: 0 at π = 1; Σ (w·corr)² (1 − π)/π² gives s.e. ratio √(12/2) from π = ½ to ¼
    assert get(some)["sampling_se"] == [0.0, 0.0]
    assert get(halved)["sampling_se"][0] > 0
    assert get(quarter)["sampling_se"][0] == pytest.approx(np.sqrt(6.0) * get(halved)["sampling_se"][0])
    assert halved["audit_sample"]["audited_test_questions"] < halved["audit_sample"]["test_questions"]


def test_source_supported_subset_scored_by_hand(tmp_path):
    run = make_run(tmp_path)
    config = ValueConfig(judge="given", resamples=200)
    states, _, _ = load_states(run, config)
    supported = {q for q in set(states.question_id) if int(q.lstrip("pq") or 0) % 3 != 0}
    rows = [{"question_id": q, "source_supported": q in supported} for q in sorted(set(states.question_id))]
    path = _sample(tmp_path, "audit.jsonl", rows)
    report = value_study(run, config=config.model_copy(update={"audit_sample": str(path)}), write=False)
    block = report["source_supported"]
    test = ~dev_split(states, config.dev_split, config.seed)
    keep = test & np.array([q in supported for q in states.question_id])
    assert block["test_states"] == int(keep.sum()) and 0 < block["test_states"] < block["of_test_states"]
    tt = states.subset(keep)
    strata = tt.stratum.astype(str)
    bal = lambda v: np.mean([v[strata == s].mean() for s in sorted(set(strata))])
    # historical_mean is fitted on the full dev rows: the dev means (stratum-balanced) everywhere
    dd = states.subset(~test)
    dstr = dd.stratum.astype(str)
    dbal = lambda v: np.mean([v[dstr == s].mean() for s in sorted(set(dstr))])
    q_t, q_s = np.full(len(tt), dbal(dd.think.mean_y)), np.full(len(tt), dbal(dd.search.mean_y))
    assert block["brier"]["historical_mean"]["value"] == pytest.approx(bal(brier(q_t, q_s, tt.think, tt.search)))
    theta = theta_hat(tt.think, tt.search)
    assert block["gain_risk"]["historical_mean"]["value"] == pytest.approx(bal(gain_risk(q_s - q_t, tt.dbar, theta)))
    lo, hi = block["brier"]["historical_mean"]["interval"]
    assert lo <= block["brier"]["historical_mean"]["value"] <= hi
    assert "historical_mean - stratum_prior" in block["paired"]
    # the full cohort is unchanged by the subset
    assert report["brier"]["historical_mean"]["brier"] != pytest.approx(block["brier"]["historical_mean"]["value"])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"inclusion": 0.5}, r'line 1: field "question_id" missing'),
        ({"question_id": "q1", "inclusion": 0}, r'line 1: field "inclusion" must be a probability in \(0, 1\]'),
        ({"question_id": "q1", "inclusion": 1.5}, r'field "inclusion"'),
        ({"question_id": "q1", "source_supported": "yes"}, r'field "source_supported" must be true or false'),
    ],
)
def test_bad_audit_lines_name_file_line_and_field(tmp_path, line, message):
    path = _sample(tmp_path, "bad.jsonl", [line])
    with pytest.raises(InputError, match=message):
        read_audit_sample(path)


def test_cli_audit_sample_bad_file_exits_2_and_writes_nothing(tmp_path):
    from typer.testing import CliRunner

    from branchpoint.cli import app

    run = make_run(tmp_path)
    bad = _sample(tmp_path, "bad.jsonl", [{"question_id": "q1", "inclusion": -1}])
    result = CliRunner().invoke(app, ["value", str(run), "--judge", "given", "--audit-sample", str(bad)])
    assert result.exit_code == 2 and 'field "inclusion"' in result.output
    assert not (run / "value.json").exists()


def test_report_sections_for_the_sampled_audit(tmp_path):
    from branchpoint.evaluation.value.markdown import value_markdown

    run = make_run(tmp_path)
    states, _, _ = load_states(run, ValueConfig(judge="given"))
    rows = [{"question_id": q, "inclusion": 0.5, "source_supported": True} for q in sorted(set(states.question_id))]
    path = _sample(tmp_path, "audit.jsonl", rows[:8])
    config = ValueConfig(judge="given", resamples=0, audit_judges=("rule", "given"), audit_sample=str(path))
    md = value_markdown(value_study(run, config=config, write=False))
    assert "### Source-supported subset" in md and "corrections weighted by 1/π" in md
