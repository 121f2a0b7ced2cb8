"""A spec with `run.epochs: 3` at temperature 0.7 runs on the simulated model, evaluates and
reports; every epoch metric in metrics.json matches a value computed here from the judged trace
records by other means (pass@k by enumerating the k-subsets of epochs, ICC from group means),
and the with/without-search and cap-sweep tables pool all epochs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.evaluation.metrics import compute_metrics
from branchpoint.experiments.spec import RunSpec
from branchpoint.traces import read_records

SPEC = """\
name: epochs-sim
seed: 0
questions: {path: demo, sample: {answerable: 4, unanswerable: 4}}
model: {provider: sim, name: branchpoint-sim-instruct, style: chat, temperature: 0.7, seed: 1,
        max_tokens: 256, sim: {latency_scale: 0}}
agent: {policy: native, search: true, search_cap: 2, top_k: 2}
retrieval: {default: bm, sources: {bm: {kind: bm25}}}
run: {epochs: 3}
sweep: {agent.search_cap: [0, 2]}
"""
EPOCHS = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("epochs")
    (root / "spec.yaml").write_text(SPEC)
    runner = CliRunner()
    for args in (
        ["run", str(root / "spec.yaml"), "--out", str(root / "run"), "--no-progress"],
        ["evaluate", str(root / "run"), "--no-progress"],
        ["report", str(root / "run")],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    return root / "run"


def _label(rec) -> str:
    return ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(rec.condition.items()))


def _epochs(run: Path) -> dict[str, dict[str, list]]:
    """condition label -> question -> its judged records, in epoch order."""
    out: dict[str, dict[str, list]] = {}
    for r in sorted(read_records(run / "judged.jsonl"), key=lambda r: r.repeat):
        if r.status != "incomplete":
            out.setdefault(_label(r), {}).setdefault(r.question_id, []).append(r)
    return out


def _label_of(rec, judge: str = "rule") -> tuple[str, str]:
    kind = "answer" if rec.answerable else "abstention"
    return kind, [j.label for j in rec.judgments if j.judge == judge and j.kind == kind][-1]


def _correct(rec) -> bool:
    return _label_of(rec) in (("answer", "CORRECT"), ("abstention", "ABSTAINED"))


def _abstained(rec) -> float:
    return float([j.label for j in rec.judgments if j.judge == "rule" and j.kind == "abstention"][-1] == "ABSTAINED")


def _pass_by_subsets(outcomes: list[bool], k: int, every: bool) -> float:
    subsets = list(itertools.combinations(outcomes, k))
    return sum((all if every else any)(s) for s in subsets) / len(subsets)


def _icc_from_group_means(groups: list[list[float]]) -> float | None:
    x = [np.array(g, dtype=float) for g in groups]
    n = np.array([len(g) for g in x], dtype=float)
    a, total = len(x), n.sum()
    grand = np.concatenate(x).mean()
    ssb = sum(len(g) * (g.mean() - grand) ** 2 for g in x)
    ssw = sum(((g - g.mean()) ** 2).sum() for g in x)
    msb, msw = ssb / (a - 1), ssw / (total - a)
    k0 = (total - (n**2).sum() / total) / (a - 1)
    den = msb + (k0 - 1) * msw
    return None if abs(den) < 1e-12 else (msb - msw) / den


def test_each_epoch_is_its_own_draw_with_its_own_recorded_seed(run):
    records = read_records(run / "executions.jsonl")
    assert len(records) == 2 * 8 * EPOCHS
    differ = 0
    for questions in _epochs(run).values():
        for recs in questions.values():
            assert [r.repeat for r in recs] == [0, 1, 2]
            seeds = [r.sampling["seed"] for r in recs]  # the sampling as sent
            assert seeds == [RunSpec(epochs=3).seed_of(1, e) for e in range(EPOCHS)] and len(set(seeds)) == 3
            assert all(r.sampling["temperature"] == 0.7 for r in recs)
            paths = {(r.status, r.final_answer, r.search_calls, tuple(s.text for s in r.steps)) for r in recs}
            differ += len(paths) > 1
    assert differ >= 4  # the simulated model draws anew for each epoch's seed


@pytest.mark.parametrize("label", ["agent.search_cap=0", "agent.search_cap=2"])
def test_epoch_metrics_match_the_trace_records(run, label):
    metrics = json.loads((run / "metrics.json").read_text())
    block = metrics["epochs"]
    assert block["epochs"] == EPOCHS and block["decisions"] == ["searched", "abstained", "n_searches"]
    questions = _epochs(run)[label]
    got = block["by_condition"][label]
    assert (got["n_questions"], got["n_executions"]) == (8, 8 * EPOCHS)
    for entry in got["pass"]:
        k = entry["k"]
        want_at = np.mean([_pass_by_subsets([_correct(r) for r in recs], k, False) for recs in questions.values()])
        want_hat = np.mean([_pass_by_subsets([_correct(r) for r in recs], k, True) for recs in questions.values()])
        assert entry["pass_at_k"] == pytest.approx(want_at) and entry["pass_hat_k"] == pytest.approx(want_hat)
        lo, hi = entry["pass_at_k_ci"]
        assert lo <= hi
    assert [e["k"] for e in got["pass"]] == [1, 2, 3]
    flips = np.mean([len({_correct(r) for r in recs}) > 1 for recs in questions.values()])
    assert got["flip_rate"] == pytest.approx(flips)
    decisions = {
        "searched": lambda r: float(r.search_calls > 0),
        "abstained": _abstained,
        "n_searches": lambda r: float(r.search_calls),
    }
    for name, of in decisions.items():
        want = _icc_from_group_means([[of(r) for r in recs] for recs in questions.values()])
        icc = got["reliability"][name]["icc"]
        assert (icc is None) if want is None else icc == pytest.approx(want), name
    # per category: the answerable questions alone
    answerable = {q: recs for q, recs in questions.items() if recs[0].answerable}
    cat = got["by_category"]["answerable"]
    assert cat["n_questions"] == len(answerable) == 4
    want = np.mean([np.mean([_correct(r) for r in recs]) for recs in answerable.values()])
    assert cat["pass"][0]["pass_at_k"] == pytest.approx(want)
    want = _icc_from_group_means([[_abstained(r) for r in recs] for recs in answerable.values()])
    icc = cat["reliability"]["abstained"]["icc"]
    assert (icc is None) if want is None else icc == pytest.approx(want)


def test_search_effect_and_cap_sweep_pool_every_epoch(run):
    metrics = json.loads((run / "metrics.json").read_text())
    by_cond = _epochs(run)

    def pooled(label: str) -> float:
        recs = [r for rs in by_cond[label].values() for r in rs]
        return sum(map(_correct, recs)) / len(recs)

    (effect,) = metrics["search_effect"]
    assert (effect["n_with"], effect["n_without"]) == (8 * EPOCHS, 8 * EPOCHS)
    assert effect["overall_accuracy"]["with"] == pytest.approx(pooled("agent.search_cap=2"))
    assert effect["overall_accuracy"]["without"] == pytest.approx(pooled("agent.search_cap=0"))
    (series,) = metrics["search_cap_sweep"]
    for point in series["points"]:
        assert point["n"] == 8 * EPOCHS
        assert point["overall_accuracy"] == pytest.approx(pooled(point["condition"]))


def test_report_has_the_epochs_table_and_one_epoch_has_no_epoch_block(run):
    report = (run / "report.md").read_text()
    section = report.split("## Epochs", 1)[1].split("\n## ", 1)[0]
    for label in ("agent.search_cap=0", "agent.search_cap=2"):
        assert f"| {label} | all | 8 | 3 |" in section
        assert f"| {label} | answerable | 4 | 3 |" in section
    first = [r for r in read_records(run / "judged.jsonl") if r.repeat == 0]
    assert "epochs" not in compute_metrics(first, "rule")
