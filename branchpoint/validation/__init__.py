"""`branchpoint validate`: whole studies on the simulated model, every estimate against the truth.

Each study is an ordinary run (seeded question sample, model seed) → a fork study at every legal
boundary with every legal action and m repeats → metrics → value, through the public APIs
(`study`); its truth comes from the simulator alone (`sim.study_truth`, by state key).
`compare` sets each estimate beside its truth, `checks` turns many studies into pass / fail
checks, and `validate` writes DIR/validation.json and says which checks failed. With
`mutants`, every study is also evaluated with each planted bug of `mutants.MUTANTS` (one
pipeline function replaced at a time), and validation.json's `mutants` table says which checks
caught each one: a mutant no check catches fails the validation. Each study also runs a sweep
run (`sweep`: epochs over an effort × search-cap grid, no fork) whose epochs, frontier and
budget estimates `sweep_compare` checks beside the study's own. `findings` checks the
over-searching study's qualitative findings on the simulator with branchpoint's own metrics.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from branchpoint.errors import InputError
from branchpoint.provenance import collect, dump_block
from branchpoint.sim.truth import POLICY_STYLES, Style
from branchpoint.traces import VALIDATION_FILE
from branchpoint.validation.canary import canary_registered
from branchpoint.validation.checks import Check, aggregate, not_applicable
from branchpoint.validation.compare import StudyComparison, compare_study
from branchpoint.validation.dispersion import dispersion
from branchpoint.validation.mutants import MUTANTS, Mutant, mutant_named
from branchpoint.validation.quantities import QUANTITIES
from branchpoint.validation.report import finite, format_table, json_default, mutants_table, state_rows
from branchpoint.validation.study import StudyResult, evaluate, run_and_fork
from branchpoint.validation.study_setup import StudySettings, shared_server_opener, stratified_questions, study_spec
from branchpoint.validation.sweep import run_sweep, sweep_dir, sweep_truth
from branchpoint.validation.truth_setup import truth_of


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
    counts: dict[str, Any] = httpx.get(f"{root}/v1/sim/stats", timeout=10).json().get("requests", {})
    for proto, style in (("completion", "completion"), ("native", "native"), ("tagged", "tagged")):
        if counts.get(proto):
            return style  # type: ignore[return-value]
    return "no_search"


def server_stats(base_url: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{base_url.removesuffix('/v1')}/v1/sim/stats", timeout=10).json()
    return stats


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


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def chosen_mutants(mutants: bool | Sequence[str]) -> list[Mutant]:
    """Every mutant (True), none (False), or those named."""
    if mutants is True:
        return list(MUTANTS)
    if not mutants:
        return []
    return [mutant_named(str(n)) for n in mutants]


def _mutant_study(
    m: Mutant, settings: StudySettings, seed: int, run_dir: Path, base: StudyResult, server: Any, style: Style | None
) -> StudyResult:
    """One study with mutant `m` planted around its stage (see `mutants`): the evaluation of the
    study already run, or its run and fork afresh (then evaluated, and its truth taken, as usual)."""
    if m.stage == "evaluate":
        with m.planted():
            return evaluate(
                settings, seed, run_dir, base.truth, out=run_dir / "mutants" / slug(m.name), sweep=base.sweep
            )
    mdir = run_dir.parent / f"{run_dir.name}-{slug(m.name)}"
    shutil.rmtree(mdir, ignore_errors=True)
    with m.planted():
        spec = run_and_fork(settings, seed, mdir, base_url=server.base_url, served_name=server.served_name)
    # the sweep run does not fork: the study's own is evaluated beside the mutant's fork study
    return evaluate(settings, seed, mdir, truth_of(settings, spec, mdir, style=style), sweep=base.sweep)


def mutants_report(mutants: list[Mutant], studies: dict[str, list[StudyComparison]]) -> list[dict[str, Any]]:
    """validation.json's `mutants` table: per mutant what it plants and which checks caught it."""
    out = []
    for m in mutants:
        summary, checks = aggregate(studies[m.name])
        failed = [c for c in checks if not c.passed]
        out.append(
            {
                "name": m.name,
                "plants": m.plants,
                "target": m.target,
                "stage": m.stage,
                "studies": len(studies[m.name]),
                "caught": bool(failed),
                "caught_by": [f"{c.quantity}: {c.what}" for c in failed],
                "failed_checks": [asdict(c) for c in failed],
                # how far off the failing quantities were: mean estimate − truth over the studies
                "mean_errors": {c.quantity: summary[c.quantity]["mean_error"] for c in failed if c.quantity in summary},
            }
        )
    return out


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
    mutants: bool | Sequence[str] = False,
) -> dict[str, Any]:
    """Run the studies, compare, write OUT/validation.json and return its content (`findings`:
    whether to check the seed study's findings on the over-searching profile; default: the
    preset's choice, on; `mutants`: every planted bug, or those named, on the same studies)."""
    from branchpoint.agents import resolve_policy
    from branchpoint.models.server_info import describe_model
    from branchpoint.models.spec import ModelSpec, SimServerSpec
    from branchpoint.sim import SimServer
    from branchpoint.sim.profile import load_profile

    resolve_policy(policy)  # unknown: fail before any work
    planted = chosen_mutants(mutants)
    prof = load_profile(profile)
    cfg, size = preset(quick)
    n_studies = studies or cfg.studies
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    questions = stratified_questions(out / "questions.jsonl")
    settings = StudySettings(
        profile=profile,
        policy=policy,
        questions=str(questions),
        reasoning_effort=reasoning_effort,
        seed_per_action=seed_per_action,
        fork_seed=fork_seed,
        **size,
    )
    runs = out / "runs"
    started = time.perf_counter()
    per_study: list[StudyComparison] = []
    mutant_studies: dict[str, list[StudyComparison]] = {m.name: [] for m in planted}
    studies_out: list[dict[str, Any]] = []
    style: Style | None = POLICY_STYLES.get(policy)
    sim = SimServerSpec(profile=profile, questions=str(questions), latency_scale=0.0)
    with canary_registered(), SimServer(sim, served_name=prof.served_name, log_path=out / "sim-server.log") as server:
        for i in range(n_studies):
            s = seed + i
            run_dir = runs / f"study-{s}"
            shutil.rmtree(run_dir, ignore_errors=True)
            if style is None:  # a module:function policy: learn its protocol from a first run
                from branchpoint.experiments.runner import run_experiment

                probe = study_spec(replace(settings, answerable=1, unanswerable=1), s, prof.served_name)
                run_experiment(probe, out / "probe", progress=False, model_opener=shared_server_opener(server.base_url))
                style = style_from_stats(server.base_url)
                shutil.rmtree(out / "probe", ignore_errors=True)
            spec = run_and_fork(settings, s, run_dir, base_url=server.base_url, served_name=prof.served_name)
            swept = sweep_dir(run_dir)
            shutil.rmtree(swept, ignore_errors=True)
            sweep_spec = run_sweep(
                settings, s, swept, base_url=server.base_url, served_name=prof.served_name, style=style
            )
            sweep = sweep_truth(settings, sweep_spec, swept, style=style)
            r = evaluate(settings, s, run_dir, truth_of(settings, spec, run_dir, style=style), sweep=sweep)
            compared = compare_study(r)
            per_study.append(compared)
            for m in planted:
                mutant_studies[m.name].append(compare_study(_mutant_study(m, settings, s, run_dir, r, server, style)))
            studies_out.append(
                {
                    "seed": s,
                    "run_dir": str(run_dir),
                    "states": len(r.states),
                    "statuses": r.statuses,
                    "quantities": compared.rows,
                    "not_applicable": compared.not_applicable,
                    "missing": compared.missing,
                    "states_check": compared.states,
                    "per_state": state_rows(r),
                }
            )
            if progress:
                print(
                    f"study {i + 1}/{n_studies} (seed {s}): {len(r.states)} states"
                    + (f", {len(planted)} mutants" if planted else "")
                    + f", {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
            if not keep_runs:
                for d in runs.glob(f"study-{s}*"):
                    shutil.rmtree(d, ignore_errors=True)
        stats = server_stats(server.base_url)
    summary, checks = aggregate(per_study)
    checks.append(_sampling_check(stats, settings))
    check_findings = cfg.findings if findings is None else findings
    found = None
    if check_findings and prof.name == "over_searching" and POLICY_STYLES.get(policy) not in (None, "no_search"):
        from branchpoint.validation.findings import seed_findings

        found, finding_checks = seed_findings(out / "findings", settings, prof, seed=seed)
        checks += finding_checks
    covered = [row["covered"] for s in per_study for row in s.rows.values() if row["covered"] is not None]
    table = mutants_report(planted, mutant_studies) if planted else None
    report: dict[str, Any] = {
        "profile": profile,
        "policy": policy,
        "policy_style": style,
        "quick": quick,
        "studies": n_studies,
        "settings": asdict(settings),
        # descriptive: rows of one study are not independent, so no test is made of this one
        "coverage": sum(covered) / len(covered) if covered else None,
        "quantities": summary,
        "not_applicable": not_applicable(per_study),
        "sampling_seen": stats.get("sampling"),
        "requests": stats.get("requests"),
        "findings": found,
        # not a check: how spread the errors of Δ̄ are against the exact Binomial model (`dispersion`)
        "dispersion": dispersion(studies_out, repeats=settings.repeats),
        "checks": [asdict(c) for c in checks],
        "mutants": table,
        "passed": all(c.passed for c in checks) and all(m["caught"] for m in table or []),
        "wall_s": time.perf_counter() - started,
        "per_study": studies_out,
        "provenance": dump_block(
            collect("validate", model_servers=[describe_model(ModelSpec(provider="sim", name=prof.served_name))])
        ),
    }
    (out / VALIDATION_FILE).write_text(
        json.dumps(finite(report), indent=2, default=json_default, allow_nan=False) + "\n", encoding="utf-8"
    )
    from branchpoint.validation.figure import DELTA_FIGURE, delta_figure

    delta_figure(report, out / DELTA_FIGURE)
    return report


__all__ = [
    "MUTANTS",
    "QUANTITIES",
    "VALIDATION_FILE",
    "InputError",
    "ValidateConfig",
    "format_table",
    "mutants_table",
    "preset",
    "validate",
]
