"""Planted bugs ("mutants") that `branchpoint validate --mutants` must catch.

A mutant is a named, documented context manager that replaces exactly one pipeline function,
the one the real code path calls, by a buggy version of it, for as long as the block runs;
validate plants it around one stage of real studies (`study`) and reports which check caught
it. Nothing is copied: the studies run the same run / fork / evaluate / value code as always,
with one function wrong. Every binding of the function among the loaded `branchpoint` modules
is replaced (a name imported with `from … import f` is a binding of its own), and every one is
restored afterwards.

`stage` says which stage the function belongs to: `evaluate` mutants are planted around
metrics and value on a study already run and forked (the same run folder for each), `fork`
mutants around the run and the fork themselves. Each mutant's docstring-like `plants` says what
it breaks; docs/validate.md lists them with the check that caught each.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from branchpoint.defaults import RULE_JUDGE
from branchpoint.validation.canary import FORECASTER_VIEW

Stage = Literal["fork", "evaluate"]


def _resolve(target: str) -> tuple[Any, str, Any]:
    """(owner, attribute, raw value) of "package.module:name" or "package.module:Class.attr"."""
    module_name, _, qual = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *path, attr = qual.split(".")
    for part in path:
        owner = getattr(owner, part)
    raw = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
    return owner, attr, raw


@contextmanager
def patched(target: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """Replace `target` by `make(original)` wherever it is bound (see the module docstring)."""
    owner, attr, original = _resolve(target)
    replacement = make(original)
    sites: list[tuple[Any, str]] = [(owner, attr)]
    if not isinstance(owner, type):  # a module function: every module that imported it by name
        for name, module in list(sys.modules.items()):
            if module is None or module is owner or not name.startswith("branchpoint"):
                continue
            sites += [(module, n) for n, v in list(vars(module).items()) if v is original]
    for site, name in sites:
        setattr(site, name, replacement)
    try:
        yield
    finally:
        for site, name in sites:
            setattr(site, name, original)


@dataclass(frozen=True)
class Mutant:
    """A planted bug: its name, what it breaks, the one function it replaces and how."""

    name: str
    plants: str
    target: str
    stage: Stage
    make: Callable[[Any], Any]

    @contextmanager
    def planted(self) -> Iterator[None]:
        with patched(self.target, self.make):
            yield


def _unit(execution_id: str, salt: str) -> float:
    """A uniform number in [0, 1) fixed by a record's id: "at random", the same on every run."""
    return int.from_bytes(hashlib.sha256(f"{salt}:{execution_id}".encode()).digest()[:8]) / 2**64


def _swapped_roles(original: Callable[..., tuple[str, str]]) -> Callable[..., tuple[str, str]]:
    def of(self: Any, boundary_kind: str) -> tuple[str, str]:
        t, s = original(self, boundary_kind)
        return s, t

    return of


def _swapped_outcomes(original: Callable[..., Any]) -> Callable[..., Any]:
    def build_states(*args: Any, **kwargs: Any) -> Any:
        table = original(*args, **kwargs)
        return replace(table, think=table.search, search=table.think)

    return build_states


def _dropping(keep: Callable[[Any], bool]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def latest_records(records: Any) -> Any:
            return original([r for r in records if r.parent is None or keep(r)])

        return latest_records

    return make


def _random_branch_kept(r: Any) -> bool:
    return _unit(r.execution_id, "drop") >= 0.10


def _failed_search_kept(r: Any) -> bool:
    if r.branch != "SEARCH" or _unit(r.execution_id, "drop-failed") >= 0.10:
        return True
    from branchpoint.evaluation.judges import judge_records
    from branchpoint.evaluation.metrics import is_correct

    return is_correct(judge_records([r], RULE_JUDGE)[0], RULE_JUDGE)


def _one_draw(original: Any) -> property:
    def seed_key(self: Any) -> str:
        return str(original.fget(replace(self, repeat=0)))

    return property(seed_key)


def _leaking(original: Any) -> Any:
    """`DevView.of` with every row counted as a development row: the view then holds every
    state's outcomes, test rows' included (what a forecaster fitted on it can read)."""

    def of(cls: Any, states: Any, dev: np.ndarray) -> Any:
        return original.__func__(cls, states, np.ones(len(states), dtype=bool))

    return classmethod(of)


_LETTERS_ONLY = re.compile(r"[^a-z ]")


def _broken_normaliser(original: Callable[[str], str]) -> Callable[[str], str]:
    def normalize_answer(text: str) -> str:
        return original(_LETTERS_ONLY.sub("", text.lower()))

    return normalize_answer


def _stratum_dropped(original: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    def balanced_weights(strata: np.ndarray) -> np.ndarray:
        labels = sorted(set(np.asarray(strata).astype(str).tolist()))
        if len(labels) < 2:
            return original(strata)
        keep = np.asarray(strata).astype(str) != labels[-1]
        w = np.zeros(len(strata))
        w[keep] = original(np.asarray(strata)[keep])
        return w

    return balanced_weights


def _plug_in_pass_at_k(original: Callable[[int, int, int], float]) -> Callable[[int, int, int], float]:
    def pass_at_k(n: int, c: int, k: int) -> float:
        return 1.0 - (1.0 - c / n) ** k

    return pass_at_k


def _first_epoch_dropped(original: Callable[..., Any]) -> Callable[..., Any]:
    def epoch_groups(records: Any, judge: str) -> Any:
        return original([r for r in records if r.repeat != 0], judge)

    return epoch_groups


def _decision_one_late(original: Callable[..., str]) -> Callable[..., str]:
    def parent_decision(parent: Any, step: int) -> str:
        return original(parent, step + 1)

    return parent_decision


def _backwards_step(original: Callable[..., Any]) -> Callable[..., Any]:
    def _step(a: Any, b: Any, cfg: Any) -> Any:
        return original(b, a, cfg)

    return _step


def _cap_one_higher(original: Callable[[Any], dict[str, float]]) -> Callable[[Any], dict[str, float]]:
    def budget_row(record: Any) -> dict[str, float]:
        out = original(record)
        if "search_cap_limit" in out:
            out["search_cap_limit"] += 1.0
            out["search_cap_hit"] = float(out["search_cap_used"] >= out["search_cap_limit"])
        return out

    return budget_row


OUTCOMES = "branchpoint.evaluation.value.outcomes"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "role labels swapped",
        "the T / S role of each boundary kind is swapped (`Roles.of`): THINK branches are read as the "
        "SEARCH role and SEARCH as THINK (at a pending query SEARCH as T, STOP as S)",
        f"{OUTCOMES}:Roles.of",
        "evaluate",
        _swapped_roles,
    ),
    Mutant(
        "THINK/SEARCH outcomes swapped",
        "the state table keeps its role labels but holds each role's outcomes in the other's place "
        "(`build_states` returns the T outcomes as S and S as T)",
        f"{OUTCOMES}:build_states",
        "evaluate",
        _swapped_outcomes,
    ),
    Mutant(
        "10% of branches dropped",
        "the reader of branch records (`latest_records`) loses a random 10% of branches",
        f"{OUTCOMES}:latest_records",
        "evaluate",
        _dropping(_random_branch_kept),
    ),
    Mutant(
        "10% of failed SEARCH branches dropped",
        "the reader of branch records (`latest_records`) loses a random 10% of the SEARCH branches "
        "the rule judge scores as failed (an outcome-dependent loss, which biases the gain up)",
        f"{OUTCOMES}:latest_records",
        "evaluate",
        _dropping(_failed_search_kept),
    ),
    Mutant(
        "repeats collapsed to one draw",
        "every repeat of a (state, action) gets repeat 0's seed (`BranchTask.seed_key` without the "
        "repeat): m identical replies instead of m independent draws",
        "branchpoint.experiments.branch_planning:BranchTask.seed_key",
        "fork",
        _one_draw,
    ),
    Mutant(
        "test outcomes leaked to forecasters",
        "what forecasters are shown (`run_forecaster`) holds every row's outcomes as development "
        "outcomes, test rows included",
        FORECASTER_VIEW,
        "evaluate",
        _leaking,
    ),
    Mutant(
        "answer normalisation broken",
        "the judge's answer normaliser (`normalize_answer`) keeps ASCII letters and spaces only, so "
        "digits and accented letters vanish: a numeric gold answer ('1927') normalises to nothing "
        "and no answer matches it",
        "branchpoint.evaluation.answer_normalization:normalize_answer",
        "evaluate",
        _broken_normaliser,
    ),
    Mutant(
        "one stratum dropped",
        "stratum-balanced means (`balanced_weights`) give the last stratum weight 0: every estimate "
        "is the mean of the other strata only",
        "branchpoint.evaluation.value.scores:balanced_weights",
        "evaluate",
        _stratum_dropped,
    ),
    Mutant(
        "pass@k plug-in",
        "pass@k (`epochs.pass_at_k`) is the plug-in 1 − (1 − c/n)^k instead of the unbiased "
        "1 − C(n − c, k)/C(n, k): low wherever a question's epochs disagree",
        "branchpoint.evaluation.epochs:pass_at_k",
        "evaluate",
        _plug_in_pass_at_k,
    ),
    Mutant(
        "epoch 0 dropped",
        "the epoch reader (`epochs.epoch_groups`) numbers epochs from 1 and loses epoch 0 (repeat 0) of "
        "every question: each question has one epoch fewer",
        "branchpoint.evaluation.epochs:epoch_groups",
        "evaluate",
        _first_epoch_dropped,
    ),
    Mutant(
        "decisions read one search late",
        "decision quality reads the parent's decision at step k from its step k + 1 "
        "(`decisions.parent_decision`): at `initial`, an execution that searched once reads as one that "
        "answered (or was forced)",
        "branchpoint.evaluation.value.decisions:parent_decision",
        "evaluate",
        _decision_one_late,
    ),
    Mutant(
        "frontier steps taken backwards",
        "each step of the frontier's marginal ROI (`frontier._step`) goes from the larger cap (or "
        "effort) to the smaller: its accuracy change and added cost change sign",
        "branchpoint.evaluation.frontier:_step",
        "evaluate",
        _backwards_step,
    ),
    Mutant(
        "search cap counted one higher",
        "the budget accounting (`tally.budget_row`) reads each execution's search cap one higher than "
        "it was: no execution reaches it, and the use share is low",
        "branchpoint.evaluation.tally:budget_row",
        "evaluate",
        _cap_one_higher,
    ),
)


def mutant_named(name: str) -> Mutant:
    """The mutant called `name` (InputError listing the names when there is none)."""
    from branchpoint.errors import InputError

    for m in MUTANTS:
        if m.name == name:
            return m
    raise InputError(f"--mutant: unknown mutant {name!r} (known: {', '.join(m.name for m in MUTANTS)})")
