"""The truth of a fork study, from the simulator's generative parameters alone.

`study_truth` reads a run folder the way a bystander would: the raw lines of executions.jsonl
and forks.jsonl (plain JSON, not the pipeline's readers) and the states saved in the
checkpoints. It identifies every forked state by (parent execution, checkpoint id), counts the
branches forked from it per action, and gives each action's exact success probability
(`truth.TruthModel` or, for a user's completion policy, `policy_truth.PolicyTruth`). Strata and
answerability come from the question bank; the T / S roles are the study's design (THINK vs
SEARCH, STOP vs SEARCH at a pending query); success is the simulated world's own rule
(`behaviour.is_success`, `matching`). It imports nothing from `branchpoint.evaluation` or
`branchpoint.experiments` (an import-linter contract in pyproject.toml), so a defect in the
pipeline's state table, role labels, strata or judge cannot move the truth it is checked
against. Estimates are joined to it by state key.

It also holds, per question, the probabilities of the run's first decision (search, or a usable
answer: the decision-quality truth at `initial`), and the exact expectation of the minimal-search study's k* (over-searching study,
Appendix A.1): for a correct execution with k searches, k* is the smallest t < k whose THINK
branches from the state after t searches are correct in at least half of their m repeats, else
k. Each truncation point passes independently with P(Binomial(m, p_THINK) ≥ m/2)
(`vote_passes`), so E[k*] is a finite sum (`expected_min_searches`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from scipy import stats as sps

from branchpoint.checkpoints import list_boundaries, open_checkpointer
from branchpoint.checkpoints.values import checkpoint_values, state_reader
from branchpoint.datasets.questions import Question
from branchpoint.sim.behaviour import ABSTAIN_TEXT, is_success
from branchpoint.sim.matching import fold
from branchpoint.sim.truth import Value

#: The study's roles (T action, S action) at each boundary kind: the design of the
#: search-value study, not read from any pipeline table.
ROLES: dict[str, tuple[str, str]] = {
    "initial": ("THINK", "SEARCH"),
    "after_search_k": ("THINK", "SEARCH"),
    "pending_query": ("STOP", "SEARCH"),
}

#: The simulator's answers that say the answer is not known (the two-probe router's UNKNOWN,
#: which never agrees): its plain abstention and its Answer-Unknown one. Its false-premise and
#: clarifying abstentions are answers like any other there.
UNKNOWN_ANSWERS: frozenset[str] = frozenset({ABSTAIN_TEXT[None], ABSTAIN_TEXT["AU"]})


class Truth(Protocol):
    """What `study_truth` asks of a truth model (`TruthModel`, `PolicyTruth`)."""

    def continuation(
        self, state: Mapping[str, Any], action: str, *, search_budget: int = 3, switch_source: str | None = None
    ) -> Value: ...

    def natural(self, question: Question, search_cap: int, source: str) -> Value: ...

    def think_answers(self, state: Mapping[str, Any]) -> dict[str | None, float]: ...

    def passages_of(self, state: Mapping[str, Any]) -> tuple[Any, ...]: ...


def balanced_mean(values: np.ndarray, strata: Sequence[str]) -> float:
    """The mean of the per-stratum means of `values` (every stratum weighted equally): the
    functional every stratum-balanced estimate targets, computed here on the truth's strata."""
    values = np.asarray(values, dtype=float)
    labels = np.asarray(strata, dtype=object)
    means = [float(values[labels == s].mean()) for s in dict.fromkeys(labels.tolist())]
    return float(np.mean(means)) if means else float("nan")


def vote_passes(p: float, m: int) -> float:
    """P(at least half of m independent repeats succeed), each with probability p (0 when m = 0:
    a truncation point without branches never counts as reaching the correct outcome)."""
    if m <= 0:
        return 0.0
    return float(sps.binom.sf(math.ceil(m / 2) - 1, m, p))


def expected_min_searches(k: int, passes: Iterable[tuple[int, float]]) -> float:
    """E[min{t : point t passes} ∪ {k}] for independent truncation points (t, P(t passes)), t < k."""
    expected, none_yet = 0.0, 1.0
    for t, q in sorted(passes):
        if t >= k:
            continue
        expected += none_yet * q * t
        none_yet *= 1.0 - q
    return expected + none_yet * k


@dataclass
class StateTruth:
    """One forked state: its key, question, stratum, boundary kind and roles, and per forked
    action the branches in forks.jsonl, the exact success probability, expected tokens and a
    digest of what the simulator is shown (branches of equal content share their draws)."""

    key: tuple[str, str]
    question_id: str
    question: str
    stratum: str
    answerable: bool
    boundary: str
    repeats: dict[str, int]
    p: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, float] = field(default_factory=dict)
    content: dict[str, str] = field(default_factory=dict)
    agree_think: float = float("nan")  # P(two THINK answers agree: valid, not UNKNOWN, same folded)
    both_correct_think: float = float("nan")  # P(they agree and succeed)

    @property
    def roles(self) -> tuple[str, str]:
        return ROLES[self.boundary]

    @property
    def scored(self) -> bool:
        """Both roles forked with at least 2 repeats (what any unbiased square needs)."""
        t, s = self.roles
        return self.repeats.get(t, 0) >= 2 and self.repeats.get(s, 0) >= 2


@dataclass
class StudyTruth:
    """The truth of one study (see the module docstring)."""

    states: list[StateTruth]
    natural: dict[str, Value]  # question id -> the run's own execution: P(success), searches, tokens
    questions: dict[str, Question]  # the run's questions by id
    minimal: list[tuple[int, float]]  # per correct forked execution that searched: (k, E[k*])
    costs_modelled: bool = False
    #: question id -> (P(the run's execution first decides to search), P(it first answers, with a
    #: usable reply)); empty where the truth model does not give it (a user's policy)
    decisions: dict[str, tuple[float, float]] = field(default_factory=dict)

    def scored(self) -> list[StateTruth]:
        return [s for s in self.states if s.scored]

    def column(self, what: str, role: str | None = None) -> np.ndarray:
        """A column over the scored states: `p` / `tokens` / `m` of role "T" or "S", or an
        attribute (`agree_think`, `both_correct_think`)."""
        rows = self.scored()
        if role is None:
            return np.array([getattr(s, what) for s in rows], dtype=float)
        pick = 0 if role == "T" else 1
        if what == "m":
            return np.array([s.repeats[s.roles[pick]] for s in rows], dtype=float)
        return np.array([getattr(s, what)[s.roles[pick]] for s in rows], dtype=float)

    def strata(self) -> list[str]:
        return [s.stratum for s in self.scored()]

    def bal(self, values: np.ndarray) -> float:
        return balanced_mean(values, self.strata())


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a .jsonl file, one per non-empty line (nothing when it is absent)."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def latest(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per execution id, the last written (an append-only file after a retry)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        out[str(row["execution_id"])] = row
    return list(out.values())


def _kind(values: Mapping[str, Any]) -> str:
    """The boundary kind of a saved state, from its own `boundary` channel."""
    boundary = str(values.get("boundary") or "")
    if boundary == "pending_query":
        return "pending_query"
    return "after_search_k" if boundary.startswith("after_search") else "initial"


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _think_agreement(truth: Truth, values: Mapping[str, Any], question: Question) -> tuple[float, float]:
    """P(two independent THINK answers agree) and P(they agree and succeed)."""
    by_fold: dict[str, float] = {}
    success: dict[str, bool] = {}
    for answer, p in truth.think_answers(values).items():
        if answer is None or answer in UNKNOWN_ANSWERS or not fold(answer):
            continue
        key = fold(answer)
        by_fold[key] = by_fold.get(key, 0.0) + p
        success[key] = is_success(question, answer)
    return sum(p * p for p in by_fold.values()), sum(p * p for k, p in by_fold.items() if success[k])


def study_truth(
    run_dir: Path,
    truth: Truth,
    questions: Sequence[Question],
    *,
    checkpoints: str,
    search_budget: int,
    search_cap: int,
    source: str,
    switch_source: str | None = None,
    costs_modelled: bool = False,
) -> StudyTruth:
    """The truth of the fork study in `run_dir` (its checkpoints at `checkpoints`, a saver
    target): every forked state with its branches and exact values, the run's executions'
    exact values, and E[k*] of each correct forked execution that searched."""
    run_dir = Path(run_dir)
    bank = {q.id: q for q in questions}
    by_text = {" ".join(q.question.split()).casefold(): q for q in questions}
    executions = latest(r for r in read_lines(run_dir / "executions.jsonl") if r.get("parent") is None)
    unknown = sorted({str(r.get("question_id")) for r in executions} - set(bank))
    if unknown:
        raise KeyError(f"{run_dir}: executions of questions not in the simulator's question set: {unknown[:3]}")
    branches = [
        r
        for r in latest(read_lines(run_dir / "forks.jsonl"))
        if r.get("parent") is not None and r.get("branch") and r.get("status") != "incomplete"
    ]
    repeats: dict[tuple[str, str], dict[str, int]] = {}
    budgets: dict[tuple[str, str], int] = {}
    for r in branches:
        key = (str(r["parent"]["execution_id"]), str(r["parent"]["checkpoint_id"]))
        counts = repeats.setdefault(key, {})
        counts[r["branch"]] = counts.get(r["branch"], 0) + 1
        budget = (r.get("condition") or {}).get("fork.search_budget")
        if r["branch"] == "SEARCH" and isinstance(budget, int):
            budgets[key] = budget
    states: list[StateTruth] = []
    minimal: list[tuple[int, float]] = []
    with open_checkpointer(checkpoints) as saver:
        reader = state_reader(saver)
        for key, counts in repeats.items():
            values = checkpoint_values(saver, key[0], key[1], reader=reader)
            text = " ".join(str(values.get("question") or "").split()).casefold()
            q = by_text.get(text)
            if q is None:
                raise KeyError(f"state {key}: question not in the simulator's question set: {values.get('question')!r}")
            st = StateTruth(key, q.id, q.question, q.stratum or "(none)", q.answerable, _kind(values), dict(counts))
            shown = truth.passages_of(values)
            pending = (values.get("pending") or {}).get("text") if st.boundary == "pending_query" else None
            for action in counts:
                v = truth.continuation(
                    values, action, search_budget=budgets.get(key, search_budget), switch_source=switch_source
                )
                st.p[action], st.tokens[action] = v.p, v.tokens
                st.content[action] = _digest(
                    q.id, sorted(map(str, shown)), str(shown[-1:]), pending, values.get("source"), action
                )
            st.agree_think, st.both_correct_think = _think_agreement(truth, values, q)
            states.append(st)
        votes = {k: c.get("THINK", 0) for k, c in repeats.items()}
        forked = {k[0] for k in repeats}
        for r in executions:
            q = bank.get(str(r.get("question_id")))
            k = int(r.get("search_calls") or 0)
            eid = str(r["execution_id"])
            if eid not in forked or k == 0 or r.get("status") != "ok" or not is_success(q, r.get("final_answer")):
                continue
            passes = []
            for b in list_boundaries(saver, eid, reader):
                if b.kind in ("initial", "after_search_k") and b.searches < k:
                    values = checkpoint_values(saver, eid, b.checkpoint_id, reader=reader)
                    p_think = truth.continuation(values, "THINK").p
                    passes.append((b.searches, vote_passes(p_think, votes.get((eid, b.checkpoint_id), 0))))
            minimal.append((k, expected_min_searches(k, passes)))
    run_questions = {str(r["question_id"]): bank[str(r["question_id"])] for r in executions}
    natural = {qid: truth.natural(q, search_cap, source) for qid, q in sorted(run_questions.items())}
    first = getattr(truth, "first_decision", None)
    decisions = {qid: first(q, search_cap) for qid, q in sorted(run_questions.items())} if first else {}
    return StudyTruth(states, natural, run_questions, minimal, costs_modelled, decisions)
