"""The fork plan: which saved states to fork, into which actions, how often (the spec's `fork`
section, and what `branchpoint fork` builds from its options)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypedDict

from pydantic import BaseModel, Field

from branchpoint.defaults import DEFAULT_JUDGE, FORK_TEMPERATURE, FORK_TOP_P
from branchpoint.errors import InputError
from branchpoint.traces import BOUNDARY_KINDS, FORK_ACTIONS


class Sampling(TypedDict):
    """One branch's sampling settings, the keyword arguments of `ModelClient.with_sampling`."""

    temperature: float
    top_p: float
    seed: int


class ForkPlan(BaseModel):
    """What to fork: which boundaries (or saved states by id), which actions, how many repeats,
    which budget, and how repeats sample.

    Repeats estimate success rates, so they are independent draws: branches sample at
    `temperature` / `top_p` (default: the search-value study's actor settings, 0.6 / 0.95), each
    branch with its own seed derived from `seed` and its id (recorded in the branch record).
    More than one repeat at temperature 0 would give copies of one draw and is refused unless
    `allow_identical_repeats` is set.
    """

    model_config = {"extra": "forbid"}

    boundaries: list[str] = Field(default_factory=lambda: list(BOUNDARY_KINDS))
    actions: list[str] = Field(default_factory=lambda: ["THINK", "SEARCH"])
    repeats: int = Field(4, ge=1)
    search_budget: int = Field(3, ge=1)
    switch_source: str | None = None
    executions: list[str] | None = Field(None, description="Execution id prefixes; default: all.")
    checkpoints: list[str] | None = Field(
        None,
        description="Saved states to fork, by checkpoint id (or its unique start or end); default: every selected boundary.",
    )
    minimal_search: bool = False
    concurrency: int = Field(4, ge=1)
    judge: str = DEFAULT_JUDGE
    temperature: float = Field(FORK_TEMPERATURE, ge=0.0, description="Sampling temperature of every branch.")
    top_p: float = Field(FORK_TOP_P, gt=0.0, le=1.0, description="Nucleus sampling of every branch.")
    seed: int = Field(0, description="Base of the per-branch seeds.")
    allow_identical_repeats: bool = Field(
        False,
        description="Allow repeats > 1 at temperature 0 (identical draws, e.g. to measure server nondeterminism).",
    )

    def check(self, spec_file: str | None = None) -> None:
        """Refuse unknown boundary kinds and actions, and copies posing as repeats, before any work.

        The message names the command's flags, or with `spec_file` the spec's `fork:` fields."""
        name: Callable[[str], str]  # a field's name as the user wrote it (a flag, or the spec's key)
        if spec_file is None:
            where, name = "", lambda f: "--" + f.replace("_", "-")
            fix = "Sample (e.g. --temperature 0.6 --top-p 0.95, the default), use --repeats 1, or pass --allow-identical-repeats."
        else:
            where, name = f"{spec_file}: ", lambda f: f"fork.{f}"
            fix = (
                "Sample (e.g. fork.temperature: 0.6 and fork.top_p: 0.95, the defaults), set fork.repeats: 1, "
                "or fork.allow_identical_repeats: true."
            )
        for kind in self.boundaries:
            if kind not in BOUNDARY_KINDS:
                raise InputError(
                    f"{where}{name('boundaries')}: unknown kind {kind!r} (expected {', '.join(BOUNDARY_KINDS)})"
                )
        for action in self.actions:
            if action not in FORK_ACTIONS:
                raise InputError(
                    f"{where}{name('actions')}: unknown action {action!r} (expected {', '.join(FORK_ACTIONS)})"
                )
        if self.repeats > 1 and self.temperature == 0 and not self.allow_identical_repeats:
            raise InputError(
                f"{where}{name('repeats')} {self.repeats} at {name('temperature')} 0: repeats estimate success "
                f"rates, but at temperature 0 every repeat is a copy of the first draw. {fix}"
            )

    def sampling(self, branch_key: str) -> Sampling:
        """The sampling settings of one branch: the plan's temperature and top-p, and a seed that
        is a function of the plan's seed and the branch's key (its state, action and repeat:
        distinct per repeat, the same on rerun and when the study is run afresh)."""
        digest = hashlib.sha256(f"{self.seed}:{branch_key}".encode()).digest()
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": int.from_bytes(digest[:4], "big") >> 1,
        }
