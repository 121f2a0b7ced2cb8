"""Agent state (LangGraph channels) and the run-time context passed to every node.

All channels are plain overwrite channels (no reducers): a node returns the whole new value.
That keeps a forked branch, seeded from a checkpoint's values, free of the original path's
entries (DESIGN: the reducer trap). Fork directives live in their own `directive` channel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from branchpoint.models.call import ModelClient
from branchpoint.tools.search import SearchTool

#: Legal action boundaries, recorded in the state's `boundary` channel at each checkpoint.
BOUNDARY_INITIAL = "initial"
BOUNDARY_PENDING = "pending_query"
BOUNDARY_AFTER_SEARCH = "after_search_{k}"
LEGAL_BOUNDARY_KINDS = ("initial", "after_search_k", "pending_query")


def boundary_kind(boundary: str | None) -> str | None:
    """`after_search_3` -> `after_search_k`; other legal kinds unchanged; None for non-boundaries."""
    if boundary is None:
        return None
    if boundary.startswith("after_search_"):
        return "after_search_k"
    return boundary if boundary in LEGAL_BOUNDARY_KINDS else None


class AgentState(TypedDict, total=False):
    """What the agent knows at a step; every field is JSON-serialisable so checkpoints are portable."""

    question_id: str
    question: str
    source: str
    evidence: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    pending: dict[str, Any] | None
    searches: int
    boundary: str | None
    status: Literal["ok", "malformed", "length"]
    final_answer: str | None
    directive: dict[str, Any] | None
    history: list[dict[str, str]]


def initial_state(
    question_id: str, question: str, source: str, history: list[dict[str, str]] | None = None
) -> AgentState:
    """The state before the first decision (the `initial` boundary).

    `history` holds earlier turns of a multi-turn conversation: [{"question", "answer"}, ...].
    """
    return AgentState(
        question_id=question_id,
        question=question,
        history=list(history or []),
        source=source,
        evidence=[],
        steps=[],
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

    `search` is None when the tool is not offered (the no-search base condition).
    """

    model: ModelClient
    search: SearchTool | None
    search_cap: int = 10
    max_tokens: int = 48
    answer_max_tokens: int = 48
    evidence_words: int = 60
    malformed_retries: int = 1
    prompt: str = "abstention"
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def offers_search(self) -> bool:
        """True when the search tool is offered and the cap allows at least one search."""
        return self.search is not None and self.search_cap > 0
