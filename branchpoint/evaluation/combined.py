"""One report over several runs: `branchpoint report RUN_A RUN_B … --out DIR`.

Each run keeps its own full report (DIR/<run>/report.md and figures, from its metrics.json), and
DIR/report.md sets the runs side by side: the seed-study table and the by-condition table with
one row per run and condition (rows labelled `run: condition`), the cost-by-outcome figure over
all of them (PNG, SVG and CSV), each run's warnings about identical conditions, and the
provenance of the report and of each run's files.
"""

from __future__ import annotations

import os
from pathlib import Path

from branchpoint.errors import InputError
from branchpoint.evaluation.metrics_file import MetricsReport, read_metrics
from branchpoint.evaluation.report import (
    COLUMNS,
    SIMULATED_NOTE,
    condition_row,
    is_simulated,
    mark_simulated_tables,
    seed_study_table,
    tpc_caption,
    write_report,
)
from branchpoint.evaluation.report_format import md_table
from branchpoint.evaluation.report_provenance import folder_provenance, provenance_section
from branchpoint.evaluation.report_sections import identical_section
from branchpoint.evaluation.value.value_file import read_value
from branchpoint.provenance import Provenance, collect
from branchpoint.traces import FIGURES_DIR, REPORT_FILE, VALUE_FILE


def run_names(run_dirs: list[Path]) -> list[str]:
    """A distinct short name per run: its folder name, with its parent's when two share one."""
    names = [Path(d).resolve().name if Path(d).is_dir() else Path(d).resolve().parent.name for d in run_dirs]
    if len(set(names)) < len(names):
        names = ["/".join(Path(d).resolve().parts[-2:]) for d in run_dirs]
    if len(set(names)) < len(names):
        raise InputError("report: the same run directory is given twice")
    return names


def combined_metrics(runs: dict[str, MetricsReport]) -> MetricsReport:
    """A `MetricsReport` whose conditions are every run's, labelled `run: condition` (no overall
    block: the runs' questions need not be comparable)."""
    first = next(iter(runs.values()))
    lams = {m.lam for m in runs.values()}
    mus = {m.mu for m in runs.values()}
    if len(lams) > 1 or len(mus) > 1:
        raise InputError(
            f"report: the runs were evaluated with different TPC weights (λ {sorted(map(str, lams))}, "
            f"μ {sorted(map(str, mus))}); evaluate them with the same --lam and --mu"
        )
    by_condition = {
        f"{name}: {label}": m for name, metrics in runs.items() for label, m in metrics.by_condition.items()
    }
    return MetricsReport(
        judge=", ".join(sorted({m.judge for m in runs.values()})),
        lam=first.lam,
        mu=first.mu,
        bootstrap=first.bootstrap,
        by_condition=by_condition,
    )


def write_combined_report(
    run_dirs: list[Path], out_dir: Path, title: str | None = None
) -> tuple[Path, dict[str, Path | None]]:
    """Write DIR/report.md over several runs, each run's own report under DIR/<run>/, and the
    combined cost-by-outcome figure; returns the report's path and the figures written."""
    from branchpoint.evaluation.figure_common import write_csv
    from branchpoint.evaluation.figure_data import FIGURE_DATA
    from branchpoint.evaluation.figures import FIGURES, plot_tpc_outcome

    if len(run_dirs) < 2:
        raise InputError("report: a combined report needs two or more run directories")
    out = Path(out_dir)
    names = run_names(run_dirs)
    runs = {name: read_metrics(Path(d)) for name, d in zip(names, run_dirs)}
    folders = {name: Path(d) if Path(d).is_dir() else Path(d).parent for name, d in zip(names, run_dirs)}
    simulated = [name for name, m in runs.items() if m.simulated or is_simulated(folders[name])]
    figures: dict[str, Path | None] = {}
    heading = title or "branchpoint report: " + ", ".join(names)
    if simulated and SIMULATED_NOTE not in heading:
        heading += f" {SIMULATED_NOTE}"
    parts = [f"# {heading}", ""]
    if simulated and len(simulated) < len(runs):
        parts += [f"Runs of the simulated model: {', '.join(f'`{n}`' for n in simulated)}.", ""]
    for name, metrics in runs.items():
        warning = identical_section(metrics)
        if warning:
            parts += [f"Run `{name}`:", "", *warning]
    merged = combined_metrics(runs).model_copy(update={"simulated": bool(simulated)})
    parts += [
        tpc_caption(merged),
        "",
        "## Results (seed-study layout)",
        "",
        "Rows are `run: condition`; accuracies in %, TPC in tokens per correct answer.",
        "",
        seed_study_table(merged),
        "",
        "## By condition",
        "",
        md_table(COLUMNS, [condition_row(label, m) for label, m in merged.by_condition.items()]),
        "",
    ]
    outcome = plot_tpc_outcome(merged, out / FIGURES_DIR / FIGURES["tpc_outcome"])
    figures["tpc_outcome"] = outcome
    if outcome is not None:
        write_csv(outcome.with_suffix(".csv"), *FIGURE_DATA["tpc_outcome"](merged))
        parts += ["## TPC by outcome", "", f"![TPC by outcome]({os.path.relpath(outcome, out)})", ""]
    parts += ["## Each run", ""]
    rows: list[tuple[str, Provenance]] = [("report.md", collect("report"))]
    for name, run_dir in zip(names, run_dirs):
        target = out / name.replace("/", "_")
        report, own = write_report(Path(run_dir), target, title=f"branchpoint report: {name}")
        figures.update({f"{name}/{k}": p for k, p in own.items()})
        parts += [f"- `{name}`: [{os.path.relpath(report, out)}]({os.path.relpath(report, out)})"]
        folder = Path(run_dir) if Path(run_dir).is_dir() else Path(run_dir).parent
        value = read_value(folder / VALUE_FILE).provenance if (folder / VALUE_FILE).is_file() else None
        rows += [(f"{name}: {label}", p) for label, p in folder_provenance(folder, runs[name].provenance, value)]
    parts += ["", *provenance_section(rows, "branchpoint runs show RUN_DIR")]
    path = out / REPORT_FILE
    text = "\n".join([*parts, ""])
    path.write_text(mark_simulated_tables(text) if simulated else text, encoding="utf-8")
    return path, figures
