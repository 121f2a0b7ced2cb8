"""The full validation on the simulated model: coverage of every quantity's 95% interval.

Runs `branchpoint validate` (the full preset unless told otherwise) for each profile x policy and
prints the markdown coverage table that BENCHMARKS.md holds: per quantity its kind, coverage over
the studies, mean error ± its standard error over studies, and whether its checks passed.

    .venv/bin/python benchmarks/validation.py [--profiles instruct over_searching] [--policies constrained]
        [--studies 40] [--seed 1] [--no-findings] [--out /tmp/bp-validation]

On a shared machine the studies can run as several processes over disjoint seeds (`--seed 1
--studies 7`, `--seed 8 --studies 7 --no-findings`, ...) and be merged into one table:

    .venv/bin/python benchmarks/validation.py --merge OUT1/over_searching-constrained OUT2/... [--out DIR]

which re-aggregates the per-study rows of each part's validation.json (the same checks as one
run over all the seeds) and keeps each part's request and findings checks.
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

from branchpoint.experiments.validation import VALIDATION_FILE, validate
from branchpoint.experiments.validation.compare import aggregate
from branchpoint.experiments.validation.dispersion import dispersion

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


def table(report: dict) -> str:
    """The coverage table: every quantity at price 0 (and without a price), one row each."""
    by_q: dict[str, list[dict]] = {}
    for c in report["checks"]:
        by_q.setdefault(c["quantity"], []).append(c)
    lines = ["| quantity | kind | coverage | RMS z | mean error ± SE | checks |", "|---|---|---|---|---|---|"]
    for name, s in report["quantities"].items():
        m = PRICED.match(name)
        if m and float(m["price"]) > 0:
            continue
        cov = "–" if s["coverage"] is None else f"{s['coverage']:.2f}"
        rz = "–" if s.get("rms_z") is None else f"{s['rms_z']:.2f}"
        lines.append(f"| {name} | {s['kind']} | {cov} | {rz} | {_err(s)} | {_verdict(by_q.get(name, []))} |")
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
    per_study = [s["quantities"] for s in studies]
    summary, checks = aggregate(per_study)
    names = {q for s in per_study for q in s}
    other = [c for r in reports for c in r["checks"] if c["quantity"] not in names]
    all_checks = [vars(c) for c in checks] + other
    covered = [row["covered"] for s in per_study for row in s.values() if row["covered"] is not None]
    return {
        **{k: first[k] for k in ("profile", "policy", "policy_style", "quick", "settings")},
        "studies": len(studies),
        "seeds": sorted(seeds),
        "coverage": sum(covered) / len(covered) if covered else None,
        "quantities": summary,
        "skipped_quantities": sorted({q for r in reports for q in r["skipped_quantities"]}),
        "findings": next((r["findings"] for r in reports if r.get("findings")), None),
        "checks": all_checks,
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
    print(f"\nskipped: {report['skipped_quantities']}")
    failed = [f"{c['quantity']}: {c['what']} {c['detail']}" for c in report["checks"] if not c["passed"]]
    if failed:
        print("\nfailed checks:\n" + "\n".join(failed))
    if report.get("findings"):
        print(f"\nseed-study findings: {report['findings']}")
    if report.get("dispersion"):
        print("\n" + dispersion_table(report["dispersion"]))


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
            )
            show(report, profile, policy, time.perf_counter() - start)
            (out / f"{profile}-{policy}" / "summary.json").write_text(
                json.dumps(
                    {k: report[k] for k in ("coverage", "quantities", "checks", "passed", "wall_s", "findings")},
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
        + ")"
    )


if __name__ == "__main__":
    main()
