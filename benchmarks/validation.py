"""The full validation on the simulated model: coverage of every quantity's 95% interval.

Runs `branchpoint validate` (the full preset unless told otherwise) for each profile x policy and
prints the markdown coverage table that BENCHMARKS.md holds: per quantity its kind, coverage over
the studies with the p-value of the binomial test of the 0.90-0.99 target, RMS z, mean error ±
its standard error over studies, the smallest bias the run detects (power 0.8), and whether its
checks passed; then what did not apply (with why), the R²_Δ ratio bias against its expectation
under the exact model, and with `--mutants` the table of planted bugs and the checks that
caught each.

    .venv/bin/python benchmarks/validation.py [--profiles instruct over_searching] [--policies constrained]
        [--studies 40] [--seed 1] [--no-findings] [--mutants] [--out /tmp/bp-validation]

One command per chat policy gives it the same 40-study evidence as `constrained` (hours of CPU
each; run them on the final code, `nice -n 19` on a shared machine, as four parts over disjoint
seeds merged afterwards if cores allow):

    nice -n 19 .venv/bin/python benchmarks/validation.py --profiles over_searching --policies native --out VN
    nice -n 19 .venv/bin/python benchmarks/validation.py --profiles over_searching --policies tagged --out VT

On a shared machine the studies can run as several processes over disjoint seeds (`--seed 1
--studies 10`, `--seed 11 --studies 10 --no-findings`, ...) and be merged into one table:

    .venv/bin/python benchmarks/validation.py --merge OUT1/over_searching-constrained OUT2/... [--out DIR]

which re-aggregates the per-study rows of each part's validation.json (the same checks as one
run over all the seeds) and keeps each part's request and findings checks (and mutants tables).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchpoint.validation import VALIDATION_FILE, validate
from branchpoint.validation.checks import aggregate, not_applicable
from branchpoint.validation.compare import StudyComparison
from branchpoint.validation.dispersion import dispersion

PRICED = re.compile(r"^(U|factorial)\((?P<price>[0-9.]+)\) (?P<rest>.*)$")


def _verdict(checks: list[dict]) -> str:
    if not checks:
        return "–"
    return (
        "pass"
        if all(c["passed"] for c in checks)
        else "FAIL: " + "; ".join(c["detail"] for c in checks if not c["passed"])
    )


def _err(s: dict) -> str:
    if s["mean_error"] is None:
        return "–"
    return f"{s['mean_error']:+.4f}" + ("" if s["mean_error_se"] is None else f" ± {s['mean_error_se']:.4f}")


def _cov(s: dict) -> str:
    if s["coverage"] is None:
        return "–"
    return f"{s['coverage']:.2f}" + ("" if s.get("coverage_p") is None else f" (p {s['coverage_p']:.2g})")


def table(report: dict) -> str:
    """The coverage table: every quantity at price 0 (and without a price), one row each."""
    by_q: dict[str, list[dict]] = {}
    for c in report["checks"]:
        by_q.setdefault(c["quantity"], []).append(c)
    lines = [
        "| quantity | kind | coverage (p, target 0.90-0.99) | RMS z | mean error ± SE | detects |bias| ≥ | checks |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in report["quantities"].items():
        m = PRICED.match(name)
        if m and float(m["price"]) > 0:
            continue
        rz = "–" if s.get("rms_z") is None else f"{s['rms_z']:.2f}"
        power = "–" if s.get("detectable_bias") is None else f"{s['detectable_bias']:.4f}"
        verdict = _verdict(by_q.get(name, [])) if by_q.get(name) else ("reported" if s.get("reported") else "–")
        lines.append(f"| {name} | {s['kind']} | {_cov(s)} | {rz} | {_err(s)} | {power} | {verdict} |")
    for name, cs in by_q.items():
        if name not in report["quantities"]:
            lines.append(f"| {name} | | | | | | {_verdict(cs)} |")
    return "\n".join(lines)


def mutants_table(mutants: list[dict]) -> str:
    """Per planted bug: the function it replaces, whether a check caught it, and which."""
    lines = ["| mutant | replaces | caught | caught by (failed checks) |", "|---|---|---|---|"]
    for m in mutants:
        by = "; ".join(m["caught_by"][:6]) + (f"; … ({len(m['caught_by'])} in all)" if len(m["caught_by"]) > 6 else "")
        lines.append(f"| {m['name']} | `{m['target'].split(':')[-1]}` | {'yes' if m['caught'] else '**NO**'} | {by} |")
    return "\n".join(lines)


def price_table(report: dict) -> str:
    """Router utilities and factorial cells at every price: coverage (mean error) per price."""
    rows: dict[str, dict[str, str]] = {}
    prices: list[str] = []
    failed: list[str] = []
    by_q: dict[str, list[dict]] = {}
    for c in report["checks"]:
        by_q.setdefault(c["quantity"], []).append(c)
    for name, s in report["quantities"].items():
        m = PRICED.match(name)
        if not m:
            continue
        if m["price"] not in prices:
            prices.append(m["price"])
        key = f"{m[1]}: {m['rest']}"
        cov = "–" if s["coverage"] is None else f"{s['coverage']:.2f}"
        err = "" if s["mean_error"] is None else f" ({s['mean_error']:+.3f})"
        rows.setdefault(key, {})[m["price"]] = cov + err
        if any(not c["passed"] for c in by_q.get(name, [])):
            failed.append(f"{name}: {_verdict(by_q[name])}")
    lines = ["| router | " + " | ".join(f"λ = {p}" for p in prices) + " |", "|---|" + "---|" * len(prices)]
    for key, cells in rows.items():
        lines.append(f"| {key} | " + " | ".join(cells.get(p, "–") for p in prices) + " |")
    lines.append("")
    lines.append("checks at every price: " + ("all pass" if not failed else "; ".join(failed)))
    return "\n".join(lines)


DISPERSION_ROWS = {
    "state_ratio": "Σe² / Σv over the states",
    "question_ratio": "Σ(per-question Σe)² / Σv",
    "study_rms_z": "RMS z of the studies' mean Δ (exact SE)",
    "answerable_unanswerable_corr": "corr. of answerable and unanswerable z over studies",
}


def dispersion_table(d: dict) -> str:
    """The errors e = Δ̄ − Δ against the exact Binomial model of the same states (`dispersion`)."""
    lines = [
        f"Errors of Δ̄ against independent Binomial draws from the true p ({d['studies']} studies, "
        f"{d['states']} states, {d['draws']} draws):",
        "",
        "| statistic | observed | model mean | p (two-sided) |",
        "|---|---|---|---|",
    ]
    for key, label in DISPERSION_ROWS.items():
        s = d[key]
        lines.append(f"| {label} | {s['observed']:.3f} | {s['model_mean']:.3f} | {s['p']:.3f} |")
    return "\n".join(lines)


def merge(parts: list[Path]) -> dict:
    """One report from the validation.json of runs over disjoint seeds of one profile x policy."""
    reports = [json.loads((p / VALIDATION_FILE).read_text()) for p in parts]
    first = reports[0]
    for r in reports[1:]:
        if (r["profile"], r["policy"], r["settings"]) != (first["profile"], first["policy"], first["settings"]):
            raise SystemExit(f"--merge: {parts[0]} and the others differ in profile, policy or settings")
    studies = [s for r in reports for s in r["per_study"]]
    seeds = [s["seed"] for s in studies]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"--merge: the parts share seeds {sorted(x for x in set(seeds) if seeds.count(x) > 1)}")
    per_study = [
        StudyComparison(
            rows=s["quantities"],
            not_applicable=s.get("not_applicable") or {},
            missing=s.get("missing") or {},
            states=s.get("states_check") or {},
        )
        for s in studies
    ]
    summary, checks = aggregate(per_study)
    names = {q for s in per_study for q in [*s.rows, *s.missing]} | {"states"}
    other = [c for r in reports for c in r["checks"] if c["quantity"] not in names]
    all_checks = [vars(c) for c in checks] + other
    covered = [row["covered"] for s in per_study for row in s.rows.values() if row["covered"] is not None]
    return {
        **{k: first[k] for k in ("profile", "policy", "policy_style", "quick", "settings")},
        "studies": len(studies),
        "seeds": sorted(seeds),
        "coverage": sum(covered) / len(covered) if covered else None,
        "quantities": summary,
        "not_applicable": not_applicable(per_study),
        "findings": next((r["findings"] for r in reports if r.get("findings")), None),
        "checks": all_checks,
        "mutants": [m for r in reports for m in r.get("mutants") or []] or None,
        "passed": all(c["passed"] for c in all_checks),
        "wall_s": sum(r["wall_s"] for r in reports),
        "dispersion": dispersion(studies, repeats=int(first["settings"]["repeats"])),
        "merged_from": [str(p) for p in parts],
        "per_study": studies,
    }


def show(report: dict, profile: str, policy: str, elapsed: float) -> None:
    s = report["settings"]
    print(
        f"\n### profile {profile}, policy {policy}: {report['studies']} studies of "
        f"{s['answerable']}+{s['unanswerable']} forked questions (run: x{s['run_factor']}), m = {s['repeats']}, "
        f"budget {s['search_budget']}; overall coverage {report['coverage']:.3f}; "
        f"{'all checks passed' if report['passed'] else 'SOME CHECKS FAILED'} "
        f"({elapsed:.0f} s)\n"
    )
    print(table(report))
    print("\nCoverage (mean error) at every price λ:\n")
    print(price_table(report))
    na = report.get("not_applicable") or {}
    if na:
        print("\nnot applicable (and why):\n")
        by_reason: dict[str, list[str]] = {}
        for name, entry in na.items():
            by_reason.setdefault(entry["reason"], []).append(f"{name} ({entry['studies']}/{report['studies']})")
        for reason, names in by_reason.items():
            print(f"- {reason}: {len(names)} quantities: {', '.join(names[:4])}{', …' if len(names) > 4 else ''}")
    r2 = report["quantities"].get("R²_Δ truth forecaster") or {}
    if r2.get("expected_error") is not None and r2.get("mean_error") is not None:
        print(
            f"\nR²_Δ of the exact forecaster: mean error {_err(r2)}; its expectation under the exact model "
            f"of the same states (the ratio's own bias) {r2['expected_error']:+.4f}; pooled z of the "
            f"difference {r2.get('pooled_z', float('nan')):+.2f}"
        )
    failed = [f"{c['quantity']}: {c['what']} {c['detail']}" for c in report["checks"] if not c["passed"]]
    if failed:
        print("\nfailed checks:\n" + "\n".join(failed))
    if report.get("findings"):
        print(f"\nseed-study findings: {report['findings']}")
    if report.get("dispersion"):
        print("\n" + dispersion_table(report["dispersion"]))
    if report.get("mutants"):
        print("\nPlanted bugs (`--mutants`), each on the same studies:\n")
        print(mutants_table(report["mutants"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profiles", nargs="+", default=["instruct"])
    ap.add_argument("--policies", nargs="+", default=["constrained"])
    ap.add_argument("--studies", type=int, default=None, help="default: the full preset (40)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--seed-per-action", action="store_true", help="diagnostic: fork each action with its own model seed"
    )
    ap.add_argument("--seed", type=int, default=1, help="the first study's seed (studies use seed, seed + 1, ...)")
    ap.add_argument(
        "--fork-seed", type=int, default=0, help="diagnostic: the fork plan's seed (redraws every branch, same states)"
    )
    ap.add_argument("--no-findings", action="store_true", help="skip the seed-study findings (for extra parts)")
    ap.add_argument("--merge", type=Path, nargs="+", default=None, help="merge these validate outputs and print")
    ap.add_argument("--mutants", action="store_true", help="also evaluate every study with each planted bug")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bp-validation-"))
    if args.merge:
        report = merge(args.merge)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"merged-{report['profile']}-{report['policy']}.json").write_text(
            json.dumps({k: v for k, v in report.items() if k != "per_study"}, indent=1, default=str)
        )
        show(report, report["profile"], report["policy"], report["wall_s"])
        print(f"\n(merged seeds {report['seeds'][0]}..{report['seeds'][-1]} from {len(args.merge)} parts)")
        return
    for profile in args.profiles:
        for policy in args.policies:
            start = time.perf_counter()
            report = validate(
                out / f"{profile}-{policy}",
                profile=profile,
                policy=policy,
                quick=False,
                studies=args.studies,
                seed=args.seed,
                progress=False,
                seed_per_action=args.seed_per_action,
                fork_seed=args.fork_seed,
                findings=False if args.no_findings else None,
                mutants=args.mutants,
            )
            show(report, profile, policy, time.perf_counter() - start)
            (out / f"{profile}-{policy}" / "summary.json").write_text(
                json.dumps(
                    {
                        k: report[k]
                        for k in ("coverage", "quantities", "not_applicable", "checks", "mutants", "passed", "wall_s")
                    },
                    indent=1,
                    default=str,
                )
            )
    print(
        f"\n(reproduce: .venv/bin/python benchmarks/validation.py --profiles {' '.join(args.profiles)} "
        f"--policies {' '.join(args.policies)}"
        + (f" --studies {args.studies}" if args.studies else "")
        + (f" --seed {args.seed}" if args.seed != 1 else "")
        + (" --no-findings" if args.no_findings else "")
        + (" --seed-per-action" if args.seed_per_action else "")
        + (f" --fork-seed {args.fork_seed}" if args.fork_seed else "")
        + (" --mutants" if args.mutants else "")
        + ")"
    )


if __name__ == "__main__":
    main()
