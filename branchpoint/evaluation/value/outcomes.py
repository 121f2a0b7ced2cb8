"""Outcomes of forked executions, grouped into states: the table every search-value score reads.

A *state* x is one saved checkpoint of one parent execution: the forked records that share
`parent.execution_id` and `parent.checkpoint_id`. Each state has two *roles*:

- T (the THINK role): THINK at `initial` / `after_search_k`, STOP at `pending_query`;
- S (the SEARCH role): SEARCH at every boundary kind (SWITCH instead at `pending_query` when
  asked: `Roles(pending=("STOP", "SWITCH"))`).

Per role the repeated executions give rewards Y_1..Y_m in [0, 1] and token costs T_1..T_m (the
branch's own input + output tokens, not the prefix it inherited). Which records count:

- `incomplete` records (transport failures) are excluded and counted, never scored as wrong;
- when one `execution_id` appears twice (an append-only file after a retry) the last one wins;
- records whose branch plays no role at their boundary (e.g. SWITCH with the default roles) are
  counted as `other_action`;
- a state is *scored* only when both roles have at least 2 repeats: the unbiased squares below
  (U-statistics) need pairs. States with a missing role or a single repeat are excluded from
  every statistic (Brier included, so all numbers describe one population) and counted.

Rewards are pluggable (`@reward("name")` in `rewards`), bounded in [0, 1]: `correct` (the
default) and `set_f1` (collection tasks).

Support components: questions that share a supporting page (the record's `support_group`, and
every page of a `support` list when a foreign trace carries one) are joined into one component
by union-find; a question without support information is its own component. Bootstrap
resamples and the dev/test split move whole components.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.errors import InputError
from branchpoint.evaluation.value.rewards import JudgingCount, get_reward
from branchpoint.traces import BOUNDARY_KINDS, BOUNDARY_PENDING, LEGAL_ACTIONS, ExecutionRecord, collapse_search_count

NO_STRATUM = "(none)"


# --------------------------------------------------------------------------------------------
# Roles
# --------------------------------------------------------------------------------------------

PENDING_ACTIONS = LEGAL_ACTIONS[BOUNDARY_PENDING]


@dataclass(frozen=True)
class Roles:
    """Which branch plays T (THINK role) and S (SEARCH role) at each boundary kind.

    `initial` and `after_search_k`: T = THINK, S = SEARCH. `pending_query`: `pending`, default
    (STOP, SEARCH); ("STOP", "SWITCH") or ("SEARCH", "SWITCH") compare other pairs.
    """

    pending: tuple[str, str] = ("STOP", "SEARCH")

    def __post_init__(self) -> None:
        t, s = self.pending
        if t not in PENDING_ACTIONS or s not in PENDING_ACTIONS or t == s:
            raise InputError(
                f"--pending-roles: expected two different actions of {', '.join(PENDING_ACTIONS)} "
                f"(T role first), got {t},{s}"
            )

    def of(self, boundary_kind: str) -> tuple[str, str]:
        """(T action, S action) at a boundary kind."""
        return self.pending if boundary_kind == BOUNDARY_PENDING else ("THINK", "SEARCH")

    def table(self) -> dict[str, list[str]]:
        """[T action, S action] at every boundary kind, as value.json and the viewer show them."""
        return {kind: list(self.of(kind)) for kind in BOUNDARY_KINDS}


# --------------------------------------------------------------------------------------------
# Support components
# --------------------------------------------------------------------------------------------


def support_components(records: Iterable[ExecutionRecord]) -> dict[str, str]:
    """Question id -> component id, joining questions that share a supporting page (union-find).

    Pages come from `support_group` and, when a record carries one, its `support` list. The
    component id is the smallest question id in it, so it is stable across runs.
    """
    parent: dict[str, str] = {}

    def find(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for r in records:
        q = f"q:{r.question_id}"
        parent.setdefault(q, q)
        pages = set()
        if r.support_group:
            pages.add(r.support_group)
        extra = getattr(r, "support", None)
        if isinstance(extra, list):
            pages.update(str(p) for p in extra if p)
        for page in pages:
            p = f"p:{page}"
            parent.setdefault(p, p)
            union(q, p)
    members: dict[str, list[str]] = {}
    for node in parent:
        if node.startswith("q:"):
            members.setdefault(find(node), []).append(node[2:])
    return {q: min(qs) for qs in members.values() for q in qs}


# --------------------------------------------------------------------------------------------
# The state table
# --------------------------------------------------------------------------------------------


@dataclass
class RoleOutcomes:
    """One role's repeats at every scored state, ordered by `repeat`: rewards, tokens, answers,
    and each repeat's record status (`ok`, `malformed`, `length`; None when not known: treated
    as `ok`)."""

    y: list[np.ndarray]
    tokens: list[np.ndarray]
    answers: list[list[str | None]]
    status: list[list[str]] | None = None
    m: np.ndarray = field(init=False)
    sum_y: np.ndarray = field(init=False)
    sum_y2: np.ndarray = field(init=False)
    mean_y: np.ndarray = field(init=False)
    mean_tokens: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.m = np.array([len(v) for v in self.y], dtype=float)
        self.sum_y = np.array([v.sum() for v in self.y], dtype=float)
        self.sum_y2 = np.array([(v * v).sum() for v in self.y], dtype=float)
        self.mean_y = self.sum_y / self.m
        self.mean_tokens = np.array([t.mean() for t in self.tokens], dtype=float)

    def subset(self, idx: np.ndarray) -> RoleOutcomes:
        return RoleOutcomes(
            [self.y[i] for i in idx],
            [self.tokens[i] for i in idx],
            [self.answers[i] for i in idx],
            [self.status[i] for i in idx] if self.status is not None else None,
        )

    def statuses(self, i: int) -> list[str]:
        """The record status of each repeat at state i (`ok` when unknown)."""
        return list(self.status[i]) if self.status is not None else ["ok"] * len(self.y[i])


@dataclass
class StateCounts:
    """What was read and what was left out, for value.json's `states` block."""

    records: int = 0
    incomplete: int = 0
    other_action: int = 0
    groups: int = 0
    missing_role: int = 0
    few_repeats: int = 0
    judged_records: int = 0
    judge_calls: int = 0


@dataclass
class PublicColumns:
    """The per-state columns that hold no outcome (row i of every column is state i): what a
    forecaster may read at every row, shared by `StateTable` and its development view."""

    keys: list[tuple[str, str]]
    question_id: list[str]
    question: list[str]
    stratum: np.ndarray  # str labels, NO_STRATUM when the record has none
    component: np.ndarray  # str component ids (see `support_components`)
    boundary: list[str]
    boundary_kind: np.ndarray
    t_action: list[str]
    s_action: list[str]
    prefix_steps: list[int | None]
    search_budget: list[int | None]

    def __len__(self) -> int:
        return len(self.keys)

    def index(self) -> dict[tuple[str, str], int]:
        """(parent execution id, checkpoint id) -> row."""
        return {k: i for i, k in enumerate(self.keys)}


@dataclass
class StateTable(PublicColumns):
    """The scored states (rows) with both roles' outcomes; row i of every array is state i.

    Public columns (`PublicColumns`) and `features`; outcome columns: `think`, `search`.
    Forecasters never get this table: they get its development view (`dev_view.DevView`:
    public columns of every row, outcomes of dev rows only).
    """

    think: RoleOutcomes
    search: RoleOutcomes
    counts: StateCounts = field(default_factory=StateCounts)
    excluded_keys: set[tuple[str, str]] = field(default_factory=set)
    #: public per-state feature matrices a study attaches (rows = states), e.g. "public_prefix"
    #: (`features.prefix_features`) or "minilm" (frozen text embeddings)
    features: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def dbar(self) -> np.ndarray:
        """Δ̄ = Ȳ_S − Ȳ_T per state."""
        return cast(np.ndarray, self.search.mean_y - self.think.mean_y)

    def subset(self, mask: np.ndarray) -> StateTable:
        """The rows where `mask` is true (counts kept)."""
        return self.rows(np.flatnonzero(mask))

    def rows(self, idx: np.ndarray) -> StateTable:
        """The rows `idx`, in that order (counts and excluded keys kept)."""
        idx = np.asarray(idx, dtype=int)
        pick: Callable[[Sequence[Any]], list[Any]] = lambda seq: [seq[i] for i in idx]
        return StateTable(
            keys=pick(self.keys),
            question_id=pick(self.question_id),
            question=pick(self.question),
            stratum=self.stratum[idx],
            component=self.component[idx],
            boundary=pick(self.boundary),
            boundary_kind=self.boundary_kind[idx],
            t_action=pick(self.t_action),
            s_action=pick(self.s_action),
            prefix_steps=pick(self.prefix_steps),
            search_budget=pick(self.search_budget),
            think=self.think.subset(idx),
            search=self.search.subset(idx),
            counts=self.counts,
            excluded_keys=self.excluded_keys,
            features={k: v[idx] for k, v in self.features.items()},
        )


def _prefix_steps(record: ExecutionRecord) -> int | None:
    prefix = getattr(record, "prefix", None)
    steps = prefix.get("steps") if isinstance(prefix, dict) else None
    return steps if isinstance(steps, int) else None


def latest_records(records: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
    """One record per execution id, the last in file order, in first-seen order."""
    latest: dict[str, ExecutionRecord] = {}
    for r in records:
        latest[r.execution_id] = r
    return list(latest.values())


def build_states(
    records: Sequence[ExecutionRecord],
    *,
    reward_name: str = "correct",
    judge: str = DEFAULT_JUDGE,
    roles: Roles = Roles(),
) -> StateTable:
    """Group forked records into states and compute each repeat's reward (see the module doc)."""
    counts = StateCounts()
    rows = latest_records(r for r in records if r.parent is not None and r.branch is not None)
    counts.records = len(rows)
    live = [r for r in rows if r.status != "incomplete"]
    counts.incomplete = len(rows) - len(live)
    kept = []
    for r in live:
        assert r.parent is not None  # rows are forked records
        t, s = roles.of(collapse_search_count(r.parent.boundary))
        if r.branch in (t, s):
            kept.append(r)
        else:
            counts.other_action += 1
    fn = get_reward(reward_name)
    judging = JudgingCount()
    with_count: Callable[..., np.ndarray] = fn  # a reward may also take `count=` (looked up below)
    y = with_count(kept, judge, count=judging) if "count" in inspect.signature(fn).parameters else fn(kept, judge)
    y = np.asarray(y, dtype=float)
    if y.shape != (len(kept),) or np.any(~np.isfinite(y)) or np.any((y < 0) | (y > 1)):
        raise InputError(f'reward "{reward_name}" must give one number in [0, 1] per record')
    counts.judged_records, counts.judge_calls = judging.records, judging.judged
    components = support_components(kept)

    groups: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(kept):
        assert r.parent is not None  # rows are forked records
        groups.setdefault((r.parent.execution_id, r.parent.checkpoint_id), []).append(i)
    counts.groups = len(groups)
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "keys",
            "qid",
            "question",
            "stratum",
            "component",
            "boundary",
            "kind",
            "t",
            "s",
            "prefix",
            "budget",
        )
    }
    roles_out: dict[str, dict[str, list[Any]]] = {r: {"y": [], "tok": [], "ans": [], "st": []} for r in ("T", "S")}
    excluded: set[tuple[str, str]] = set()
    for key, idx in groups.items():
        first = kept[idx[0]]
        assert first.parent is not None  # rows are forked records
        kind = collapse_search_count(first.parent.boundary)
        t_action, s_action = roles.of(kind)
        by_role = {
            "T": sorted((i for i in idx if kept[i].branch == t_action), key=lambda i: kept[i].repeat),
            "S": sorted((i for i in idx if kept[i].branch == s_action), key=lambda i: kept[i].repeat),
        }
        if not by_role["T"] or not by_role["S"]:
            counts.missing_role += 1
            excluded.add(key)
            continue
        if len(by_role["T"]) < 2 or len(by_role["S"]) < 2:
            counts.few_repeats += 1
            excluded.add(key)
            continue
        for role, members in by_role.items():
            roles_out[role]["y"].append(y[members])
            roles_out[role]["tok"].append(
                np.array([kept[i].input_tokens + kept[i].output_tokens for i in members], dtype=float)
            )
            roles_out[role]["ans"].append([kept[i].final_answer for i in members])
            roles_out[role]["st"].append([kept[i].status for i in members])
        search_rec = kept[by_role["S"][0]]
        budget = search_rec.condition.get("fork.search_budget")
        cols["keys"].append(key)
        cols["qid"].append(first.question_id)
        cols["question"].append(first.question)
        cols["stratum"].append(first.stratum or NO_STRATUM)
        cols["component"].append(components[first.question_id])
        cols["boundary"].append(first.parent.boundary)
        cols["kind"].append(kind)
        cols["t"].append(t_action)
        cols["s"].append(s_action)
        cols["prefix"].append(_prefix_steps(first))
        cols["budget"].append(int(budget) if isinstance(budget, int) else None)
    outcomes_of: Callable[[str], RoleOutcomes] = lambda r: RoleOutcomes(
        roles_out[r]["y"], roles_out[r]["tok"], roles_out[r]["ans"], roles_out[r]["st"]
    )
    return StateTable(
        keys=cols["keys"],
        question_id=cols["qid"],
        question=cols["question"],
        stratum=np.array(cols["stratum"], dtype=object),
        component=np.array(cols["component"], dtype=object),
        boundary=cols["boundary"],
        boundary_kind=np.array(cols["kind"], dtype=object),
        t_action=cols["t"],
        s_action=cols["s"],
        prefix_steps=cols["prefix"],
        search_budget=cols["budget"],
        think=outcomes_of("T"),
        search=outcomes_of("S"),
        counts=counts,
        excluded_keys=excluded,
    )


def dev_split(states: StateTable, fraction: float, seed: int = 0) -> np.ndarray:
    """Boolean mask of development rows: `round(fraction · C)` of the C support components,
    picked by a seeded permutation of the sorted component ids (at least one component when
    fraction > 0, and at least one left for test when C ≥ 2). fraction 0 → no dev rows."""
    if not 0.0 <= fraction < 1.0:
        raise InputError(f"--dev-split must be in [0, 1), got {fraction}")
    comps = sorted(set(states.component.tolist()))
    if fraction == 0 or not comps:
        return np.zeros(len(states), dtype=bool)
    n_dev = round(fraction * len(comps))
    n_dev = max(1, min(n_dev, len(comps) - 1)) if len(comps) >= 2 else 0
    order = np.random.default_rng(seed).permutation(len(comps))
    dev_comps = {comps[i] for i in order[:n_dev]}
    return np.array([c in dev_comps for c in states.component], dtype=bool)
