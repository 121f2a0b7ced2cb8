"""The simulator's truth of one study: the truth model of the agent the spec describes, over
the study's retrieval, handed to `sim.study_truth` (which reads the run folder itself).

What the truth takes from the pipeline is its environment only: the spec's agent settings
(protocol, sampling, limits) and retrieval, which is deterministic given (query, source). It
takes no estimate, no state table, role label, stratum or judgment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.store import RunStore
from branchpoint.sim.policy_truth import PolicyTruth
from branchpoint.sim.profile import Profile, load_profile
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.study_truth import StudyTruth, study_truth
from branchpoint.sim.truth import POLICY_STYLES, AgentModel, Style, TruthModel
from branchpoint.validation.study_setup import ALT_SOURCE, MAIN_SOURCE, StudySettings


def agent_model(spec: ExperimentSpec, profile: Profile, style: Style) -> AgentModel:
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
        disclosure=spec.agent.budget_disclosure,
        shown_cap=spec.agent.search_cap,
    )


def truth_model(
    settings: StudySettings, spec: ExperimentSpec, profile: Profile, bank: QuestionBank, style: Style, search: Any
) -> TruthModel | PolicyTruth:
    """The truth of a study: `TruthModel` (the protocols' mirror) for a built-in policy; for a
    `module:function` policy on the completion endpoint, `PolicyTruth`, which runs the policy's
    own code against every reply the simulator can give (so a policy that overrides the model
    gets its own truth). A chat `module:function` policy is taken to follow the model."""
    agent = agent_model(spec, profile, style)
    if spec.agent.token_budget is not None:
        raise InputError("agent.token_budget: the simulator's truth does not model a token budget; leave it unset")
    if settings.policy not in POLICY_STYLES and style == "completion":
        if agent.disclosure != "hidden":
            raise InputError("agent.budget_disclosure: the truth of a module:function policy covers `hidden` only")
        from branchpoint.agents import resolve_policy

        return PolicyTruth(profile, bank, resolve_policy(settings.policy), agent, search)
    return TruthModel(profile, bank, agent, search)


def search_function(pool: SourcePool, spec: ExperimentSpec) -> Any:
    """(query, source) -> the documents the study's search tool returns (top-k applied)."""
    tool = pool.search_tool(spec)
    assert tool is not None

    def search(query: str, source: str) -> list[dict[str, Any]]:
        return [d.model_dump() for d in tool.run(query, source=source).docs]

    return search


def truth_of(settings: StudySettings, spec: ExperimentSpec, run_dir: Path, *, style: Style | None = None) -> StudyTruth:
    """The truth of the fork study in `run_dir` (see the module docstring)."""
    profile = load_profile(settings.profile)
    from branchpoint.datasets import load_questions

    questions = load_questions(settings.questions)  # the bank: the whole question set, strata included
    chosen: Style = style or POLICY_STYLES[settings.policy]
    pool = SourcePool(progress=False)
    try:
        truth = truth_model(settings, spec, profile, QuestionBank(questions), chosen, search_function(pool, spec))
        return study_truth(
            run_dir,
            truth,
            questions,
            checkpoints=RunStore(run_dir).checkpoint_target(),
            search_budget=settings.search_budget,
            search_cap=spec.agent.search_cap,
            source=MAIN_SOURCE,
            switch_source=ALT_SOURCE,
            costs_modelled=chosen == "completion",  # exact token expectations (`costs`, `policy_truth`)
        )
    finally:
        pool.close()
