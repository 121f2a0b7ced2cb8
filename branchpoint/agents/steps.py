"""Trace steps as the agent's nodes build them: one typed `traces.Step` per model or search call.

A node builds a `Step` (the trace contract's own model, so a step has one definition) and writes
`as_state(step)` into the state's `steps` channel: the fields it set, as plain data, because a
checkpoint stores plain data only (no class named in a checkpoint is imported on load; see
`branchpoint.checkpoints.serde`). The runner validates them back into `Step`s for the record
(`experiments.execution_records.record_from_state`), so the trace is the same whichever form a node wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from branchpoint.models.call import ModelCall
from branchpoint.tools.search import SearchResult
from branchpoint.traces import Step


def model_step(kind: str, call: ModelCall, action: str | None, text: str | None) -> Step:
    """The step of one model call: `text` is the parsed action text where the call gave one,
    `raw` what the model returned, `reasoning` the reasoning text and `tool_calls` the tool calls
    it returned (kept beside the contract's fields; the viewer shows them as the reply),
    `cache_hit` whether the response cache answered it (set only when a cache was asked, so the
    steps of a run without one are as before), `logprobs` the decision record of a reply that
    came with log probabilities (`agents.decision_logprobs`)."""
    fields: dict[str, Any] = {
        **({"tool_calls": call.tool_calls} if call.tool_calls else {}),
        "kind": kind,
        "action": action,
        "text": text,
        "raw": call.text,
        "usage": call.usage.model_dump(),
        "latency_s": call.latency_s,
        "finish_reason": call.finish_reason,
        "reasoning": call.reasoning,
    }
    if call.cache_hit is not None:
        fields["cache_hit"] = call.cache_hit
    if call.decision_logprobs is not None:  # set only where the reply had log probabilities
        fields["logprobs"] = call.decision_logprobs
    return Step.model_validate(fields)


def search_step(result: SearchResult) -> Step:
    """The step of one search call: the query and source it ran on, what it retrieved, its
    latency and whether the retrieval cache answered it."""
    return Step.model_validate(
        {
            "kind": "search",
            "query": result.query,
            "source": result.source,
            "retrieved": [d.model_dump() for d in result.docs],
            "latency_s": result.latency_s,
            "cache_hit": result.cache_hit,
        }
    )


def as_state(step: Step) -> dict[str, Any]:
    """A step as the state's `steps` channel holds it: the fields the node set, as plain data."""
    return step.model_dump(exclude_unset=True)


def relabeled(step: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """A step (state form) with another kind, e.g. a policy's own decide steps recorded as the
    `forced_answer` steps of a forced final answer; its other fields as the policy wrote them."""
    return {**step, "kind": kind}
