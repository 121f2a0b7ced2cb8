"""The fork plan: which saved states to fork, into which actions, how often (a spec section too)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from branchpoint.checkpoints.fork import FORK_ACTIONS
from branchpoint.errors import InputError

BOUNDARY_KINDS = ("initial", "after_search_k", "pending_query")


class ForkPlan(BaseModel):
    """What to fork: which boundaries, which actions, how many repeats, which budget."""

    model_config = {"extra": "forbid"}

    boundaries: list[str] = Field(default_factory=lambda: list(BOUNDARY_KINDS))
    actions: list[str] = Field(default_factory=lambda: ["THINK", "SEARCH"])
    repeats: int = Field(4, ge=1)
    search_budget: int = Field(3, ge=1)
    switch_source: str | None = None
    executions: list[str] | None = Field(None, description="Execution id prefixes; default: all.")
    minimal_search: bool = False
    concurrency: int = Field(4, ge=1)
    judge: str = "rule"

    def check(self) -> None:
        """Refuse unknown boundary kinds and actions before any work."""
        for kind in self.boundaries:
            if kind not in BOUNDARY_KINDS:
                raise InputError(f"--boundaries: unknown kind {kind!r} (expected {', '.join(BOUNDARY_KINDS)})")
        for action in self.actions:
            if action not in FORK_ACTIONS:
                raise InputError(f"--actions: unknown action {action!r} (expected {', '.join(FORK_ACTIONS)})")
