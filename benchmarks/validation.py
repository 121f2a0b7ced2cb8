"""The full validation on the simulated model: coverage of every quantity's 95% interval.

Runs `branchpoint validate` (the full preset unless told otherwise) for each profile x policy and
prints the markdown coverage table that BENCHMARKS.md holds: per quantity its kind, coverage over
the studies, mean error ± its standard error over studies, and whether its checks passed.

    .venv/bin/python benchmarks/validation.py [--profiles instruct over_searching] [--policies constrained]
        [--studies 40] [--out /tmp/bp-validation]
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

from branchpoint.experiments.validation import validate

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profiles", nargs="+", default=["instruct"])
    ap.add_argument("--policies", nargs="+", default=["constrained"])
    ap.add_argument("--studies", type=int, default=None, help="default: the full preset (40)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--seed-per-action", action="store_true", help="diagnostic: fork each action with its own model seed"
    )
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bp-validation-"))
    for profile in args.profiles:
        for policy in args.policies:
            start = time.perf_counter()
            report = validate(
                out / f"{profile}-{policy}",
                profile=profile,
                policy=policy,
                quick=False,
                studies=args.studies,
                progress=False,
                seed_per_action=args.seed_per_action,
            )
            s = report["settings"]
            print(
                f"\n### profile {profile}, policy {policy}: {report['studies']} studies of "
                f"{s['answerable']}+{s['unanswerable']} forked questions (run: x{s['run_factor']}), m = {s['repeats']}, "
                f"budget {s['search_budget']}; overall coverage {report['coverage']:.3f}; "
                f"{'all checks passed' if report['passed'] else 'SOME CHECKS FAILED'} "
                f"({time.perf_counter() - start:.0f} s)\n"
            )
            print(table(report))
            print("\nCoverage (mean error) at every price λ:\n")
            print(price_table(report))
            print(f"\nskipped: {report['skipped_quantities']}")
            (out / f"{profile}-{policy}" / "summary.json").write_text(
                json.dumps(
                    {k: report[k] for k in ("coverage", "quantities", "checks", "passed", "wall_s", "findings")},
                    indent=1,
                    default=str,
                )
            )
            if report.get("findings"):
                print(f"\nseed-study findings: {report['findings']}")
    print(
        f"\n(reproduce: .venv/bin/python benchmarks/validation.py --profiles {' '.join(args.profiles)} "
        f"--policies {' '.join(args.policies)}"
        + (f" --studies {args.studies}" if args.studies else "")
        + (" --seed-per-action" if args.seed_per_action else "")
        + ")"
    )


if __name__ == "__main__":
    main()
