"""Conditions of a sweep that sent the model exactly the same requests (a silent no-op axis).

Each execution record carries `request_fingerprint`, a hash of the request bodies it sent
(`branchpoint.models.request_fingerprint`). Two conditions whose executions sent identical
requests for every question they share changed nothing the model received: their rows in any
table differ only by label (and, with a sampling model, by chance). This module finds such
groups and words the warning that the run summary, `evaluate`'s table and the report print.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from branchpoint.evaluation.conditions import condition_label, natural_condition_key
from branchpoint.traces import ExecutionRecord


def _value(value: Any) -> str:
    """A setting's value as the warnings print it: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def identical_conditions(records: Iterable[ExecutionRecord]) -> list[dict[str, Any]]:
    """Groups of two or more conditions whose executions sent identical requests.

    Only the run's own executions count (no fork branches, no replays); the last record of an
    execution wins. A condition is compared only when each of its executions has a fingerprint,
    and two conditions only when they cover the same questions and epochs (`repeat`), compared
    epoch by epoch. Each group is `{"conditions": [labels], "axes": {axis: [values]}, "fixed":
    {axis: value}, "questions": n}`: `axes` are the settings that differ within the group (what
    changed nothing), `fixed` the ones they share.
    """
    latest: dict[str, ExecutionRecord] = {}
    for r in records:
        if r.parent is None and r.kind is None and r.status != "incomplete":
            latest[r.execution_id] = r
    by_label: dict[str, dict[tuple[str, int], str | None]] = {}
    conditions: dict[str, dict[str, Any]] = {}
    for r in latest.values():
        label = condition_label(r.condition)
        conditions[label] = r.condition
        by_label.setdefault(label, {})[(r.question_id, r.repeat)] = r.request_fingerprint  # epoch by epoch
    groups: dict[tuple[tuple[tuple[str, int], str], ...], list[str]] = {}
    for label, prints in by_label.items():
        if not prints or any(p is None for p in prints.values()):
            continue
        groups.setdefault(tuple(sorted(prints.items())), []).append(label)  # type: ignore[arg-type]
    out: list[dict[str, Any]] = []
    for key, labels in groups.items():
        if len(labels) < 2:
            continue
        out.append({**describe_group(labels, conditions), "questions": len({q for (q, _), _ in key})})
    out.sort(key=lambda g: g["conditions"])
    return out


def describe_group(labels: list[str], conditions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A group of conditions (by label; `conditions` maps each label to its condition) as
    `{"conditions": [labels in natural order], "axes": {axis: [values]}, "fixed": {axis: value}}`:
    `axes` are the settings that differ within the group, `fixed` the ones its conditions share.
    The after-run check here and the pre-run probe (`experiments.prerun`) word groups alike."""
    labels = sorted(labels, key=lambda lab: natural_condition_key(conditions[lab]))
    conds = [conditions[lab] for lab in labels]
    names = sorted({k for c in conds for k in c})
    axes: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    for name in names:
        values = [c.get(name) for c in conds]
        distinct = list({_value(v): v for v in values}.values())
        if len(distinct) > 1:
            axes[name] = distinct
        else:
            fixed[name] = distinct[0]
    return {"conditions": labels, "axes": axes, "fixed": fixed}


def identical_warnings(groups: list[dict[str, Any]]) -> list[str]:
    """One sentence per group, naming the axis and its values, e.g. "agent.prompt = plain,
    fewshot (with agent.search=true): identical requests to the model for all 12 questions"."""
    lines = []
    for g in groups:
        axes = "; ".join(f"{axis} = {', '.join(_value(v) for v in values)}" for axis, values in g["axes"].items())
        fixed = ",".join(f"{k}={_value(v)}" for k, v in g["fixed"].items())
        lines.append(
            f"IDENTICAL CONDITIONS: {axes}{f' (with {fixed})' if fixed else ''} sent identical requests to the "
            f"model for all {g['questions']} questions; this axis changed nothing the model received, so "
            "their rows differ only by label (or by sampling)"
        )
    return lines


def before_run_warnings(groups: list[dict[str, Any]]) -> list[str]:
    """One block per group the pre-run probe found (`experiments.prerun`), naming the settings
    that differ and what they do not reach, e.g. "agent.prompt = fewshot, plain (with
    agent.search_cap=1) would send the model identical requests ... with agent.policy=constrained"."""
    lines = []
    for g in groups:
        axes = "; ".join(f"{axis} = {', '.join(_value(v) for v in values)}" for axis, values in g["axes"].items())
        fixed = ",".join(f"{k}={_value(v)}" for k, v in g["fixed"].items())
        context = ", ".join(f"{k}={_value(v)}" for k, v in g.get("context", {}).items())
        names = " and ".join(g["axes"])
        lines.append(
            f"IDENTICAL CONDITIONS (before the run): {axes}{f' (with {fixed})' if fixed else ''} would send the "
            f"model identical requests: for the first {g['questions']} questions their first requests and "
            f"forced answers are the same, and no other setting that acts later differs; {names} "
            f"{'does' if len(g['axes']) == 1 else 'do'} not reach the model{f' with {context}' if context else ''}. "
            f"The {len(g['conditions'])} conditions would differ only by label (or by sampling): "
            f"{'; '.join(g['conditions'])}"
        )
    return lines
