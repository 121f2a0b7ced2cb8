"""The public Python surface of branchpoint: what a study script, a plug-in or a trainer imports.

Every name here is documented in the API reference and kept stable; module paths not reached
from here (or from a package's `__all__`) are internal and may move between versions. By job:

- the trace contract: the records every run writes and every evaluation reads;
- policies: write the agent's `decide` node and register it;
- models: open a model client from a spec (OpenAI-compatible servers, llama.cpp, the scripted model);
- judges: label answers, abstentions and evidence, and register judges of your own;
- retrieval sources: a spec's source kinds and the documents they return;
- search value: forecasters, calibrators and routers scored on fork studies;
- specs and runs: load a spec, run it, score its traces;
- checkpoints and questions: saved states at legal boundaries, question sets and their formats;
- rewards for training, and the shared defaults;
- the conformance kit a plug-in's tests run (`branchpoint.testing`).

Importing this module loads the whole package (LangGraph included); a script that needs one job
imports that job's package instead (`branchpoint.traces`, `branchpoint.evaluation`, ...), which
exports the same objects.
"""

# Grouped by job, in the order of the docstring (and of the reference page), not alphabetically.
# isort: skip_file
from __future__ import annotations

# the trace contract
from branchpoint.traces import (
    BOUNDARY_KINDS,
    FORK_ACTIONS,
    EXECUTIONS_FILE,
    FORKS_FILE,
    METRICS_FILE,
    VALUE_FILE,
    ExecutionRecord,
    ForkAction,
    Judgment,
    ParentRef,
    RetrievedDoc,
    Step,
    TraceError,
    Usage,
    iter_records,
    read_records,
    write_records,
)

# the registry and the shared defaults
from branchpoint.defaults import DEFAULT_JUDGE, DEFAULT_LAMBDA, DEFAULT_MU, FORK_TEMPERATURE, FORK_TOP_P, RULE_JUDGE
from branchpoint.errors import InputError
from branchpoint.registry import KINDS, REGISTRY, Registry, RegistryError, plugin

# policies
from branchpoint.agents import (
    AgentContext,
    AgentState,
    Budget,
    Decision,
    Policy,
    apply_decision,
    build_graph,
    initial_state,
    may_search,
    policy,
    recursion_limit,
    resolve_policy,
)
from branchpoint.agents.policies import fewshot_decision

# models
from branchpoint.models import ModelCall, ModelClient, ModelSpec, OpenAICompatibleClient, ScriptedModel, open_model

# judges
from branchpoint.evaluation import (
    ABSTENTION_LABELS,
    ANSWER_LABELS,
    BatchJudge,
    JudgeFn,
    JudgeRun,
    LLMJudge,
    LLMJudgeSettings,
    build_judge,
    build_llm_judge,
    judge,
    judge_records,
    normalize_answer,
)
from branchpoint.evaluation.judges import EVIDENCE_LABELS, UNPARSEABLE, rule_judge
from branchpoint.evaluation.llm_judge_prompts import JudgePrompt

# retrieval sources
from branchpoint.retrieval.sources import SourceSpec, source
from branchpoint.spec_paths import SpecPath
from branchpoint.tools import SearchResult

# search value
from branchpoint.evaluation.value import DevView, Forecast, StateTable, calibrator, forecaster, read_value
from branchpoint.evaluation.value.routers import Routed, Router, router

# specs and runs
from branchpoint.evaluation import MetricsConfig, compute_metrics, read_metrics
from branchpoint.evaluation.evaluate import evaluate
from branchpoint.experiments import ExperimentSpec, RunStore, RunSummary, load_spec, run_experiment
from branchpoint.experiments.spec import ForkPlan

# checkpoints and questions
from branchpoint.checkpoints import BoundaryInfo, list_boundaries, open_checkpointer, sqlite_checkpointer
from branchpoint.datasets import Question, QuestionFormat, load_questions, register_format

# rewards for training
from branchpoint.rewards import first_action, outcome_score, outcome_scores, step_score

# the conformance kit
from branchpoint.testing import (
    check_forecaster,
    check_judge,
    check_policy,
    check_router,
    check_source,
    conforms,
    registered,
)

__all__ = [  # noqa: RUF022 -- grouped by job, as the imports above
    # the trace contract
    "BOUNDARY_KINDS",
    "FORK_ACTIONS",
    "EXECUTIONS_FILE",
    "FORKS_FILE",
    "METRICS_FILE",
    "VALUE_FILE",
    "ExecutionRecord",
    "ForkAction",
    "Judgment",
    "ParentRef",
    "RetrievedDoc",
    "Step",
    "TraceError",
    "Usage",
    "iter_records",
    "read_records",
    "write_records",
    # the registry and the shared defaults
    "DEFAULT_JUDGE",
    "DEFAULT_LAMBDA",
    "DEFAULT_MU",
    "FORK_TEMPERATURE",
    "FORK_TOP_P",
    "RULE_JUDGE",
    "InputError",
    "KINDS",
    "REGISTRY",
    "Registry",
    "RegistryError",
    "plugin",
    # policies
    "AgentContext",
    "AgentState",
    "Budget",
    "Decision",
    "Policy",
    "apply_decision",
    "build_graph",
    "fewshot_decision",
    "initial_state",
    "may_search",
    "policy",
    "recursion_limit",
    "resolve_policy",
    # models
    "ModelCall",
    "ModelClient",
    "ModelSpec",
    "OpenAICompatibleClient",
    "ScriptedModel",
    "open_model",
    # judges
    "ABSTENTION_LABELS",
    "ANSWER_LABELS",
    "EVIDENCE_LABELS",
    "UNPARSEABLE",
    "BatchJudge",
    "JudgeFn",
    "JudgePrompt",
    "JudgeRun",
    "LLMJudge",
    "LLMJudgeSettings",
    "build_judge",
    "build_llm_judge",
    "judge",
    "judge_records",
    "normalize_answer",
    "rule_judge",
    # retrieval sources
    "SearchResult",
    "SourceSpec",
    "SpecPath",
    "source",
    # search value
    "DevView",
    "Forecast",
    "Routed",
    "Router",
    "StateTable",
    "calibrator",
    "forecaster",
    "read_value",
    "router",
    # specs and runs
    "ExperimentSpec",
    "ForkPlan",
    "MetricsConfig",
    "RunStore",
    "RunSummary",
    "compute_metrics",
    "evaluate",
    "load_spec",
    "read_metrics",
    "run_experiment",
    # checkpoints and questions
    "BoundaryInfo",
    "Question",
    "QuestionFormat",
    "list_boundaries",
    "load_questions",
    "open_checkpointer",
    "register_format",
    "sqlite_checkpointer",
    # rewards for training
    "first_action",
    "outcome_score",
    "outcome_scores",
    "step_score",
    # the conformance kit
    "check_forecaster",
    "check_judge",
    "check_policy",
    "check_router",
    "check_source",
    "conforms",
    "registered",
]
