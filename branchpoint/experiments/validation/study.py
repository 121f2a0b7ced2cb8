"""One validation study: a whole run → fork → evaluate → value on the simulator, with the truth.

`run_study` writes an ordinary run directory (spec.yaml, executions.jsonl, forks.jsonl,
metrics.json, value.json), then computes, for every scored state, the exact success
probabilities of its two roles (and of SWITCH where forked) with `TruthModel`, from the state
values saved in the checkpoint, and for every question the exact expectation of the run's
own execution. Nothing in the pipeline knows it is being validated: the studies go through the
public run, fork, metrics and value APIs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.checkpoints import list_boundaries, open_checkpointer
from branchpoint.checkpoints.values import checkpoint_values, state_reader
from branchpoint.datasets.questions import Question
from branchpoint.evaluation.judges import judge_records, normalize_answer
from branchpoint.evaluation.metrics import MetricsConfig, compute_metrics, is_correct
from branchpoint.evaluation.studies import read_minimal_search
from branchpoint.evaluation.value import Forecast, ValueConfig, load_states, value_study
from branchpoint.evaluation.value.outcomes import StateTable, build_states
from branchpoint.evaluation.value.rewards import is_unknown_answer
from branchpoint.evaluation.value.scores import balanced_mean
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import fork_run
from branchpoint.experiments.runner import SourcePool, run_experiment, select_questions
from branchpoint.experiments.spec import (
    AgentSpec,
    BM25SourceSpec,
    ExperimentSpec,
    ForkPlan,
    QuestionsSpec,
    RetrievalSpec,
    SampleSpec,
)
from branchpoint.experiments.store import RunStore
from branchpoint.experiments.validation.minimal import expected_min_searches, vote_passes
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.sim.behaviour import QuestionBank, is_success
from branchpoint.models.sim.policy_truth import PolicyTruth
from branchpoint.models.sim.profile import Profile
from branchpoint.models.sim.truth import POLICY_STYLES, AgentModel, Style, TruthModel, Value
from branchpoint.models.spec import ModelSpec, SimServerSpec
from branchpoint.provenance import collect, dump_block
from branchpoint.traces import (
    BOUNDARY_AFTER_SEARCH,
    BOUNDARY_INITIAL,
    METRICS_FILE,
    MINIMAL_SEARCH_FILE,
    SPEC_FILE,
    read_records,
)

#: The two retrieval sources of a validation study (BM25 over the demo corpus, two settings).
MAIN_SOURCE, ALT_SOURCE = "main", "alt"


@dataclass(frozen=True)
class StudySettings:
    """What every study of one validation shares (seeds differ between studies)."""

    profile: str
    policy: str
    questions: str = "demo"
    answerable: int = 8  # questions whose executions are forked
    unanswerable: int = 8
    run_factor: int = 3  # the run has this many times as many questions (metrics on all of them)
    search_cap: int = 3
    repeats: int = 4
    search_budget: int = 2
    temperature: float = 0.6
    top_p: float = 0.95
    reasoning_effort: str | None = None
    resamples: int = 2000
    concurrency: int = 8
    top_k: int = 2
    #: Diagnostic: fork each action with its own model seed (the pipeline's forks give every action
    #: of a repeat the same seed; see BENCHMARKS.md "Validation on the simulated model").
    seed_per_action: bool = False
    #: The fork plan's seed (`ForkPlan.seed`, the base of every branch's seed). Another value draws
    #: every branch afresh on the same run, states and truth: a diagnostic that tells an error
    #: of the truth for a study's states (it stays) from the chance of its draws (it does not).
    fork_seed: int = 0

    @property
    def chat(self) -> bool:
        return POLICY_STYLES.get(self.policy) != "completion"


def available(questions: str, answerable: bool) -> int:
    """How many answerable (or unanswerable) questions the set has."""
    from branchpoint.datasets import load_questions

    return sum(q.answerable == answerable for q in load_questions(questions))


def study_spec(settings: StudySettings, seed: int, served_name: str) -> ExperimentSpec:
    """The experiment spec of one study (seeded questions sample, model seed, sampling)."""
    chat = settings.chat
    model = ModelSpec(
        provider="sim",
        name=served_name,
        style="chat" if chat else "completion",
        temperature=settings.temperature,
        seed=seed * 1000,
        max_tokens=1024 if chat else 48,
        top_p=settings.top_p,
        reasoning_effort=settings.reasoning_effort,
        sim=SimServerSpec(profile=settings.profile, questions=settings.questions, latency_scale=0.0),
    )
    sources = {
        MAIN_SOURCE: BM25SourceSpec(corpus="demo"),
        ALT_SOURCE: BM25SourceSpec(corpus="demo", index_params={"k1": 0.6, "b": 0.3}),
    }
    return ExperimentSpec(
        name=f"validate-{settings.profile}-{seed}",
        seed=seed,
        questions=QuestionsSpec(
            path=settings.questions,
            sample=SampleSpec(
                answerable=min(settings.answerable * settings.run_factor, available(settings.questions, True)),
                unanswerable=min(settings.unanswerable * settings.run_factor, available(settings.questions, False)),
            ),
        ),
        model=model,
        agent=AgentSpec(
            policy=settings.policy,
            search=True,
            search_cap=settings.search_cap,
            top_k=settings.top_k,
            answer_max_tokens=1024 if chat else 48,
        ),
        retrieval=RetrievalSpec(default=MAIN_SOURCE, sources=sources),
    )


def shared_server_opener(base_url: str) -> Any:
    """A model opener that talks to one already running simulated server (all studies share it)."""

    @contextmanager
    def opener(spec: ExperimentSpec, run_dir: Path) -> Iterator[OpenAICompatibleClient]:
        yield OpenAICompatibleClient(spec.model, base_url=base_url)

    return opener


@dataclass(frozen=True)
class BranchGroup:
    """The repeats of one action from one saved state: successes, repeats, and the true p.

    `content` identifies what the simulator is shown: states of one question with the same
    passages (a search that found nothing new) get the same replies for the same seeds, so only
    one of them counts as an independent draw."""

    action: str
    question: str
    content: int
    successes: int
    repeats: int
    truth: float


@dataclass
class StudyResult:
    """A finished study: its outputs and the truth beside them."""

    seed: int
    run_dir: Path
    value: dict[str, Any]
    metrics: dict[str, Any]
    states: StateTable
    p_think: np.ndarray
    p_search: np.ndarray
    agree_think: np.ndarray  # P(two THINK answers agree) per state
    both_correct_think: np.ndarray  # P(two THINK answers agree and succeed)
    questions: list[Question]
    natural: dict[str, Value]  # question id -> P(success), E[searches], E[tokens] of a run's execution
    tokens_think: np.ndarray = field(default_factory=lambda: np.zeros(0))  # E[T] of the T role per state (NaN: unknown)
    tokens_search: np.ndarray = field(default_factory=lambda: np.zeros(0))  # E[T] of the S role per state
    branches: list[BranchGroup] = field(default_factory=list)  # every forked (state, action) with its truth
    statuses: dict[str, int] = field(default_factory=dict)
    #: per row of minimal_search.jsonl (a correct forked execution that searched): its searches k
    #: and the exact expectation of its minimal searches k* under the study's votes
    minimal: list[tuple[int, float]] = field(default_factory=list)


def agent_model(settings: StudySettings, spec: ExperimentSpec, profile: Profile, style: Style) -> AgentModel:
    """The truth's view of the agent a study runs."""
    return AgentModel(
        style=style,
        temperature=spec.model.temperature,
        top_p=float(spec.model.top_p or 1.0),
        effort=spec.model.reasoning_effort or profile.default_effort,
        max_tokens=spec.model.max_tokens,
        answer_max_tokens=spec.agent.answer_max_tokens or spec.model.max_tokens,
        malformed_retries=spec.agent.malformed_retries,
        evidence_words=spec.agent.evidence_words,
        offers_search=spec.agent.search,
    )


def truth_model(
    settings: StudySettings, spec: ExperimentSpec, profile: Profile, bank: QuestionBank, style: Style, search: Any
) -> TruthModel | PolicyTruth:
    """The truth of a study: `TruthModel` (the protocols' mirror) for a built-in policy; for a
    `module:function` policy on the completion endpoint, `PolicyTruth`, which runs the policy's
    own code against every reply the simulator can give (so a policy that overrides the model
    gets its own truth). A chat `module:function` policy is taken to follow the model."""
    agent = agent_model(settings, spec, profile, style)
    if settings.policy not in POLICY_STYLES and style == "completion":
        from branchpoint.agents import resolve_policy

        return PolicyTruth(profile, bank, resolve_policy(settings.policy), agent, search)
    return TruthModel(profile, bank, agent, search)


def search_function(pool: SourcePool, spec: ExperimentSpec) -> Any:
    tool = pool.search_tool(spec)
    assert tool is not None

    def search(query: str, source: str) -> list[dict[str, Any]]:
        return [d.model_dump() for d in tool.run(query, source=source).docs]

    return search


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


def expected_minimal(
    saver: Any, reader: Any, truth: TruthModel | PolicyTruth, row: dict[str, Any], votes: dict[tuple[str, str], int]
) -> float:
    """E[k*] of one minimal-search row, exactly: `forking.minimal_searches` takes the smallest t < k
    whose THINK branches from `initial` / `after_search_t` are correct in at least half of their
    m votes, else k; each boundary passes with P(Binomial(m, p_THINK) ≥ m/2), independently (its
    own branches and seeds), so E[k*] follows from the passing probabilities (`truths`)."""
    eid, k = str(row["execution_id"]), int(row["searches"])
    passes: list[tuple[int, float]] = []
    for b in list_boundaries(saver, eid, reader):
        if b.kind in (BOUNDARY_INITIAL, BOUNDARY_AFTER_SEARCH) and b.searches < k:
            m = votes.get((eid, b.checkpoint_id), 0)
            values = checkpoint_values(saver, eid, b.checkpoint_id, reader=reader)
            passes.append((b.searches, vote_passes(truth.continuation(values, "THINK").p, m)))
    return expected_min_searches(k, passes)


def run_study(
    settings: StudySettings,
    seed: int,
    out: Path,
    *,
    base_url: str,
    served_name: str,
    profile: Profile,
    style: Style | None = None,
) -> StudyResult:
    """Run, fork, evaluate and value one study into `out`, and compute its truth."""
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
    records = read_records(RunStore(out).executions_path)
    minimal_rows = read_minimal_search(out / MINIMAL_SEARCH_FILE) if (out / MINIMAL_SEARCH_FILE).is_file() else None
    metrics = compute_metrics(
        judge_records(records, "rule"),
        "rule",
        MetricsConfig(bootstrap=settings.resamples, seed=seed),
        minimal_search=minimal_rows,
    )
    metrics["provenance"] = dump_block(collect("validate"))
    (out / METRICS_FILE).write_text(json.dumps(metrics, indent=2, default=str), encoding="utf-8")

    questions = select_questions(spec)
    bank = QuestionBank(questions)
    config = ValueConfig(dev_split=0.0, seed=seed, resamples=settings.resamples)
    # Where no search is offered (the `no_search` policy) forks plan THINK only (issue 12): no state
    # has both actions, so there are no search-value estimates, only the branch outcomes to check.
    searchable = settings.policy != "no_search"
    states = (
        load_states(out, config)[0]
        if searchable
        else build_states(
            [r for r in fork_records(out) if r.parent is not None], reward_name=config.reward, judge=config.judge
        )
    )
    chosen = style or POLICY_STYLES[settings.policy]
    pool = SourcePool(progress=False)
    try:
        truth = truth_model(settings, spec, profile, bank, chosen, search_function(pool, spec))
        n = len(states)
        p_t, p_s = np.zeros(n), np.zeros(n)
        tok_t, tok_s = np.zeros(n), np.zeros(n)
        agree, both = np.zeros(n), np.zeros(n)
        branches: list[BranchGroup] = []
        all_forks = [r for r in fork_records(out) if r.parent is not None and r.status != "incomplete"]
        groups: dict[tuple[str, str, str], list[bool]] = {}
        for r in judge_records(all_forks, "rule"):
            assert r.parent is not None  # all_forks keeps branch records only
            groups.setdefault((r.parent.execution_id, r.parent.checkpoint_id, r.branch or ""), []).append(
                is_correct(r, "rule")
            )
        with open_checkpointer(RunStore(out).checkpoint_target()) as saver:
            reader = state_reader(saver)
            for i, (eid, cid) in enumerate(states.keys):
                values = checkpoint_values(saver, eid, cid, reader=reader)
                budget = states.search_budget[i] or settings.search_budget
                v_t = truth.continuation(values, states.t_action[i], search_budget=budget)
                v_s = truth.continuation(values, states.s_action[i], search_budget=budget)
                p_t[i], p_s[i], tok_t[i], tok_s[i] = v_t.p, v_s.p, v_t.tokens, v_s.tokens
                dist = truth.think_answers(values)
                q = truth.question_of(values)
                by_norm: dict[str, float] = {}
                success: dict[str, bool] = {}
                for ans, p in dist.items():
                    if ans is None or is_unknown_answer(ans):  # failed / UNKNOWN: never agreement
                        continue
                    key = normalize_answer(ans)
                    by_norm[key] = by_norm.get(key, 0.0) + p
                    success[key] = is_success(q, ans)
                agree[i] = sum(p * p for p in by_norm.values())
                both[i] = sum(p * p for k, p in by_norm.items() if success[k])
            for (eid, cid, action), ys in groups.items():
                values = checkpoint_values(saver, eid, cid, reader=reader)
                v = truth.continuation(values, action, search_budget=settings.search_budget, switch_source=ALT_SOURCE)
                shown = truth.passages_of(values)
                pending = (
                    (values.get("pending") or {}).get("text") if values.get("boundary") == "pending_query" else None
                )
                content = hash(
                    (values.get("question"), frozenset(shown), shown[-1:], pending, values.get("source"), action)
                )
                branches.append(BranchGroup(action, values.get("question") or "", content, int(sum(ys)), len(ys), v.p))
            votes = {(e, c): len(ys) for (e, c, a), ys in groups.items() if a == "THINK"}
            minimal = [
                (int(row["searches"]), expected_minimal(saver, reader, truth, row, votes)) for row in minimal_rows or []
            ]
        natural = {q.id: truth.natural(q, spec.agent.search_cap, MAIN_SOURCE) for q in questions}
    finally:
        pool.close()
    extra = {
        "truth": Forecast(p_t, p_s),
        "truth_constant": Forecast(
            np.full(n, float(balanced_mean(p_t, states.stratum))), np.full(n, float(balanced_mean(p_s, states.stratum)))
        ),
    }
    value = value_study(out, config=config, extra_forecasts=extra, write=True) if searchable else {}
    statuses: dict[str, int] = {}
    for r in [*records, *fork_records(out)]:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return StudyResult(
        seed=seed,
        run_dir=out,
        value=value,
        metrics=metrics,
        states=states,
        p_think=p_t,
        p_search=p_s,
        agree_think=agree,
        both_correct_think=both,
        questions=questions,
        natural=natural,
        branches=branches,
        statuses=statuses,
        minimal=minimal,
        tokens_think=tok_t,
        tokens_search=tok_s,
    )
