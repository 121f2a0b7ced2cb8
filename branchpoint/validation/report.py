"""What `validate` writes and prints: per-state rows, JSON-safe numbers, the rich tables."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from branchpoint.validation.compare import joined
from branchpoint.validation.study import StudyResult


def state_rows(r: StudyResult) -> list[dict[str, Any]]:
    """Per-state estimate and truth, joined by state key (for the figure of estimated vs true Δ,
    and `dispersion`)."""
    j = joined(r)
    return [
        {
            "question_id": st.question_id,
            "answerable": st.answerable,
            "boundary": r.states.boundary[i],
            "dbar": float(r.states.dbar[i]),
            "delta": float(st.p[st.roles[1]] - st.p[st.roles[0]]),
            "p_think": float(st.p[st.roles[0]]),
            "p_search": float(st.p[st.roles[1]]),
            "m_think": int(r.states.think.m[i]),
            "m_search": int(r.states.search.m[i]),
        }
        for i, st in zip(j.rows.tolist(), j.truth)
    ]


def finite(x: Any) -> Any:
    """The report with every non-finite float (an infinite X², an undefined ratio) as null."""
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    if isinstance(x, (float, np.floating)) and not math.isfinite(float(x)):
        return None
    return x


def json_default(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(f"not JSON serialisable: {type(x)}")


def _err(s: dict[str, Any]) -> str:
    if s["mean_error"] is None:
        return "-"
    return f"{s['mean_error']:+.4f}" + ("" if s["mean_error_se"] is None else f" ± {s['mean_error_se']:.4f}")


def format_table(report: dict[str, Any]) -> Any:
    """A rich table: per quantity its kind, coverage (and the target test's p), mean error ± SE,
    the smallest bias the run detects, and the checks' verdicts."""
    from rich.table import Table

    title = (
        f"validate: profile {report['profile']}, policy {report['policy']}, {report['studies']} studies "
        f"(coverage {report['coverage']:.2f})"
        if report["coverage"] is not None
        else "validate"
    )
    t = Table(title=title)
    for col in ("quantity", "kind", "coverage (p)", "mean error ± SE", "detects |bias| ≥", "check"):
        t.add_column(col)
    by_q: dict[str, list[dict[str, Any]]] = {}
    for c in report["checks"]:
        by_q.setdefault(c["quantity"], []).append(c)
    for name, s in report["quantities"].items():
        cov = "-" if s["coverage"] is None else f"{s['coverage']:.2f} ({s['coverage_p']:.2g})"
        power = "-" if s.get("detectable_bias") is None else f"{s['detectable_bias']:.4f}"
        verdicts = by_q.get(name, [])
        check = (
            (
                "pass"
                if all(c["passed"] for c in verdicts)
                else "FAIL: " + "; ".join(f"{c['what']} {c['detail']}" for c in verdicts if not c["passed"])
            )
            if verdicts
            else ("reported" if s.get("reported") else "-")
        )
        t.add_row(name, s["kind"], cov, _err(s), power, check)
    for name, cs in by_q.items():
        if name not in report["quantities"]:
            for c in cs:
                t.add_row(name, "", "", "", "", ("pass: " if c["passed"] else "FAIL: ") + f"{c['what']} {c['detail']}")
    return t


def mutants_table(report: dict[str, Any]) -> Any:
    """A rich table: per mutant what it plants, whether it was caught, and by which checks."""
    from rich.table import Table

    t = Table(title=f"validate --mutants: {report['studies']} studies per mutant")
    for col in ("mutant", "replaces", "caught", "caught by"):
        t.add_column(col)
    for m in report["mutants"]:
        t.add_row(m["name"], m["target"].split(":")[-1], "yes" if m["caught"] else "NO", "; ".join(m["caught_by"]))
    return t
