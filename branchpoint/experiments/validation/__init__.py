"""`branchpoint validate`: whole studies on the simulated model, every estimate against the truth.

Each study is an ordinary run (seeded question sample, model seed) → a fork study at every legal
boundary with every legal action and m repeats → metrics → value, through the public APIs; its
truth comes from the simulator (`branchpoint.models.sim.truth`). `compare` sets each estimate
beside its truth; `validate` repeats studies with different seeds, writes DIR/validation.json
and says which checks failed. `findings` checks the over-searching study's qualitative findings
on the simulator with branchpoint's own metrics.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from branchpoint.errors import InputError
from branchpoint.experiments.validation.compare import Check, aggregate, compare_study
from branchpoint.experiments.validation.dispersion import dispersion
from branchpoint.experiments.validation.quantities import QUANTITIES
from branchpoint.experiments.validation.study import StudyResult, StudySettings, run_study
from branchpoint.experiments.validation.truths import true_delta
from branchpoint.models.sim.truth import POLICY_STYLES, Style
from branchpoint.provenance import collect, dump_block

VALIDATION_FILE = "validation.json"


@dataclass(frozen=True)
class ValidateConfig:
    """How many studies of what size (`quick` and full presets in `preset`)."""

    studies: int = 3
    seed: int = 1
    findings: bool = True


def preset(quick: bool) -> tuple[ValidateConfig, dict[str, Any]]:
    """(config, study-size settings) of `--quick` (< 2 minutes) and of the full validation."""
    if quick:
        return ValidateConfig(studies=3), {"answerable": 10, "unanswerable": 10, "resamples": 1000}
    return ValidateConfig(studies=40), {"answerable": 16, "unanswerable": 16, "resamples": 2000}


def style_from_stats(base_url: str) -> Style:
    """The protocol a policy spoke, from the simulator's request counts (for `module:function`)."""
    root = base_url.removesuffix("/v1")
    counts = httpx.get(f"{root}/v1/sim/stats", timeout=10).json().get("requests", {})
    for proto, style in (("completion", "completion"), ("native", "native"), ("tagged", "tagged")):
        if counts.get(proto):
            return style  # type: ignore[return-value]
    return "no_search"


def server_stats(base_url: str) -> dict[str, Any]:
    return httpx.get(f"{base_url.removesuffix('/v1')}/v1/sim/stats", timeout=10).json()


def _sampling_check(stats: dict[str, Any], settings: StudySettings) -> Check:
    seen = [json.loads(k) for k in stats.get("sampling", {})]
    want = {"temperature": settings.temperature, "top_p": settings.top_p, "seeded": True}
    bad = [s for s in seen if s != want]
    unknown = stats.get("unknown_questions") or {}
    ok = not bad and not unknown
    detail = (
        "every request seeded, at the sampling the truth assumes"
        if ok
        else (
            f"requests with other sampling {bad}"
            if bad
            else f"questions the simulator did not know: {list(unknown)[:3]}"
        )
    )
    return Check("requests", "sampling", ok, detail)


def state_rows(r: StudyResult) -> list[dict[str, Any]]:
    """Per-state estimate and truth (for the figure of estimated vs true Δ, and `dispersion`)."""
    d = true_delta(r)
    answerable = {q.id: q.answerable for q in r.questions}
    return [
        {
            "question_id": r.states.question_id[i],
            "answerable": answerable.get(r.states.question_id[i]),
            "boundary": r.states.boundary[i],
            "dbar": float(r.states.dbar[i]),
            "delta": float(d[i]),
            "p_think": float(r.p_think[i]),
            "p_search": float(r.p_search[i]),
            "m_think": int(r.states.think.m[i]),
            "m_search": int(r.states.search.m[i]),
        }
        for i in range(len(r.states))
    ]


def validate(
    out: Path,
    *,
    profile: str = "instruct",
    policy: str = "constrained",
    quick: bool = True,
    studies: int | None = None,
    seed: int = 1,
    reasoning_effort: str | None = None,
    progress: bool = True,
    keep_runs: bool = False,
    seed_per_action: bool = False,
    findings: bool | None = None,
    fork_seed: int = 0,
) -> dict[str, Any]:
    """Run the studies, compare, write OUT/validation.json and return its content (`findings`:
    whether to check the seed study's findings on the over-searching profile; default: the
    preset's choice, on)."""
    from branchpoint.agents import resolve_policy
    from branchpoint.models.server_info import describe_model
    from branchpoint.models.sim import SimServer
    from branchpoint.models.sim.profile import load_profile
    from branchpoint.models.spec import ModelSpec, SimServerSpec

    resolve_policy(policy)  # unknown: fail before any work
    prof = load_profile(profile)
    cfg, size = preset(quick)
    n_studies = studies or cfg.studies
    settings = StudySettings(
        profile=profile,
        policy=policy,
        reasoning_effort=reasoning_effort,
        seed_per_action=seed_per_action,
        fork_seed=fork_seed,
        **size,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = out / "runs"
    started = time.perf_counter()
    per_study: list[dict[str, Any]] = []
    studies_out: list[dict[str, Any]] = []
    skipped: set[str] = set()
    style: Style | None = POLICY_STYLES.get(policy)
    with SimServer(
        SimServerSpec(profile=profile, latency_scale=0.0), served_name=prof.served_name, log_path=out / "sim-server.log"
    ) as server:
        for i in range(n_studies):
            s = seed + i
            run_dir = runs / f"study-{s}"
            shutil.rmtree(run_dir, ignore_errors=True)
            if style is None:  # a module:function policy: learn its protocol from a first run
                from branchpoint.experiments.runner import run_experiment
                from branchpoint.experiments.validation.study import shared_server_opener, study_spec

                probe = study_spec(replace(settings, answerable=1, unanswerable=1), s, prof.served_name)
                run_experiment(probe, out / "probe", progress=False, model_opener=shared_server_opener(server.base_url))
                style = style_from_stats(server.base_url)
                shutil.rmtree(out / "probe", ignore_errors=True)
            r = run_study(
                settings, s, run_dir, base_url=server.base_url, served_name=prof.served_name, profile=prof, style=style
            )
            rows, miss = compare_study(r)
            skipped |= set(miss)
            per_study.append(rows)
            studies_out.append(
                {
                    "seed": s,
                    "run_dir": str(run_dir),
                    "states": len(r.states),
                    "statuses": r.statuses,
                    "quantities": rows,
                    "per_state": state_rows(r),
                }
            )
            if progress:
                print(
                    f"study {i + 1}/{n_studies} (seed {s}): {len(r.states)} states, "
                    f"{time.perf_counter() - started:.0f} s",
                    flush=True,
                )
            if not keep_runs:
                shutil.rmtree(run_dir, ignore_errors=True)
        stats = server_stats(server.base_url)
    summary, checks = aggregate(per_study)
    checks.append(_sampling_check(stats, settings))
    check_findings = cfg.findings if findings is None else findings
    found = None
    if check_findings and prof.name == "over_searching" and POLICY_STYLES.get(policy) not in (None, "no_search"):
        from branchpoint.experiments.validation.findings import seed_findings

        found, finding_checks = seed_findings(out / "findings", settings, prof, seed=seed)
        checks += finding_checks
    covered = [row["covered"] for s in per_study for row in s.values() if row["covered"] is not None]
    report: dict[str, Any] = {
        "profile": profile,
        "policy": policy,
        "policy_style": style,
        "quick": quick,
        "studies": n_studies,
        "settings": asdict(settings),
        "coverage": float(np.mean(covered)) if covered else None,
        "quantities": summary,
        "skipped_quantities": sorted(skipped),
        "sampling_seen": stats.get("sampling"),
        "requests": stats.get("requests"),
        "findings": found,
        # not a check: how spread the errors of Δ̄ are against the exact Binomial model (`dispersion`)
        "dispersion": dispersion(studies_out, repeats=settings.repeats),
        "checks": [asdict(c) for c in checks],
        "passed": all(c.passed for c in checks),
        "wall_s": time.perf_counter() - started,
        "per_study": studies_out,
        "provenance": dump_block(
            collect("validate", model_servers=[describe_model(ModelSpec(provider="sim", name=prof.served_name))])
        ),
    }
    (out / VALIDATION_FILE).write_text(
        json.dumps(_finite(report), indent=2, default=_json_default, allow_nan=False) + "\n", encoding="utf-8"
    )
    from branchpoint.experiments.validation.figure import DELTA_FIGURE, delta_figure

    delta_figure(report, out / DELTA_FIGURE)
    return report


def _finite(x: Any) -> Any:
    """The report with every non-finite float (an infinite X², an undefined ratio) as null."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (float, np.floating)) and not math.isfinite(float(x)):
        return None
    return x


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(f"not JSON serialisable: {type(x)}")


def format_table(report: dict[str, Any]) -> Any:
    """A rich table: per quantity its kind, coverage, mean error ± SE, and the checks' verdicts."""
    from rich.table import Table

    t = Table(
        title=f"validate: profile {report['profile']}, policy {report['policy']}, {report['studies']} studies "
        f"(coverage {report['coverage']:.2f})"
        if report["coverage"] is not None
        else "validate"
    )
    for col in ("quantity", "kind", "coverage", "mean error ± SE", "check"):
        t.add_column(col)
    by_q: dict[str, list[dict[str, Any]]] = {}
    for c in report["checks"]:
        by_q.setdefault(c["quantity"], []).append(c)
    for name, s in report["quantities"].items():
        cov = "-" if s["coverage"] is None else f"{s['coverage']:.2f}"
        err = (
            "-"
            if s["mean_error"] is None
            else (f"{s['mean_error']:+.4f}" + ("" if s["mean_error_se"] is None else f" ± {s['mean_error_se']:.4f}"))
        )
        verdicts = by_q.get(name, [])
        check = (
            "pass"
            if all(c["passed"] for c in verdicts)
            else "FAIL: " + "; ".join(f"{c['what']} {c['detail']}" for c in verdicts if not c["passed"])
        )
        t.add_row(name, s["kind"], cov, err, check if verdicts else "-")
    for name, cs in by_q.items():
        if name not in report["quantities"]:
            for c in cs:
                t.add_row(name, "", "", "", ("pass: " if c["passed"] else "FAIL: ") + f"{c['what']} {c['detail']}")
    return t


__all__ = ["QUANTITIES", "VALIDATION_FILE", "InputError", "ValidateConfig", "format_table", "preset", "validate"]
