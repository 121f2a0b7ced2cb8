"""Agent state (LangGraph channels) and the run-time context passed to every node.

Scalar channels are plain overwrite channels. The three lists that grow with every step, `steps`,
`evidence` and `transcript`, are LangGraph `DeltaChannel`s with an append reducer: a node returns only the
items it adds, and a checkpoint stores those new items (its writes) instead of the whole list
again, so checkpoint bytes grow linearly with the number of searches, not quadratically. The
full lists are rebuilt from the ancestors' writes when a checkpoint is read (`graph.get_state`;
see `branchpoint.checkpoints.values`). Forks are unaffected by the reducer:
a branch is a new thread whose input carries the checkpoint's full lists, appended to empty
ones (a reducer only merges updates within one thread, so a seeded branch is not merged twice).
Fork directives live in their own `directive` channel (`Directive`), pending actions in
`pending` (`Pending`).

Prompts are a pure function of this state (so a branch seeded from a checkpoint sends the request
its parent would have sent there; `tests/experiments/test_fork_invariant.py` checks it):
`transcript` holds what a prompt is built from (each executed search with the model turn that
asked for it: tool-call id, content, reasoning text; the self-evaluation verdict), `evidence` the
passages, `history` earlier turns. `steps` is the trace of this
thread's own calls: a fork branch starts it empty, so no prompt may be built from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langgraph.channels.delta import DeltaChannel

from branchpoint.agents.protocols import DecisionKind
from branchpoint.agents.transcript import ModelTurn
from branchpoint.models.call import BlockingModelClient, ModelClient
from branchpoint.tools.search import SearchTool
from branchpoint.traces import BOUNDARY_INITIAL, ForkAction


class Pending(TypedDict):
    """The action a policy decided and the graph has not carried out yet (the `pending` channel):
    `search` (its query in `text`) or `answer` (its answer in `text`), with the model turn that
    decided it (`turn`, for the transcript; absent when the decision made no model call)."""

    action: DecisionKind
    text: str
    turn: NotRequired[ModelTurn]


class Directive(TypedDict):
    """A fork branch's forced continuation (the `directive` channel, never the trace): the action
    (THINK, SEARCH, STOP or SWITCH), for SEARCH / SWITCH the `search_budget` of further searches,
    for SWITCH the `source` it switched to (see `branchpoint.checkpoints.fork.branch_input`)."""

    action: ForkAction
    search_budget: NotRequired[int]
    source: NotRequired[str]


class Budget(TypedDict):
    """What the model is told of its budgets (the `budget` channel, set in the initial state when
    the spec discloses a budget or sets a token budget; see `branchpoint.agents.disclosure`): the
    disclosure mode, the execution's search cap and its token budget. A fork branch inherits it, so
    it is told what its parent was told (not the branch's own search budget)."""

    disclosure: str
    search_cap: int
    token_budget: int | None


def append_items(current: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """The `steps` / `evidence` reducer: append each write's items, in order (batching-invariant,
    as `DeltaChannel` requires)."""
    return [*current, *(item for write in writes for item in write)]


class AgentState(TypedDict, total=False):
    """What the agent knows at a step; every field is JSON-serialisable so checkpoints are portable."""

    question_id: str
    question: str
    source: str
    evidence: Annotated[list[dict[str, Any]], DeltaChannel(append_items)]
    steps: Annotated[list[dict[str, Any]], DeltaChannel(append_items)]
    transcript: Annotated[list[dict[str, Any]], DeltaChannel(append_items)]
    pending: Pending | None
    searches: int
    boundary: str | None
    status: Literal["ok", "malformed", "length"]
    final_answer: str | None
    directive: Directive | None
    history: list[dict[str, str]]
    #: Disclosed budgets (absent: nothing disclosed, no token budget; see `Budget`).
    budget: Budget | None
    #: Generated tokens so far on this execution's path (written only under a token budget).
    generated_tokens: int


def initial_state(
    question_id: str,
    question: str,
    source: str,
    history: list[dict[str, str]] | None = None,
    budget: Budget | None = None,
) -> AgentState:
    """The state before the first decision (the `initial` boundary).

    `history` holds earlier turns of a multi-turn conversation: [{"question", "answer"}, ...].
    `budget` (see `Budget`) is stored only when given, and `generated_tokens` only under a token
    budget, so states of specs that use neither are what they were before these channels.
    """
    extra = AgentState()
    if budget is not None:
        extra["budget"] = budget
        if budget.get("token_budget") is not None:
            extra["generated_tokens"] = 0
    return AgentState(
        **extra,
        question_id=question_id,
        question=question,
        history=list(history or []),
        source=source,
        evidence=[],
        steps=[],
        transcript=[],
        pending=None,
        searches=0,
        boundary=BOUNDARY_INITIAL,
        status="ok",
        final_answer=None,
        directive=None,
    )


@dataclass
class AgentContext:
    """Run-time context for the nodes (not checkpointed): the model, the search tool and limits.

    `search` is None when the tool is not offered (the no-search base condition). `model` is a
    full `ModelClient` in the runner; a client with the blocking calls only serves too (the
    policies' model helpers fall back to them, see `models.call.acomplete`).
    """

    model: ModelClient | BlockingModelClient
    search: SearchTool | None
    search_cap: int = 10
    max_tokens: int = 48
    answer_max_tokens: int = 48
    evidence_words: int = 60
    malformed_retries: int = 1
    prompt: str = "abstention"
    options: dict[str, Any] = field(default_factory=dict)
    #: How the tagged policy sends its transcript: `chat` or `searchr1` (`prompts.TAGGED_PROTOCOLS`).
    protocol: str = "chat"
    #: Most generated tokens per execution (None: no token budget; see `agents.budget`).
    token_budget: int | None = None

    @property
    def offers_search(self) -> bool:
        """True when the search tool is offered and the cap allows at least one search."""
        return self.search is not None and self.search_cap > 0
