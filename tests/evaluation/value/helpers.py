"""Builders for hand-made states and fork records (no agent, no model)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.traces import ExecutionRecord, Judgment


def role(
    ys: Sequence[Sequence[float]],
    tokens: Sequence[Sequence[float]] | None = None,
    answers: Sequence[Sequence[str | None]] | None = None,
    status: Sequence[Sequence[str]] | None = None,
) -> RoleOutcomes:
    tokens = tokens or [[100.0] * len(y) for y in ys]
    answers = answers or [[f"a{v}" for v in y] for y in ys]
    return RoleOutcomes(
        [np.asarray(y, dtype=float) for y in ys],
        [np.asarray(t, dtype=float) for t in tokens],
        [list(a) for a in answers],
        [list(s) for s in status] if status is not None else None,
    )


def make_states(
    think: Sequence[Sequence[float]],
    search: Sequence[Sequence[float]],
    *,
    strata: Sequence[str] | None = None,
    components: Sequence[str] | None = None,
    think_tokens=None,
    search_tokens=None,
    think_answers=None,
    kinds=None,
    think_status=None,
) -> StateTable:
    """A state table from per-state reward lists (T and S), optional strata / components / tokens."""
    n = len(think)
    return StateTable(
        keys=[(f"p{i}", f"c{i}") for i in range(n)],
        question_id=[f"q{i}" for i in range(n)],
        question=[f"question {i}?" for i in range(n)],
        stratum=np.array(list(strata or ["s"] * n), dtype=object),
        component=np.array(list(components or [f"q{i}" for i in range(n)]), dtype=object),
        boundary=["initial"] * n,
        boundary_kind=np.array(list(kinds or ["initial"] * n), dtype=object),
        t_action=["THINK"] * n,
        s_action=["SEARCH"] * n,
        prefix_steps=[0] * n,
        search_budget=[3] * n,
        think=role(think, think_tokens, think_answers, think_status),
        search=role(search, search_tokens),
    )


def fork_record(
    parent: str,
    checkpoint: str,
    branch: str,
    repeat: int,
    *,
    label: str = "CORRECT",
    answer: str = "x",
    boundary: str = "initial",
    status: str = "ok",
    question_id: str | None = None,
    stratum: str | None = None,
    support_group: str | None = None,
    tokens: tuple[int, int] = (100, 10),
    gold: list[str] | None = None,
    prefix_steps: int = 0,
    condition: dict | None = None,
) -> ExecutionRecord:
    """One forked record with a `given` answer label."""
    return ExecutionRecord.model_validate(
        dict(
            execution_id=f"{parent}-{checkpoint}-{branch}-{repeat}",
            run_id="run",
            question_id=question_id or parent,
            condition=condition or {},
            question=f"question of {parent}?",
            answerable=True,
            gold_answers=gold or ["x"],
            stratum=stratum,
            support_group=support_group,
            parent={"execution_id": parent, "checkpoint_id": checkpoint, "boundary": boundary},
            branch=branch,
            repeat=repeat,
            status=status,
            final_answer=answer,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            judgments=[Judgment(judge="human", kind="answer", label=label)],
            prefix={"steps": prefix_steps, "search_calls": 0, "input_tokens": 0, "output_tokens": 0},
        )
    )
