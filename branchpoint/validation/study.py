"""One validation study: a whole run → fork → evaluate → value on the simulator, beside its truth.

Three stages, each through the public APIs, so nothing in the pipeline knows it is validated:

- `run_and_fork` writes an ordinary run folder (spec.yaml, executions.jsonl, forks.jsonl, the
  minimal-search study) on the shared simulated server;
- `truth_setup.truth_of` gives the simulator's truth of that fork study
  (`sim.study_truth`: from the raw files, the checkpoints and the question bank only);
- `evaluate` writes metrics.json and value.json and reads the estimates: the state table, the
  rule judge's verdicts on every branch. The exact forecasters (`truth`, `truth_constant`)
  are the truth joined to the state table's rows by state key.

`run_study` does all three, for the settings and spec of `study_setup`. A planted bug (`mutants`) is applied around one stage: around
`evaluate` on a study already run and forked, or around `run_and_fork` for a bug in forking.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.datasets.questions import Question
from branchpoint.defaults import RULE_JUDGE
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import MetricsConfig, compute_metrics, is_correct
from branchpoint.evaluation.over_search import read_minimal_search
from branchpoint.evaluation.value import Forecast, ValueConfig, load_states, value_study
from branchpoint.evaluation.value.outcomes import StateTable, build_states
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import fork_run
from branchpoint.experiments.runner import run_experiment
from branchpoint.experiments.spec import ExperimentSpec, ForkPlan
from branchpoint.experiments.store import RunStore
from branchpoint.provenance import collect, dump_block
from branchpoint.sim.study_truth import StudyTruth
from branchpoint.traces import METRICS_FILE, MINIMAL_SEARCH_FILE, SPEC_FILE, read_records
from branchpoint.validation.study_setup import ALT_SOURCE, StudySettings, shared_server_opener, study_spec
from branchpoint.validation.sweep import SweepTruth, sweep_metrics
from branchpoint.validation.truth_setup import truth_of


def fork_per_action_seed(out: Path, plan: ForkPlan, spec: ExperimentSpec, opener: Any) -> None:
    """Fork each action on its own, the run's spec.yaml carrying a model seed of that action's own
    (restored afterwards), so no two actions of a state share random numbers."""
    import yaml

    spec_path = out / SPEC_FILE
    original = spec_path.read_text(encoding="utf-8")
    try:
        for i, action in enumerate(plan.actions):
            data = yaml.safe_load(original)
            data["model"]["seed"] = (spec.model.seed or 0) + 100 * (i + 1)
            spec_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
            fork_run(out, plan.model_copy(update={"actions": [action]}), progress=False, model_opener=opener)
    finally:
        spec_path.write_text(original, encoding="utf-8")


def fork_parents(records: list[Any], settings: StudySettings) -> list[str]:
    """The executions a study forks: the first `answerable` answerable and `unanswerable`
    unanswerable ones, in question order."""
    # In question order, not file order: concurrent executions are appended as they finish, so
    # the file's order (and with it the forked sample) would change from run to run.
    ordered = sorted(records, key=lambda r: (r.question_id, r.execution_id))
    picked: list[str] = []
    for answerable, n in ((True, settings.answerable), (False, settings.unanswerable)):
        picked += [r.execution_id for r in ordered if r.answerable == answerable and r.status != "incomplete"][:n]
    return picked


def run_and_fork(settings: StudySettings, seed: int, out: Path, *, base_url: str, served_name: str) -> ExperimentSpec:
    """Run one study's questions and fork its sample at every legal boundary with every legal
    action and `repeats` repeats, the minimal-search study included; returns the spec."""
    spec = study_spec(settings, seed, served_name)
    opener = shared_server_opener(base_url)
    run_experiment(spec, out, progress=False, model_opener=opener, concurrency=settings.concurrency)
    parents = fork_parents(read_records(RunStore(out).executions_path), settings)
    plan = ForkPlan(
        executions=parents,
        boundaries=["initial", "after_search_k", "pending_query"],
        actions=["THINK", "SEARCH", "STOP", "SWITCH"],
        repeats=settings.repeats,
        search_budget=settings.search_budget,
        switch_source=ALT_SOURCE,
        concurrency=settings.concurrency,
        seed=settings.fork_seed,
        temperature=settings.temperature,  # the branches sample as the run does (the truth assumes it)
        top_p=settings.top_p,
        # the minimal-search study (over-search %): its THINK forks are the plan's own
        minimal_search=True,
    )
    if settings.seed_per_action:
        fork_per_action_seed(out, plan, spec, opener)
    else:
        fork_run(out, plan, progress=False, model_opener=opener)
    return spec


@dataclass
class StudyResult:
    """A finished study: the pipeline's estimates (value.json, metrics.json, its state table,
    the rule judge's verdict on every branch) and the simulator's truth beside them."""

    seed: int
    run_dir: Path
    value: dict[str, Any]
    metrics: dict[str, Any]
    states: StateTable
    truth: StudyTruth
    #: (parent execution, checkpoint, action) -> the rule judge's verdicts on its branches
    verdicts: dict[tuple[str, str, str], list[bool]] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    #: question id -> the rule judge's verdict on the run's own execution of it
    run_verdicts: dict[str, bool] = field(default_factory=dict)
    #: the sweep run (epochs, effort × cap frontier, budgets): its truth and its metrics.json
    sweep: SweepTruth | None = None
    sweep_metrics: dict[str, Any] | None = None

    @property
    def questions(self) -> list[Question]:
        return list(self.truth.questions.values())


def truth_forecasts(states: StateTable, truth: StudyTruth) -> dict[str, Forecast]:
    """The exact forecaster (each row's true p_T, p_S, joined by state key; 0.5 for a row the
    truth does not know, which the states check then reports) and the exact constant (the
    truth's stratum-balanced means, on the truth's own states and strata)."""
    by_key = {s.key: s for s in truth.scored()}
    n = len(states)
    q_t, q_s = np.full(n, 0.5), np.full(n, 0.5)
    for i, key in enumerate(states.keys):
        st = by_key.get(key)
        if st is not None:
            q_t[i], q_s[i] = st.p[st.roles[0]], st.p[st.roles[1]]
    c_t, c_s = truth.bal(truth.column("p", "T")), truth.bal(truth.column("p", "S"))
    return {"truth": Forecast(q_t, q_s), "truth_constant": Forecast(np.full(n, c_t), np.full(n, c_s))}


def evaluate(
    settings: StudySettings,
    seed: int,
    run_dir: Path,
    truth: StudyTruth,
    *,
    out: Path | None = None,
    sweep: SweepTruth | None = None,
) -> StudyResult:
    """metrics.json and value.json of a forked study (into `out`, default the run folder) and
    the estimates read back, beside `truth`; with `sweep` (the sweep run's truth), the sweep run's
    metrics too."""
    out = Path(out or run_dir)
    out.mkdir(parents=True, exist_ok=True)
    records = read_records(RunStore(run_dir).executions_path)
    minimal_rows = (
        read_minimal_search(run_dir / MINIMAL_SEARCH_FILE) if (run_dir / MINIMAL_SEARCH_FILE).is_file() else None
    )
    judged = judge_records(records, RULE_JUDGE)
    metrics = compute_metrics(
        judged,
        RULE_JUDGE,
        MetricsConfig(bootstrap=settings.resamples, seed=seed),
        minimal_search=minimal_rows,
    )
    metrics["provenance"] = dump_block(collect("validate"))
    (out / METRICS_FILE).write_text(json.dumps(metrics, indent=2, default=str), encoding="utf-8")
    config = ValueConfig(dev_split=0.0, seed=seed, resamples=settings.resamples)
    # Where no search is offered (the `no_search` policy) forks plan THINK only (issue 12): no state
    # has both actions, so there are no search-value estimates, only the branch outcomes to check.
    searchable = settings.policy != "no_search"
    branches = [r for r in fork_records(run_dir) if r.parent is not None]
    states = (
        load_states(run_dir, config)[0]
        if searchable
        else build_states(branches, reward_name=config.reward, judge=config.judge)
    )
    value = (
        value_study(run_dir, config=config, extra_forecasts=truth_forecasts(states, truth), out_dir=out)
        if searchable
        else {}
    )
    verdicts: dict[tuple[str, str, str], list[bool]] = {}
    for r in judge_records([b for b in branches if b.status != "incomplete"], RULE_JUDGE):
        assert r.parent is not None  # branch records only
        verdicts.setdefault((r.parent.execution_id, r.parent.checkpoint_id, r.branch or ""), []).append(
            is_correct(r, RULE_JUDGE)
        )
    statuses: dict[str, int] = {}
    for r in [*records, *branches]:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    run_verdicts = {
        r.question_id: is_correct(r, RULE_JUDGE) for r in judged if r.parent is None and r.status != "incomplete"
    }
    result = StudyResult(seed, Path(run_dir), value, metrics, states, truth, verdicts, statuses, run_verdicts)
    if sweep is not None:
        result.sweep, result.sweep_metrics = sweep, sweep_metrics(settings, seed, sweep)
    return result


def run_study(
    settings: StudySettings, seed: int, out: Path, *, base_url: str, served_name: str, style: Any = None
) -> StudyResult:
    """Run, fork, evaluate and value one study into `out`, with its truth."""
    spec = run_and_fork(settings, seed, out, base_url=base_url, served_name=served_name)
    return evaluate(settings, seed, out, truth_of(settings, spec, out, style=style))
