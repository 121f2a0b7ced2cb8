"""The YAML experiment spec, validated into pydantic, and its expansion into conditions.

A spec names the questions, the model, the agent, the retrieval sources and the evaluation, and
`sweep` lists axes (dotted paths into the spec, e.g. `agent.search_cap: [0, 1, 3]`) whose
cartesian product gives the conditions. An axis over a section takes mappings that override
several of its settings at once (e.g. `model: [{name: a, base_url: …}, {name: b, …}]`). Unknown
keys and wrong types are errors naming the field.

The package by job: `sections` (the pydantic models), `fork` (the fork plan section),
`run` (the run section: epochs),
`loading` (YAML, overrides, the checks before any work), `describe` (error messages),
`conditions` (sweep expansion, condition fingerprints), `identity` (what a run folder belongs
to). Source kinds live with retrieval (`branchpoint.retrieval.sources`).
"""

from branchpoint.defaults import FORK_TEMPERATURE, FORK_TOP_P
from branchpoint.experiments.spec.conditions import (
    condition_fingerprint,
    expand_conditions,
)
from branchpoint.experiments.spec.describe import describe_spec_error, did_you_mean
from branchpoint.experiments.spec.fork import ForkPlan
from branchpoint.experiments.spec.identity import (
    check_same_run,
    identity_differences,
    run_identity,
    spec_fingerprint,
)
from branchpoint.experiments.spec.loading import (
    PACKAGED_MODEL_NAME,
    apply_overrides,
    check_judges,
    check_model_identity,
    check_policies,
    load_spec,
)
from branchpoint.experiments.spec.run import MAX_EPOCHS, RunSpec
from branchpoint.experiments.spec.sections import (
    MAX_SEARCH_CAP,
    AgentSpec,
    EvaluationSpec,
    ExperimentSpec,
    MultiTurnSpec,
    QuestionsSpec,
    RetrievalSpec,
    SampleSpec,
)
from branchpoint.retrieval.sources import (
    BM25SourceSpec,
    DenseSourceSpec,
    SearchR1SourceSpec,
    SourceSpec,
)

__all__ = [
    "FORK_TEMPERATURE",
    "FORK_TOP_P",
    "MAX_EPOCHS",
    "MAX_SEARCH_CAP",
    "PACKAGED_MODEL_NAME",
    "AgentSpec",
    "BM25SourceSpec",
    "DenseSourceSpec",
    "EvaluationSpec",
    "ExperimentSpec",
    "ForkPlan",
    "MultiTurnSpec",
    "QuestionsSpec",
    "RetrievalSpec",
    "RunSpec",
    "SampleSpec",
    "SearchR1SourceSpec",
    "SourceSpec",
    "apply_overrides",
    "check_judges",
    "check_model_identity",
    "check_policies",
    "check_same_run",
    "condition_fingerprint",
    "describe_spec_error",
    "did_you_mean",
    "expand_conditions",
    "identity_differences",
    "load_spec",
    "run_identity",
    "spec_fingerprint",
]
