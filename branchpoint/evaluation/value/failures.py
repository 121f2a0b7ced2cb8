"""Failure-rate tables: how many scored executions of each action were valid, malformed or cut
off by the length limit, per stratum and per boundary kind, with intervals.

Search-value study, Appendix A ("Its 640 test outputs contain 610 valid answers, nine length
failures and 21 malformed outputs; these failure statuses receive zero reward"), Appendix D
("1,518 valid outputs, sixteen length failures and two malformed outputs"), Appendix E ("1,279
valid outputs, 244 invalid outputs and thirteen length failures") and Appendix C ("Missing
transport remains incomplete until recovery"). A record's `status` says which: `ok` (valid),
`malformed` (no protocol parses the output), `length` (cut off). `incomplete` records (transport
failures) are never scored: they are counted apart (`incomplete_records`, all records read),
never as failures of an action.

Per role and group: counts of each status over the test states' repeats, and each failure
share as the stratum-balanced mean over states of the share of that state's repeats (so it
weighs states like every other number of value.json), with a support-component interval from
the study's resamples; `failed_reward` is the mean reward of the failed repeats (0 under the
study's rule: failures score zero).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.scores import balanced_mean

FAILURES: tuple[str, ...] = ("malformed", "length")


def status_shares(out: RoleOutcomes) -> dict[str, np.ndarray]:
    """Per state, the share of its repeats with each failure status, and with any (`failed`)."""
    shares: dict[str, np.ndarray] = {}
    n = len(out.y)
    statuses = [out.statuses(i) for i in range(n)]
    for kind in FAILURES:
        shares[kind] = np.array([sum(s == kind for s in st) / len(st) for st in statuses], dtype=float)
    shares["failed"] = np.array([sum(s != "ok" for s in st) / len(st) for st in statuses], dtype=float)
    return shares


def status_counts(out: RoleOutcomes, rows: np.ndarray) -> dict[str, Any]:
    """Counts of executions by status over `rows`, and the mean reward of the failed ones."""
    counts = {"executions": 0, "ok": 0, "malformed": 0, "length": 0, "other": 0}
    failed_rewards: list[float] = []
    for i in np.flatnonzero(rows):
        for st, y in zip(out.statuses(int(i)), out.y[int(i)].tolist()):
            counts["executions"] += 1
            counts[st if st in counts else "other"] += 1
            if st != "ok":
                failed_rewards.append(float(y))
    return {**counts, "failed_reward": float(np.mean(failed_rewards)) if failed_rewards else None}


def failure_rates(
    states: StateTable, *, incomplete: int, resamples: int, seed: int, level: float, num: Any
) -> dict[str, Any]:
    """value.json's `failure_rates`: per role (T, S) the rows `all`, `stratum:<s>`,
    `boundary:<kind>`, each with counts and failure shares (interval on `all`, from the same
    component resamples as the other intervals)."""
    roles = {"T": states.think, "S": states.search}
    actions = {"T": sorted(set(states.t_action)), "S": sorted(set(states.s_action))}
    strata = np.asarray(states.stratum).astype(str)
    kinds = np.asarray(states.boundary_kind).astype(str)
    groups: dict[str, np.ndarray] = {"all": np.ones(len(states), dtype=bool)}
    groups.update({f"stratum:{s}": strata == s for s in sorted(set(strata.tolist()))})
    groups.update({f"boundary:{k}": kinds == k for k in sorted(set(kinds.tolist()))})
    out: dict[str, Any] = {"incomplete_records": incomplete, "level": level, "by_role": {}}
    for role, outcomes in roles.items():
        shares = status_shares(outcomes)
        names = [*FAILURES, "failed"]
        cols = np.column_stack([shares[k] for k in names])
        boot = (
            bootstrap_means(cols, states.component, states.stratum, resamples=resamples, seed=seed)
            if resamples > 0 and len(states)
            else None
        )
        rows: dict[str, Any] = {}
        for gname, mask in groups.items():
            if not mask.any():
                continue
            point = balanced_mean(cols[mask], states.stratum[mask])
            entry: dict[str, Any] = status_counts(outcomes, mask)
            for j, k in enumerate(names):
                interval = None
                if gname == "all" and boot is not None:
                    lo, hi = percentile_interval(boot[:, j], level)
                    interval = [num(lo), num(hi)]
                entry[f"{k}_rate"] = {"value": num(point[j]), "interval": interval}
            rows[gname] = entry
        out["by_role"][role] = {"actions": actions[role], "rows": rows}
    return out
