"""Judge agreement (percent, Cohen's κ) and judgments accumulating across evaluate calls."""

from __future__ import annotations

import json

import pytest

from branchpoint.evaluation import MetricsConfig, cohen_kappa, evaluate, judge_agreement
from branchpoint.traces import Judgment, read_records, write_records
from tests.evaluation.builders import make_record


def test_cohen_kappa_by_hand():
    a = ["Y", "Y", "N", "N", "Y"]
    b = ["Y", "N", "N", "N", "Y"]
    # p_o = 0.8; p_e = 0.6·0.4 + 0.4·0.6 = 0.48; κ = 0.32 / 0.52
    assert cohen_kappa(a, b) == pytest.approx(0.32 / 0.52)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa(["Y", "Y"], ["Y", "Y"]) is None  # p_e = 1: undefined
    assert cohen_kappa([], []) is None


def judged(qid, answerable, labels_by_judge, evidence_by_judge=None, status="ok"):
    rec = make_record(qid, answerable=answerable, category=None if answerable else "AU", status=status)
    kind = "answer" if answerable else "abstention"
    rec.judgments = [Judgment(judge=j, kind=kind, label=label) for j, label in labels_by_judge.items()]
    for j, docs in (evidence_by_judge or {}).items():
        rec.judgments += [Judgment(judge=j, kind="evidence", label=label, doc_id=d) for d, label in docs.items()]
    return rec


def test_pairwise_agreement_per_kind():
    recs = [
        judged("1", True, {"a": "CORRECT", "b": "CORRECT", "c": "CORRECT", "given": "INCORRECT"}),
        judged("2", True, {"a": "INCORRECT", "b": "CORRECT", "c": "UNPARSEABLE"}),
        judged(
            "3",
            False,
            {"a": "ABSTAINED", "b": "ABSTAINED"},
            {"a": {"d1": "POSITIVE", "d2": "NEGATIVE"}, "b": {"d1": "POSITIVE", "d2": "POSITIVE"}},
        ),
        judged("4", True, {"a": "CORRECT", "b": "INCORRECT"}, status="incomplete"),  # left out
    ]
    out = judge_agreement(recs)
    assert out["judges"] == ["a", "b", "c"]  # `given` copies others: not compared
    pairs = {(p["judge_a"], p["judge_b"], p["kind"]): p for p in out["pairs"]}
    ab = pairs[("a", "b", "decisive")]
    assert (ab["n"], ab["agreement"]) == (3, pytest.approx(2 / 3))
    assert pairs[("a", "b", "answer")]["n"] == 2
    assert pairs[("a", "b", "abstention")]["agreement"] == 1.0
    assert pairs[("a", "b", "evidence")]["n"] == 2 and pairs[("a", "b", "evidence")]["agreement"] == 0.5
    ac = pairs[("a", "c", "answer")]
    assert (ac["n"], ac["n_excluded"], ac["agreement"], ac["kappa"]) == (1, 1, 1.0, None)
    assert ("a", "c", "evidence") not in pairs


def test_judgments_accumulate_across_evaluate_calls(tmp_path):
    recs = [
        make_record("1", gold=["Rome"], answer="Rome", labels={"answer": "CORRECT"}),
        make_record("2", gold=["Rome"], answer="Rome, or maybe Milan", labels={"answer": "INCORRECT"}),
        make_record(
            "3", answerable=False, category="FP", answer="There was no such king.", labels={"abstention": "ABSTAINED"}
        ),
    ]
    write_records(tmp_path / "executions.jsonl", recs)
    cfg = MetricsConfig(bootstrap=20)
    evaluate(tmp_path, judge="rule", cfg=cfg)
    metrics = evaluate(tmp_path, judge="given", cfg=cfg, agreement=True)
    assert metrics["judge"] == "given"
    assert metrics["answer_accuracy"] == 0.5  # the human labels in the trace, not the carried rule ones
    judged_recs = read_records(tmp_path / "judged.jsonl")
    assert {j.judge for j in judged_recs[0].judgments} == {"human", "rule", "given"}
    agreement = json.loads((tmp_path / "agreement.json").read_text())
    assert agreement["judges"] == ["human", "rule"]
    decisive = next(p for p in agreement["pairs"] if p["kind"] == "decisive")
    # rule: "Rome, or maybe Milan" gives the gold answer -> CORRECT; the human said INCORRECT
    # (two candidates; the rule judge only catches "either ... or")
    assert (decisive["n"], decisive["agreement"]) == (3, pytest.approx(2 / 3))
    assert agreement.pop("provenance")["command"] == "evaluate"  # where the file came from (the Python API)
    assert metrics["judge_agreement"] == agreement


def test_changed_answers_do_not_inherit_old_judgments(tmp_path):
    rec = make_record("1", gold=["Rome"], answer="Rome")
    write_records(tmp_path / "executions.jsonl", [rec])
    evaluate(tmp_path, judge="rule", cfg=MetricsConfig(bootstrap=0))
    old = read_records(tmp_path / "judged.jsonl")[0]
    old.judgments.append(Judgment(judge="other", kind="answer", label="INCORRECT"))
    write_records(tmp_path / "judged.jsonl", [old])
    write_records(tmp_path / "executions.jsonl", [rec.model_copy(update={"final_answer": "Paris"})])
    evaluate(tmp_path, judge="rule", cfg=MetricsConfig(bootstrap=0))
    (new,) = read_records(tmp_path / "judged.jsonl")
    assert {j.judge for j in new.judgments} == {"rule"}


def test_minimal_search_file_beside_traces_is_read_and_checked(tmp_path):
    write_records(tmp_path / "executions.jsonl", [make_record("q1", labels={"answer": "CORRECT"}, search_calls=2)])
    row = {
        "execution_id": "e-q1",
        "question_id": "q1",
        "condition": {},
        "searches": 2,
        "minimal_searches": 1,
        "judge": "rule",
    }
    (tmp_path / "minimal_search.jsonl").write_text(json.dumps(row) + "\n")
    m = evaluate(tmp_path, judge="given", cfg=MetricsConfig(bootstrap=10))
    assert m["over_search"]["over_search_pct"] == pytest.approx(100.0)
    bad = {**row, "minimal_searches": "one"}
    (tmp_path / "minimal_search.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(bad) + "\n")
    from branchpoint.errors import InputError

    with pytest.raises(InputError, match=r'minimal_search\.jsonl line 2: field "minimal_searches"'):
        evaluate(tmp_path, judge="given")


def test_evaluate_runs_several_judges_and_lists_where_they_disagree(tmp_path):
    recs = [
        make_record("1", gold=["Rome"], answer="Rome", labels={"answer": "CORRECT"}),
        make_record("2", gold=["Rome"], answer="Milan, followed by Rome", labels={"answer": "CORRECT"}),
        make_record("3", answerable=False, category="AU", answer="Probably 7.", labels={"abstention": "ABSTAINED"}),
    ]
    write_records(tmp_path / "executions.jsonl", recs)
    metrics = evaluate(tmp_path, judge="given", also=["rule"], cfg=MetricsConfig(bootstrap=0), agreement=True)
    assert metrics["judge"] == "given"  # the metrics describe --judge; rule ran beside it
    judged_recs = read_records(tmp_path / "judged.jsonl")
    assert {j.judge for j in judged_recs[1].judgments} == {"human", "rule", "given"}
    agreement = json.loads((tmp_path / "agreement.json").read_text())
    decisive = [d for d in agreement["disagreements"] if d["kind"] == "decisive"]
    assert decisive == [
        {
            "judge_a": "human",
            "judge_b": "rule",
            "kind": "decisive",
            "execution_id": "e-2",
            "label_a": "CORRECT",
            "label_b": "INCORRECT",
        },
        {
            "judge_a": "human",
            "judge_b": "rule",
            "kind": "decisive",
            "execution_id": "e-3",
            "label_a": "ABSTAINED",
            "label_b": "ANSWERED",
        },
    ]
    assert metrics["judge_agreement"]["disagreements"] == agreement["disagreements"]
