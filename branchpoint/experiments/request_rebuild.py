"""Rebuild a run's requests from its checkpoints, for runs made without `--log-requests`.

Prompts are a pure function of the checkpointed state (see `branchpoint.agents.state`), so the
request a model step sent can be built again: at every saved state where the agent called the
model (a checkpoint whose next node is `decide` or `answer`), the run's own policy node runs on
that state, through the run's own model client (`OpenAICompatibleClient` or the scripted
model, with the spec's settings and the sampling the record says was sent). Nothing reaches a
server: the client's HTTP requests go to `ReplayTransport`, which answers each with the reply the
trace recorded for that model step (content, reasoning, tool calls, finish reason), so the
policy takes the path it took (a malformed reply is retried with the grammar, a tool call is a
search). The bodies are logged by the client's own request hook, exactly as `--log-requests`
logs them: evidence clipped to `agent.evidence_words` and formatted as the policy formats it.

The result is RUN_DIR/requests.rebuilt.jsonl, lines in the `--log-requests` format
(`{"time", "execution_id", "endpoint", "body"}`, see `models.request_log`) plus a `rebuilt`
field: `{"from": "checkpoint", "checkpoint_id", "node", "verified"}`. `verified` is true when
the rebuilt bodies hash to the `request_fingerprint` the runner recorded from what was sent
(`models.request_fingerprint`: every body, in order, the seed aside), false when they do not,
and null where the record has no fingerprint (fork branches). The viewer reads the file as it
reads requests.jsonl and labels its requests "rebuilt from checkpoint". A run's own
requests.jsonl is never touched.

Not rebuilt: executions whose requests are in requests.jsonl already (unless asked),
incomplete ones, and models of provider `langchain` (its requests are made by LangChain, not by
a client that a transport can answer).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx2
from langgraph.runtime import Runtime

from branchpoint.agents import resolve_policy
from branchpoint.agents.graph import build_graph, make_answer_node, make_decide_node
from branchpoint.checkpoints import open_checkpointer
from branchpoint.checkpoints.boundaries import original_path
from branchpoint.checkpoints.values import thread_states
from branchpoint.errors import InputError
from branchpoint.experiments.branch_planning import base_condition, condition_key, condition_specs
from branchpoint.experiments.execution import run_blocking_core
from branchpoint.experiments.planning import policy_paths
from branchpoint.experiments.runner import agent_context
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.spec import ExperimentSpec, load_spec
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.request_fingerprint import canonical_request
from branchpoint.models.request_log import RequestLog, current_execution, read_requests
from branchpoint.models.scripted import ScriptedModel
from branchpoint.models.spec import ModelSpec
from branchpoint.provenance import read_invocations
from branchpoint.tools.search import SearchTool
from branchpoint.traces import (
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    FORKS_FILE,
    REBUILT_REQUESTS_FILE,
    REPLAYS_FILE,
    REQUESTS_FILE,
    SPEC_FILE,
    ExecutionRecord,
    Step,
    read_records,
)

#: The `rebuilt.from` of every rebuilt line.
REBUILT_FROM = "checkpoint"
#: The base URL the rebuilt requests name (never contacted: `ReplayTransport` answers them).
REBUILD_URL = "http://rebuild.invalid/v1"
#: Model nodes of the agent graph: a checkpoint whose next node is one of these made model calls.
MODEL_NODES = ("decide", "answer")
#: Server kinds named in a run's provenance (`ModelServer.kind`) -> the kind the client sends for.
PROVENANCE_KINDS = {"vllm": "vllm", "llamacpp": "llamacpp", "branchpoint-sim": "vllm"}


class RebuildError(RuntimeError):
    """One execution's requests could not be rebuilt (its replies ran out, or a node failed)."""


def is_model_step(step: Step) -> bool:
    """A step that is one model call (it carries the call's usage), not a search: the steps the
    viewer puts requests on (`evaluation.viewer.requests.is_model_step`)."""
    return step.kind != "search" and step.usage is not None


@dataclass
class RecordedReplies:
    """An execution's model steps, in order: the k-th call made in the rebuild gets the k-th."""

    steps: list[Step]
    position: int = 0

    def next(self) -> Step:
        if self.position >= len(self.steps):
            raise RebuildError(f"the rebuild made more model calls than the record's {len(self.steps)}")
        step = self.steps[self.position]
        self.position += 1
        return step


@dataclass
class ReplyBook:
    """The recorded replies of each execution, found by the execution running in this task."""

    by_execution: dict[str, RecordedReplies] = field(default_factory=dict)

    def next(self) -> Step:
        execution = current_execution.get()
        if execution is None or execution not in self.by_execution:
            raise RebuildError(f"a model call outside any execution being rebuilt ({execution})")
        return self.by_execution[execution].next()


def _usage(step: Step) -> dict[str, Any]:
    usage = step.usage
    assert usage is not None  # a model step
    reasoning = usage.reasoning_tokens
    if step.model_dump().get("reasoning") and not reasoning:
        reasoning = max(1, usage.output_tokens)  # reported, so the client asks no server to count
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def chat_reply(step: Step, model: str) -> dict[str, Any]:
    """The `/v1/chat/completions` reply a recorded model step stands for."""
    data = step.model_dump(mode="json")
    calls = [
        {
            "id": c.get("id") or f"call_{i}",
            "type": "function",
            "function": {"name": c.get("name"), "arguments": json.dumps(c.get("args") or {})},
        }
        for i, c in enumerate(data.get("tool_calls") or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": step.raw if step.raw is not None else step.text}
    if step_reasoning := data.get("reasoning"):
        message["reasoning"] = step_reasoning
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": step.finish_reason or "stop", "logprobs": None}
    return {
        "id": "rebuilt",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [choice],
        "usage": _usage(step),
    }


def completion_reply(step: Step, model: str) -> dict[str, Any]:
    """The `/v1/completions` reply a recorded model step stands for."""
    text = step.raw if step.raw is not None else (step.text or "")
    choice = {"index": 0, "text": text, "finish_reason": step.finish_reason or "stop", "logprobs": None}
    return {
        "id": "rebuilt",
        "object": "text_completion",
        "created": 0,
        "model": model,
        "choices": [choice],
        "usage": _usage(step),
    }


class ReplayTransport(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """An httpx2 transport that answers chat and completion requests with the recorded replies
    (`ReplyBook`) and any other request with HTTP 404; it sends nothing anywhere."""

    def __init__(self, book: ReplyBook, model: str) -> None:
        self.book = book
        self.model = model

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path.endswith("/chat/completions"):
            return httpx2.Response(200, json=chat_reply(self.book.next(), self.model), request=request)
        if path.endswith("/completions"):
            return httpx2.Response(200, json=completion_reply(self.book.next(), self.model), request=request)
        return httpx2.Response(404, json={"error": "a rebuild answers model requests only"}, request=request)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return self.handle_request(request)


@dataclass
class RebuiltLine:
    """One rebuilt request: the `--log-requests` line's fields and where it was rebuilt from."""

    execution_id: str
    endpoint: str
    body: Any
    checkpoint_id: str
    node: str


#: The checkpoint and node being rebuilt in this task (what `RebuiltSink` notes on each line).
_AT: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("branchpoint_rebuild_at", default=None)


class RebuiltSink:
    """A request sink (`write(endpoint, body)`, as `RequestLog`) that keeps each rebuilt body with
    the execution, checkpoint and node it was rebuilt at."""

    def __init__(self) -> None:
        self.lines: list[RebuiltLine] = []

    def write(self, endpoint: str, body: Any) -> None:
        execution, at = current_execution.get(), _AT.get()
        if execution is None or at is None:
            raise RebuildError(f"a {endpoint} request outside any saved state being rebuilt")
        self.lines.append(RebuiltLine(execution, endpoint, body, *at))

    def close(self) -> None:
        """Nothing to release."""


@contextmanager
def rebuilding_at(checkpoint_id: str, node: str) -> Iterator[None]:
    token = _AT.set((checkpoint_id, node))
    try:
        yield
    finally:
        _AT.reset(token)


class _NotSearched:
    """The retrieval source of a rebuild: model nodes never search (the search node is not run)."""

    def search(self, query: str, k: int) -> list[Any]:
        raise RebuildError("a rebuild runs no search")


class NoSearchPool:
    """Stands where the runner's `SourcePool` does in `agent_context`: a search tool whose
    sources are never searched (a model node only asks whether one is offered), None where the
    condition offers none, as the pool gives."""

    def search_tool(self, spec: ExperimentSpec, question: Any = None) -> SearchTool | None:
        if not spec.agent.search:
            return None
        return SearchTool({name: _NotSearched() for name in spec.retrieval.sources}, spec.retrieval.default)  # type: ignore[misc]


def server_kind_of(spec: ModelSpec, run_dir: Path, override: str | None = None) -> str:
    """The server kind the run's client sent for (it decides the grammar field and the tagged
    policy's sequence fields): `override`, else the spec's `server_kind`, else vLLM for the
    simulated server (it answers `/version` as vLLM does), `other` for the embedded
    llama-cpp-python, and for provider `openai` the kind the run's provenance recorded."""
    if override:
        return override
    if spec.server_kind != "auto":
        return spec.server_kind
    if spec.provider == "sim":
        return "vllm"
    if spec.provider == "openai":
        for invocation in read_invocations(run_dir):
            for server in invocation.provenance.model_servers:
                if server.model == spec.name and server.kind in PROVENANCE_KINDS:
                    return PROVENANCE_KINDS[server.kind]
    return "other"


def replay_client(spec: ModelSpec, book: ReplyBook, sink: RebuiltSink, server_kind: str) -> Any:
    """The run's model client for `spec`, answered from `book` and logging into `sink`."""
    if spec.provider == "scripted":

        def responder(prompt: str) -> dict[str, Any]:
            step = book.next()
            data = step.model_dump(mode="json")
            return {
                "text": step.raw if step.raw is not None else (step.text or ""),
                "tool_calls": data.get("tool_calls") or [],
                "finish_reason": step.finish_reason or "stop",
                "reasoning": data.get("reasoning"),
            }

        return ScriptedModel(responder=responder, name=spec.name).with_request_log(sink)
    if spec.provider in ("openai", "sim", "embedded"):
        quiet = spec.model_copy(update={"api_key_env": None, "response_cache": None, "server_kind": server_kind})
        return OpenAICompatibleClient(
            quiet, base_url=REBUILD_URL, transport=ReplayTransport(book, spec.name), request_log=cast(RequestLog, sink)
        )
    raise InputError(
        f"model.provider {spec.provider!r}: its requests cannot be rebuilt from the checkpoints "
        "(run with --log-requests to see them as sent)"
    )


def fingerprint(lines: list[RebuiltLine]) -> str:
    """The `request_fingerprint` of these bodies, as `RequestFingerprints` computes it."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(canonical_request(line.endpoint, line.body).encode() + b"\n")
    return digest.hexdigest()[:16]


@dataclass
class RebuildSummary:
    """What a rebuild did: executions rebuilt, requests written, how many were verified against
    the recorded fingerprint, and those left out with why."""

    out: Path
    executions: int = 0
    requests: int = 0
    verified: int = 0
    unverified: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    logged: int = 0
    incomplete: int = 0


def _latest_records(run_dir: Path) -> list[ExecutionRecord]:
    latest: dict[str, ExecutionRecord] = {}
    for name in (EXECUTIONS_FILE, FORKS_FILE, REPLAYS_FILE):
        if (run_dir / name).is_file():
            for rec in read_records(run_dir / name):
                latest[rec.execution_id] = rec
    return list(latest.values())


def _search_cap(first: dict[str, Any], spec: ExperimentSpec, record: ExecutionRecord) -> int:
    """The execution's search cap: the spec's; for a fork branch, as `branch_input` set it from
    the state it was seeded with (searches so far, plus the directive's budget to search on)."""
    directive = first.get("directive") or {}
    if record.parent is None or not directive:
        return spec.agent.search_cap
    searches = int(first.get("searches", 0))
    return (
        searches + int(directive.get("search_budget", 0))
        if directive.get("action") in ("SEARCH", "SWITCH")
        else searches
    )


def _sampling(record: ExecutionRecord) -> dict[str, Any]:
    """The sampling the execution's client view was made with, from what it sent: an execution's
    seed (the runner's `with_seed`; temperature and top-p are the spec's), a branch's or replay's
    temperature, top-p and seed (the fork engine's `with_sampling` of the plan's draw)."""
    sent = record.sampling or {}
    fields = ("seed",) if record.parent is None else ("temperature", "top_p", "seed")
    return {k: sent[k] for k in fields if sent.get(k) is not None}


async def _rebuild_one(
    record: ExecutionRecord, spec: ExperimentSpec, client: Any, snapshots: list[Any], nodes: dict[str, Any]
) -> None:
    """Run the model nodes of one execution at each of its saved states, in order."""
    # the state the graph started from (the input checkpoint holds its input as a pending write)
    first: dict[str, Any] = next((s.values for s in snapshots if (s.metadata or {}).get("source") != "input"), {})
    ctx = agent_context(spec, client.with_sampling(**_sampling(record)), cast(SourcePool, NoSearchPool()), record)
    ctx.search_cap = _search_cap(first, spec, record)
    current_execution.set(record.execution_id)
    for snap in snapshots:
        node = snap.next[0] if snap.next else None
        if node not in MODEL_NODES:
            continue
        with rebuilding_at(snap.config["configurable"]["checkpoint_id"], node):
            await nodes[node](dict(snap.values), Runtime(context=ctx))


def rebuild_requests(
    run_dir: str | Path,
    *,
    checkpoints: str | None = None,
    executions: list[str] | None = None,
    include_logged: bool = False,
    server_kind: str | None = None,
    out: Path | None = None,
) -> RebuildSummary:
    """Rebuild the requests of a run's executions, fork branches and replays from its checkpoints
    into RUN_DIR/requests.rebuilt.jsonl (or `out`), replacing that file whole.

    `executions`: id prefixes to rebuild (default all); `include_logged`: rebuild those whose
    requests are in requests.jsonl too; `server_kind`: the server kind the run's client sent for,
    where the run's records cannot say (see `server_kind_of`)."""
    run_dir = Path(run_dir)
    if not (run_dir / SPEC_FILE).is_file() or not (run_dir / EXECUTIONS_FILE).is_file():
        raise InputError(f"{run_dir}: not a run directory (expected {SPEC_FILE} and {EXECUTIONS_FILE})")
    target = checkpoints or str(run_dir / CHECKPOINTS_FILE)
    if checkpoints is None and not (run_dir / CHECKPOINTS_FILE).is_file():
        raise InputError(f"{run_dir / CHECKPOINTS_FILE}: not found (the run has no checkpoints to rebuild from)")
    spec = load_spec(run_dir / SPEC_FILE, recorded=True)
    specs = condition_specs(spec)
    logged = (
        {str(r.get("execution_id")) for r in read_requests(run_dir / REQUESTS_FILE)}
        if (run_dir / REQUESTS_FILE).is_file()
        else set()
    )
    summary = RebuildSummary(out=out or run_dir / REBUILT_REQUESTS_FILE)
    records = _latest_records(run_dir)
    if executions:
        records = [r for r in records if any(r.execution_id.startswith(p) for p in executions)]
        if not records:
            raise InputError(f"--execution {' '.join(executions)}: no execution of {run_dir} matches")
    book, sink = ReplyBook(), RebuiltSink()
    clients: dict[str, Any] = {}
    nodes: dict[str, dict[str, Any]] = {}
    written: list[RebuiltLine] = []
    verdicts: dict[str, bool | None] = {}
    with open_checkpointer(target) as saver:
        for record in records:
            if record.status == "incomplete":
                summary.incomplete += 1
                continue
            if record.execution_id in logged and not include_logged:
                summary.logged += 1
                continue
            resolved = specs.get(condition_key(base_condition(record.condition)))
            if resolved is None:
                summary.failed[record.execution_id] = f"its condition {record.condition} is not in {SPEC_FILE}"
                continue
            model_key = resolved.model.model_dump_json()
            if model_key not in clients:
                kind = server_kind_of(resolved.model, run_dir, server_kind)
                clients[model_key] = replay_client(resolved.model, book, sink, kind)
            policy = resolved.agent.policy
            if policy not in nodes:
                found = resolve_policy(policy, policy_paths(resolved))
                # the agent's own graph reads the states, so each says which node ran next
                nodes[policy] = {
                    "decide": make_decide_node(found),
                    "answer": make_answer_node(found),
                    "graph": build_graph(found, saver),
                }
            history = thread_states(saver, record.execution_id, nodes[policy]["graph"])
            snapshots = list(reversed(original_path(list(history))))
            if not snapshots:
                summary.failed[record.execution_id] = "no saved states in the checkpoint store"
                continue
            replies = book.by_execution[record.execution_id] = RecordedReplies(
                [s for s in record.steps if is_model_step(s)]
            )
            start = len(sink.lines)
            try:
                client, at = clients[model_key], nodes[policy]
                run_blocking_core(lambda: _rebuild_one(record, resolved, client, snapshots, at))
                if replies.position != len(replies.steps):
                    raise RebuildError(
                        f"the rebuild made {replies.position} model calls, the record has {len(replies.steps)}"
                    )
            except (RebuildError, InputError) as exc:
                del sink.lines[start:]
                summary.failed[record.execution_id] = str(exc)
                continue
            finally:
                book.by_execution.pop(record.execution_id, None)
            mine = sink.lines[start:]
            verdict = None if not record.request_fingerprint else fingerprint(mine) == record.request_fingerprint
            verdicts[record.execution_id] = verdict
            summary.executions += 1
            summary.verified += verdict is True
            if verdict is False:
                summary.unverified.append(record.execution_id)
            written += mine
    summary.requests = len(written)
    _write(summary.out, written, verdicts)
    return summary


def _write(path: Path, lines: list[RebuiltLine], verdicts: dict[str, bool | None]) -> None:
    """Write the rebuilt lines whole (a temporary file renamed over the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    now = time.time()
    with tmp.open("w", encoding="utf-8") as fh:
        for line in lines:
            rebuilt = {
                "from": REBUILT_FROM,
                "checkpoint_id": line.checkpoint_id,
                "node": line.node,
                "verified": verdicts.get(line.execution_id),
            }
            row = {"time": now, "execution_id": line.execution_id, "endpoint": line.endpoint, "body": line.body}
            fh.write(json.dumps({**row, "rebuilt": rebuilt}, ensure_ascii=False, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
