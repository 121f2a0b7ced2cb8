"""Sweep conditions that would send the model identical requests, found before the run.

`evaluation.sameness` compares what executions sent, after the run; this module says it before any
GPU hour is spent. For each condition of a sweep and each of the first `PROBE_QUESTIONS`
questions of the selection it builds two requests with the code a run uses (the condition's
policy in the agent graph, the run's state and agent context, the model client of its provider):
the first request of the execution, and the request of an answer forced from the same state. The
client's request sink takes each body as it would go to the server and stops the call there:
nothing is sent, no model server is started, no index is opened (the search tool's sources are
never searched: the probe stops before any search). Each body is hashed as the run's
`RequestFingerprints` hashes it, so the first request's fingerprint is what a run records for an
execution that makes one call, and what it logs first (`--log-requests`) for any other.

Equal first requests do not make equal executions: settings that act only after the first reply
(the search cap, top-k, evidence words, the retrieval sources, a token budget, malformed retries)
or that decide which model answers (the provider, its server or simulator settings, the base URL,
the sampling seed, the policy's code) never show in them. Two conditions are reported only when
their probes are equal and they agree on every setting outside `REQUEST_ONLY` (the settings that
reach the model through the request body alone, or not at all); so the settings they differ in are
ones that act on requests alone, and the probes show they do not act: a prompt variant the
completion-style policy ignores, reasoning effort on the completion endpoint. A setting not listed
there counts as one that may act later: a new setting errs on the side of silence. The after-run
check stays the ground truth.

Providers whose requests cannot be built offline (langchain, whose factory may load a model; plug-
ins) are not probed: their conditions are listed in `unprobed` and never reported here.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig

from branchpoint.agents import AgentContext, build_graph, recursion_limit, resolve_policy
from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.sameness import describe_group
from branchpoint.experiments.planning import PlannedExecution, plan_executions, policy_paths, select_questions
from branchpoint.experiments.runner import agent_context, first_state
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.models import ModelClient, ScriptedModel
from branchpoint.models.model_identity import EMBEDDED_REACH, SIM_REACH
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.request_fingerprint import RequestFingerprints
from branchpoint.models.request_log import current_execution
from branchpoint.retrieval.source import RetrievalSource
from branchpoint.tools import SearchTool
from branchpoint.traces import RetrievedDoc

#: Questions of the selection each condition is probed with (the first ones, epoch 0).
PROBE_QUESTIONS = 3

#: Where a probe's OpenAI-compatible client would send (it never does: the request sink stops
#: every call before it leaves), for the providers that start their own server.
PROBE_URL = "http://127.0.0.1:9/v1"

#: The server kind a provider's own server is detected as (the simulated server answers vLLM's
#: `GET /version`; llama-cpp-python answers neither probe): fields such as the grammar's follow it.
OWN_SERVER_KIND = {"sim": "vllm", "embedded": "other"}

#: Model settings that reach the model only in every request body (the probes show whether they
#: do) or not at all (how the client reaches the server and retries).
MODEL_REQUEST_ONLY = frozenset(
    {
        "name",
        "style",
        "temperature",
        "top_p",
        "max_tokens",
        "logprobs",
        "extra_body",
        "reasoning_effort",
        "family",
        "thinking_budget",
        "timeout_s",
        "retries",
        "max_connections",
        "api_key_env",
        "response_cache",
    }
)
#: Agent settings that act only on the prompts the probes build (first decision, forced answer).
AGENT_REQUEST_ONLY = frozenset({"prompt", "protocol", "search", "answer_max_tokens"})
#: Agent settings that act only on searches and the steps after them: request-only where the
#: condition cannot search (its `retrieval` section too).
AGENT_SEARCH_ONLY = frozenset({"search_cap", "top_k", "evidence_words", "budget_disclosure"})
#: Spec sections that never change what one condition's executions send, or whose effect the
#: probes build (the question selection is the run's, the earlier turns are in the first request).
SECTIONS_REQUEST_ONLY = frozenset(
    {"name", "description", "base_dir", "sweep", "fork", "value", "evaluation", "questions", "multi_turn"}
)
#: The settings a warning names as what the requests are built by (the policy picks the endpoint
#: and the prompt; `model.style` is a label the request builders do not read).
CONTEXT_SETTINGS = ("agent.policy", "model.provider")

REQUEST_ONLY = {
    "model": MODEL_REQUEST_ONLY,
    "agent": AGENT_REQUEST_ONLY,
    "agent (no search)": AGENT_SEARCH_ONLY,
    "sections": SECTIONS_REQUEST_ONLY,
}


class ProbeStop(Exception):
    """Raised by the probe's request sink and search sources: the probe goes no further."""


@dataclass
class Probe:
    """What the probe found: per condition label, the first-request fingerprint of each probe
    question (`first`, in `questions` order) and of its forced answer (`forced`); the groups of
    conditions that would send identical requests (`describe_group`'s dicts plus `questions`
    and `context`); and the conditions it could not probe, with why."""

    questions: list[str] = field(default_factory=list)
    first: dict[str, list[str | None]] = field(default_factory=dict)
    forced: dict[str, list[str | None]] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    unprobed: dict[str, str] = field(default_factory=dict)


class _FirstRequest:
    """A request sink that fingerprints the first body it is given, then stops the call."""

    def __init__(self, fingerprints: RequestFingerprints) -> None:
        self.fingerprints = fingerprints
        self.taken = False

    def write(self, endpoint: str, body: Any) -> None:
        if not self.taken:
            self.taken = True
            self.fingerprints.write(endpoint, body)
        raise ProbeStop("the probe stops at the request")

    def close(self) -> None:
        """Nothing to release."""


class _Unsearched:
    """A retrieval source that stops the probe instead of searching."""

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        raise ProbeStop("the probe stops before a search")


class ProbeSources:
    """The search tools of the probe: the condition's source names, none of them ever searched."""

    def search_tool(self, spec: ExperimentSpec, question: Any = None) -> SearchTool | None:
        """The condition's search tool as the run builds it, over sources that search nothing."""
        if not spec.agent.search:
            return None
        sources: dict[str, RetrievalSource] = {name: _Unsearched() for name in spec.retrieval.sources}  # type: ignore[misc]
        return SearchTool(sources, spec.retrieval.default, top_k=spec.agent.top_k)


def probe_client(spec: ExperimentSpec) -> tuple[ModelClient | None, str]:
    """The model client whose requests a condition's run would send, made without a server, or
    None and why not. embedded, sim, openai: the OpenAI-compatible client (no retries, no
    response cache, the server kind its own server is detected as); scripted: the script."""
    model = spec.model
    if model.provider == "scripted":
        if not model.script:
            return None, "provider scripted without a script"
        return ScriptedModel(model.script, cycle=True, name=model.name), ""
    if model.provider in ("embedded", "sim", "openai"):
        update: dict[str, Any] = {"retries": 0, "response_cache": None}
        if model.server_kind == "auto" and model.provider in OWN_SERVER_KIND:
            update["server_kind"] = OWN_SERVER_KIND[model.provider]
        quiet = model.model_copy(update=update)
        return OpenAICompatibleClient(quiet, base_url=model.base_url or PROBE_URL), ""
    return None, f"provider {model.provider} builds its requests in its own code"


def can_search(spec: ExperimentSpec) -> bool:
    """Whether a condition's executions may search (search offered, a policy that searches)."""
    return spec.agent.search and spec.agent.policy != "no_search"


def later_settings(spec: ExperimentSpec) -> str:
    """A condition's settings outside `REQUEST_ONLY`, as canonical JSON: conditions are compared
    only when these are equal."""
    data = spec.model_dump(mode="json")
    for name in SECTIONS_REQUEST_ONLY:
        data.pop(name, None)
    model, agent = data["model"], data["agent"]
    for name in MODEL_REQUEST_ONLY:
        model.pop(name, None)
    for name, reach in (("sim", SIM_REACH), ("server", EMBEDDED_REACH)):
        model[name] = {k: v for k, v in (model.get(name) or {}).items() if k not in reach}
    for name in AGENT_REQUEST_ONLY:
        agent.pop(name, None)
    if not can_search(spec):
        for name in AGENT_SEARCH_ONLY:
            agent.pop(name, None)
        data.pop("retrieval", None)
    return json.dumps(data, sort_keys=True, default=str)


async def _probe_one(
    planned: PlannedExecution, client: ModelClient, sink: _FirstRequest
) -> tuple[str | None, str | None]:
    """The fingerprints of the first request and of the forced answer of one planned execution
    (`client` logs into `sink`)."""
    spec = planned.spec
    policy = resolve_policy(spec.agent.policy, policy_paths(spec))
    graph = build_graph(policy)
    out: list[str | None] = []
    for step in ("first", "forced"):
        name = f"probe/{planned.execution_id}/{step}"
        sink.taken = False
        current_execution.set(name)
        ctx: AgentContext = agent_context(spec, client.with_seed(planned.seed), ProbeSources())
        state = first_state(planned)
        try:
            if step == "first":
                config: RunnableConfig = {"recursion_limit": recursion_limit(spec.agent.search_cap)}
                await graph.ainvoke(state, config, context=ctx)
            else:
                await policy.aforce_answer(state, ctx)
        except Exception:  # the sink's stop, as whatever the client makes of it
            pass
        out.append(sink.fingerprints.pop(name))
    return out[0], out[1]


def probe_conditions(spec: ExperimentSpec, probe_questions: int = PROBE_QUESTIONS) -> Probe:
    """Fingerprint the first requests of every condition of `spec` without calling the model,
    and group the conditions that would send identical requests (see the module docstring)."""
    questions = select_questions(spec)[:probe_questions]
    plan = [p for p in plan_executions(spec, questions) if p.epoch == 0]
    probe = Probe(questions=[q.id for q in questions])
    by_label: dict[str, list[PlannedExecution]] = {}
    for planned in plan:
        by_label.setdefault(condition_label(planned.condition), []).append(planned)
    keys: dict[str, Any] = {}
    conditions: dict[str, dict[str, Any]] = {}

    async def run_all() -> None:
        for label, executions in by_label.items():
            opened, why = probe_client(executions[0].spec)
            if opened is None:
                probe.unprobed[label] = why
                continue
            sink = _FirstRequest(RequestFingerprints())
            client = opened.with_request_log(sink)  # type: ignore[attr-defined]
            prints = [await _probe_one(p, client, sink) for p in executions]
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()
            probe.first[label] = [f for f, _ in prints]
            probe.forced[label] = [f for _, f in prints]
            if any(f is None for pair in prints for f in pair):
                probe.unprobed[label] = "a probe request was not built (a policy that searches or fails first)"
                continue
            conditions[label] = executions[0].condition
            keys[label] = (tuple(prints), later_settings(executions[0].spec))

    asyncio.run(run_all())
    grouped: dict[Any, list[str]] = {}
    for label, key in keys.items():
        grouped.setdefault(key, []).append(label)
    specs = {condition_label(p.condition): p.spec for p in plan}
    for labels in grouped.values():
        if len(labels) > 1:
            group = describe_group(labels, conditions)
            group["questions"] = len(questions)
            group["context"] = _context(group, [specs[lab] for lab in labels])
            probe.groups.append(group)
    probe.groups.sort(key=lambda g: g["conditions"])
    return probe


def _context(group: dict[str, Any], specs: list[ExperimentSpec]) -> dict[str, Any]:
    """The group's shared policy and provider (those not swept within it)."""
    out: dict[str, Any] = {}
    for name in CONTEXT_SETTINGS:
        if name in group["axes"]:
            continue
        section, key = name.split(".")
        values = {getattr(getattr(s, section), key) for s in specs}
        if len(values) == 1:
            out[name] = values.pop()
    return out
