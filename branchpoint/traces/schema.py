"""The trace record: one `ExecutionRecord` per agent execution (its steps, usage, judgments and
where a fork came from) and its deterministic id. Fields a producer may not know are optional,
and unknown extra fields are kept rather than rejected, so foreign traces can be scored."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from branchpoint.traces.boundaries import ForkAction

SCHEMA_VERSION = 1

Category = Literal["AU", "FP", "UC"]
Status = Literal["ok", "malformed", "length", "incomplete"]
#: Our step kinds. A trace may carry others (another framework's `tool`, `reflect`, ...): they
#: are kept as written, and a step of another kind that has `usage` counts as a model call.
StepKind = Literal["decide", "search", "answer", "forced_answer"]
STEP_KINDS: tuple[str, ...] = ("decide", "search", "answer", "forced_answer")
JudgmentKind = Literal["answer", "abstention", "evidence"]


class _Open(BaseModel):
    """Base for trace models: extra fields are kept (foreign producers may add their own)."""

    model_config = ConfigDict(extra="allow")


class Usage(_Open):
    """Token usage of one model call, as the server reported it."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None


class RetrievedDoc(_Open):
    """One retrieved passage. `title` and `source` are optional for foreign traces."""

    doc_id: str
    score: float
    text: str
    title: str | None = None
    source: str | None = None


class TokenAlternative(_Open):
    """One alternative token at a position, with its log probability (natural log)."""

    token: str
    logprob: float


class DecisionLogprobs(_Open):
    """What a decide step's reply said about searching, where the server returned log
    probabilities (`model.logprobs`): the token where it chose between searching and answering,
    the top alternatives there, and their probability mass per action (lower bounds: only the
    top N are seen). See `branchpoint.agents.decision_logprobs` and docs/search-value.md."""

    protocol: str | None = Field(None, description="constrained, tagged or native: how the decision token was found")
    position: int | None = Field(None, description="index of the decision token among the reply's tokens")
    token: str | None = Field(None, description="the decision token the reply has")
    logprob: float | None = Field(None, description="its log probability (natural log; -9999 for -inf)")
    top: list[TokenAlternative] = Field(default_factory=list, description="the top alternatives at the decision")
    p_search: float | None = Field(None, description="probability mass of the alternatives that open a search")
    p_answer: float | None = Field(None, description="probability mass of the alternatives that open an answer")
    top_mass: float | None = Field(None, description="probability mass of all the alternatives seen")
    entropy: float | None = Field(None, description="entropy in bits of the alternatives, renormalised")


class Step(_Open):
    """One step of an execution: a model decision, a search call, or the final answer."""

    kind: StepKind | str = Field(
        description="decide, search, answer, forced_answer, or another framework's kind (kept as written)"
    )
    usage: Usage | None = None
    latency_s: float = 0.0
    action: str | None = None
    text: str | None = None
    query: str | None = None
    source: str | None = None
    retrieved: list[RetrievedDoc] = Field(default_factory=list)
    cache_hit: bool | None = Field(
        None,
        description="Whether a cache answered the step's call: a search step's the retrieval cache, a model "
        "step's the response cache (--cache; unset when no response cache was asked).",
    )
    finish_reason: str | None = None
    raw: str | None = Field(None, description="A model step's reply as returned (`text` holds the parsed action text).")
    logprobs: DecisionLogprobs | None = Field(
        None,
        description="A decide step's decision token and its alternatives, where the server returned log probabilities.",
    )

    @model_serializer(mode="wrap")
    def _dump_logprobs_if_set(self, handler: Any) -> Any:
        """`logprobs` is written only when a step has them: traces written without them keep the
        bytes they had before the field existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("logprobs") is None:
            data.pop("logprobs", None)
        return data


class Judgment(_Open):
    """A judge's label on one execution (`raw` keeps the judge's own output)."""

    judge: str
    kind: JudgmentKind
    label: str
    raw: str | None = None


class ParentRef(_Open):
    """Where a forked execution came from."""

    execution_id: str
    checkpoint_id: str
    boundary: str


class ExecutionRecord(_Open):
    """One agent execution on one question under one condition."""

    execution_id: str
    run_id: str
    condition: dict[str, Any] = Field(default_factory=dict)
    question_id: str
    question: str
    answerable: bool
    category: Category | None = None
    gold_answers: list[str] = Field(default_factory=list)
    stratum: str | None = None
    support_group: str | None = None
    parent: ParentRef | None = None
    branch: ForkAction | None = None
    repeat: int = 0
    kind: str | None = Field(None, description='"replay" for a replay (the policy decided again; `branch` is null).')
    sampling: dict[str, Any] | None = Field(
        None,
        description="The sampling as sent: the sampling fields (temperature, top_p, seed, ...) of the "
        "execution's last model request body (a branch or replay: its own seed per repeat).",
    )
    fork_settings: dict[str, Any] | None = Field(
        None,
        description="A branch's or replay's fork settings: what makes it the branch it is (depth, search "
        "budget, switch source, sampling as sent without the seed); see `evaluation.fork_settings`.",
    )
    fork_fingerprint: str | None = Field(None, description="A hash of `fork_settings`: branches pool only within one.")
    status: Status = "ok"
    final_answer: str | None = None
    steps: list[Step] = Field(default_factory=list)
    search_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    wall_s: float = 0.0
    checkpoint_ids: list[str] | None = None
    judgments: list[Judgment] = Field(default_factory=list)
    error: str | None = None
    request_fingerprint: str | None = Field(
        None,
        description="Hash of the request bodies this execution sent to the model (seeds left out); "
        "equal across conditions when a sweep axis changed nothing the model received.",
    )
    invocation: str | None = Field(
        None,
        description="The id of the invocation (run, fork, replay, import) that wrote this record: its "
        "line in invocations.jsonl beside the file holds the provenance (optional).",
    )


def execution_id(
    run_id: str,
    condition: dict[str, Any],
    question_id: str,
    parent: dict[str, Any] | None = None,
    branch: str | None = None,
    repeat: int = 0,
) -> str:
    """Deterministic id of an execution: a hash of run, condition, question, parent, branch, repeat."""
    key = json.dumps([run_id, condition, question_id, parent, branch, repeat], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:24]
