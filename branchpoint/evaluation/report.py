"""Human-readable views of metrics.json (`metrics_file.MetricsReport`): a rich table for the
terminal, a markdown report, and `write_report` (report.md + PNG figures for a run directory).

All accept the model, or a metrics dict as `compute_metrics` returns it (validated into the
model first). The main table follows the seed study's layout (rows = conditions, columns =
answer accuracy, abstention accuracy per category AU / FP / UC, TPC) so results can be set side
by side; every number carries its bootstrap 95 % interval in brackets. The sections after the
main tables are in `report_sections`, `report_sweep_sections` and `report_robustness_sections`,
number formats in `report_format`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from branchpoint.evaluation import report_robustness_sections as robustness
from branchpoint.evaluation import report_sections as sections
from branchpoint.evaluation import report_sweep_sections as sweeps
from branchpoint.evaluation.metrics_blocks import Summary
from branchpoint.evaluation.metrics_file import MetricsReport, as_metrics, read_metrics
from branchpoint.evaluation.report_budgets import budgets_section
from branchpoint.evaluation.report_epochs import epochs_section
from branchpoint.evaluation.report_format import (
    fmt_accuracy,
    fmt_mean,
    fmt_num_ci,
    fmt_pct_ci,
    fmt_tpc,
    md_table,
    pct,
    short_label,
    whole,
)
from branchpoint.evaluation.value.markdown import value_markdown
from branchpoint.evaluation.value.value_file import ValueReport, read_value
from branchpoint.traces import (
    EXECUTIONS_FILE,
    FIGURES_DIR,
    FORKS_FILE,
    JUDGED_FILE,
    METRICS_FILE,
    REPORT_FILE,
    SPEC_FILE,
    VALUE_FILE,
    VIEWER_DIR,
)

COLUMNS: tuple[str, ...] = (
    "condition",
    "n",
    "answer acc",
    "abstention acc",
    "overall acc",
    "TPC",
    "mean searches",
    "mean input tok",
    "mean output tok",
)
_CATEGORY_COLUMNS: tuple[str, ...] = (
    "category",
    "n",
    "accuracy",
    "TPC",
    "mean searches",
    "mean input tok",
    "mean output tok",
)
_CATEGORY_NAMES: dict[str, str] = {
    "answerable": "answerable",
    "AU": "AU (answer unknown)",
    "FP": "FP (false premise)",
    "UC": "UC (underspecified context)",
    "unanswerable": "unanswerable (no category)",
}


def _n(m: Summary, short: bool = False) -> str:
    if not m.n_incomplete:
        return str(m.n)
    return f"{m.n} (+{m.n_incomplete})" if short else f"{m.n} (+{m.n_incomplete} incomplete)"


def condition_row(label: str, m: Summary) -> list[str]:
    """A row of the by-condition table."""
    return [
        label,
        _n(m),
        fmt_accuracy(m.answer_accuracy),
        fmt_accuracy(m.abstention_accuracy),
        fmt_accuracy(m.overall_accuracy),
        fmt_tpc(m.tpc),
        fmt_mean(m.mean_search_calls),
        fmt_mean(m.mean_input_tokens),
        fmt_mean(m.mean_output_tokens),
    ]


def _category_row(key: str, m: Summary) -> list[str]:
    accuracy = m.answer_accuracy if key == "answerable" else m.abstention_accuracy
    return [
        _CATEGORY_NAMES.get(key, key),
        _n(m),
        fmt_accuracy(accuracy),
        fmt_tpc(m.tpc),
        fmt_mean(m.mean_search_calls),
        fmt_mean(m.mean_input_tokens),
        fmt_mean(m.mean_output_tokens),
    ]


def tpc_caption(metrics: MetricsReport | dict[str, Any]) -> str:
    """One sentence on how TPC was computed, with this run's λ and μ."""
    m = as_metrics(metrics)
    return (
        f"TPC (tokens per correctness) = Σ(g + λ·x + μ·|S|) / #correct with λ = {m.lam:g}, "
        f"μ = {m.mu:g}: g generated tokens (reasoning included), x input tokens, "
        "|S| search calls, summed over scored questions; ∞ when nothing is correct; lower is "
        "better. Correct = answer judged CORRECT (answerable) or abstained (unanswerable); "
        f"judge: {m.judge}; incomplete executions are excluded."
    )


#: Short headers for the terminal table, so it fits 80 columns.
_SHORT_COLUMNS: tuple[str, ...] = (
    "condition",
    "n",
    "answer",
    "abstain",
    "overall",
    "TPC",
    "searches",
    "in tok",
    "out tok",
)


def comparison_table(metrics: MetricsReport | dict[str, Any]) -> Table:
    """A rich table with one row per condition (accuracies in %, means per execution)."""
    m_all = as_metrics(metrics)
    table = Table(
        title="Accuracy (%) and cost by condition",
        caption=tpc_caption(m_all),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # the condition (a fork study's labels are long) folds onto more lines; the numbers never wrap,
    # so a narrow terminal shows every one of them
    table.add_column(_SHORT_COLUMNS[0], justify="left", overflow="fold", ratio=1)
    for col in _SHORT_COLUMNS[1:]:
        table.add_column(col, justify="right", no_wrap=True)
    labels = {label: short_label(label) for label in m_all.by_condition}
    if len(set(labels.values())) < len(labels):  # shortening made two conditions look alike
        labels = {label: label for label in labels}
    for k, group in enumerate(m_all.identical_conditions or [], start=1):
        for label in group["conditions"]:  # rows that sent identical requests, marked ≡k
            if label in labels:
                labels[label] += f" ≡{k}"
    if m_all.identical_conditions:
        table.caption = (
            "≡k: rows with the same k sent identical requests to the model (their difference is label or "
            f"sampling only).\n{table.caption}"
        )
    for label, m in m_all.by_condition.items():
        tpc = m.tpc
        table.add_row(
            labels[label],
            _n(m, short=True),
            *(pct(v) for v in (m.answer_accuracy, m.abstention_accuracy, m.overall_accuracy)),
            fmt_tpc(tpc) if tpc is None or math.isinf(float(tpc)) else f"{float(tpc):,.0f}",
            fmt_mean(m.mean_search_calls),
            whole(m.mean_input_tokens),
            whole(m.mean_output_tokens),
        )
    return table


SEED_COLUMNS: tuple[str, ...] = (
    "condition",
    "n",
    "Answer Acc",
    "Abst. Acc AU",
    "Abst. Acc FP",
    "Abst. Acc UC",
    "Abst. Acc (all)",
    "TPC",
)


def seed_study_table(metrics: MetricsReport | dict[str, Any]) -> str:
    """Rows = conditions; columns = answer accuracy, abstention accuracy AU / FP / UC / all, TPC."""
    rows = []
    for label, m in as_metrics(metrics).by_condition.items():
        rows.append(
            [
                label,
                str(m.n),
                fmt_pct_ci(m, "answer_accuracy"),
                *(fmt_pct_ci(m.by_category.get(c), "abstention_accuracy") for c in ("AU", "FP", "UC")),
                fmt_pct_ci(m, "abstention_accuracy"),
                fmt_num_ci(m, "tpc", 0),
            ]
        )
    return md_table(SEED_COLUMNS, rows)


def markdown_report(
    metrics: MetricsReport | dict[str, Any],
    title: str,
    figures: dict[str, str | None] | None = None,
    viewer: str | None = None,
) -> str:
    """A markdown report: the seed-study table, cost, outcomes, cross-condition views, agreement,
    then a per-category table for each condition.

    `figures` maps figure keys (`figures.FIGURES`) to paths relative to the report, or None for
    a skipped figure; without `figures` the report has no figure lines at all. `viewer` is the
    path of a viewer export's index.html relative to the report: the report then links each
    condition's outcomes into it.
    """
    m_all = as_metrics(metrics)
    boot = m_all.bootstrap
    parts = [f"# {title}", ""]
    parts += sections.identical_section(m_all)
    parts += [tpc_caption(m_all), ""]
    if boot.resamples:
        parts += [
            f"Brackets: bootstrap {100 * float(boot.confidence):.0f}% intervals "
            f"({boot.resamples} resamples of questions within each condition, seed {boot.seed}).",
            "",
        ]
    if m_all.n_unparseable:
        parts += [f"{m_all.n_unparseable} executions whose judge output could not be parsed are left out.", ""]
    parts += [
        "## Results (seed-study layout)",
        "",
        "Accuracies in %, TPC in tokens per correct answer.",
        "",
        seed_study_table(m_all),
        "",
    ]
    parts += ["## By condition", ""]
    rows = [condition_row(label, m) for label, m in m_all.by_condition.items()]
    parts += [md_table(COLUMNS, rows), ""]
    if any(m.tpc_channels is not None for m in m_all.by_condition.values()):
        parts += sections.cost_section(m_all)
        parts += sections.outcome_section(m_all, figures)
        if viewer:
            parts += sections.viewer_section(m_all, viewer)
    parts += sections.search_effect_section(m_all, figures)
    parts += sweeps.sweep_section(m_all, figures)
    parts += sections.over_search_section(m_all)
    parts += sections.evidence_section(m_all, figures)
    parts += sections.multi_turn_section(m_all, figures)
    parts += sweeps.effort_section(m_all)
    parts += sweeps.frontier_section(m_all, figures)
    parts += epochs_section(m_all)
    parts += budgets_section(m_all)
    parts += robustness.tpc_sensitivity_section(m_all)
    parts += robustness.agreement_section(m_all, figures)
    for label, m in m_all.by_condition.items():
        parts += [f"## `{label}` by category", ""]
        cat_rows = [_category_row(k, c) for k, c in m.by_category.items()]
        parts += [md_table(_CATEGORY_COLUMNS, cat_rows), ""]
    parts += [
        "Accuracy is answer accuracy for answerable questions and abstention accuracy for AU / FP / UC questions.",
        "",
    ]
    return "\n".join(parts)


#: What a simulated model's tables and figures say (`figure_common.SIMULATED_NOTE`).
SIMULATED_NOTE = "(simulated model)"


def is_simulated(run_dir: Path) -> bool:
    """True when a run's records came from the simulated model: its spec names provider `sim`, or
    a record says `model_provider: sim` (see `branchpoint.experiments.execution_records.simulated_marker`)."""
    import yaml

    spec = run_dir / SPEC_FILE
    if spec.is_file():
        try:
            model = (yaml.safe_load(spec.read_text(encoding="utf-8")) or {}).get("model") or {}
        except yaml.YAMLError:
            model = {}
        if model.get("provider") == "sim" or str(model.get("name", "")).startswith("branchpoint-sim"):
            return True
    for name in (EXECUTIONS_FILE, JUDGED_FILE, FORKS_FILE):
        path = run_dir / name
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                first = f.readline()
            try:
                if (json.loads(first) if first.strip() else {}).get("model_provider") == "sim":
                    return True
            except (json.JSONDecodeError, AttributeError):
                pass
    return False


def mark_simulated_tables(text: str) -> str:
    """A report's markdown with "(simulated model)" on the heading of every section that holds a
    table, so a table copied out of a sim run's report still says where its numbers came from."""
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    for k, i in enumerate(heads):
        end = heads[k + 1] if k + 1 < len(heads) else len(lines)
        has_table = any(line.startswith("|") for line in lines[i + 1 : end])
        if has_table and SIMULATED_NOTE not in lines[i]:
            lines[i] = f"{lines[i]} {SIMULATED_NOTE}"
    return "\n".join(lines)


def write_report(
    run_dir: Path, out_dir: Path | None = None, title: str | None = None
) -> tuple[Path, dict[str, Path | None]]:
    """Write report.md and figures/*.png for a run directory from its metrics.json, with the
    search-value section when the directory has a value.json (`branchpoint value`); a directory
    with only value.json gets a report of that section.

    Returns the report's path and each figure's path (None where its data is absent; the
    report then says so in a line). When a viewer export sits in `out/viewer/`, the report links
    each condition's outcomes into it.
    """
    from branchpoint.evaluation.figures import write_figures

    run_dir = Path(run_dir)
    source = run_dir / METRICS_FILE if run_dir.is_dir() else run_dir
    value_path = source.parent / VALUE_FILE
    value = read_value(value_path) if value_path.is_file() else None
    out = Path(out_dir) if out_dir is not None else source.parent
    name = title or f"branchpoint report: {source.parent.resolve().name}"
    report = out / REPORT_FILE
    figures: dict[str, Path | None] = {}
    if not source.is_file() and value is not None:  # a fork study scored by `branchpoint value` only
        out.mkdir(parents=True, exist_ok=True)
        text = f"# {name}\n\n{value_markdown(value)}\n" + _value_figures(value, out, figures)
        report.write_text(
            text
            + settings_markdown({"value (value.json)": value.settings})
            + _provenance_text(source.parent, None, value),
            encoding="utf-8",
        )
        return report, figures
    metrics = read_metrics(run_dir)
    if not metrics.simulated and is_simulated(source.parent):  # metrics.json of an older evaluate
        metrics = metrics.model_copy(update={"simulated": True})
    figures = write_figures(metrics, out / FIGURES_DIR)
    relative = {k: (os.path.relpath(p, out) if p is not None else None) for k, p in figures.items()}
    if metrics.simulated and "simulated model" not in name:
        name = f"{name} (simulated model)"
    export = out / VIEWER_DIR / "index.html"
    viewer = os.path.relpath(export, out) if export.is_file() else None
    text = markdown_report(metrics, name, relative, viewer)
    if value is not None:
        text += "\n" + value_markdown(value) + "\n" + _value_figures(value, out, figures, metrics.simulated)
    if metrics.simulated:
        text = mark_simulated_tables(text)
    text += settings_markdown({"evaluate (metrics.json)": metrics.settings, "value (value.json)": _settings_of(value)})
    report.write_text(text + _provenance_text(source.parent, metrics, value), encoding="utf-8")
    return report, figures


def _settings_of(value: ValueReport | None) -> dict[str, Any] | None:
    return value.settings if value is not None else None


def settings_markdown(blocks: dict[str, dict[str, Any] | None]) -> str:
    """The report's "Settings" section: for each output file with a settings block, the spec it
    read, the settings that spec set, and the ones given on the command line ("" when none)."""
    lines = []
    for what, block in blocks.items():
        if not block or "from_spec" not in block:
            continue
        spec = block.get("spec")
        source = (
            f"from `{spec}`: {', '.join(block['from_spec']) or 'defaults only'}"
            if spec
            else "no spec.yaml: built-in defaults"
        )
        given = block.get("overrides") or {}
        cli = "; on the command line: " + ", ".join(f"{k} = {v}" for k, v in given.items()) if given else ""
        lines.append(f"- {what}: {source}{cli}")
    return "\n## Settings\n\n" + "\n".join(lines) + "\n" if lines else ""


def _provenance_text(folder: Path, metrics: MetricsReport | None, value: ValueReport | None) -> str:
    """The report's provenance section: the report's own block, then what the folder's files record."""
    from branchpoint.evaluation.report_provenance import folder_provenance, provenance_section
    from branchpoint.provenance import collect

    rows = folder_provenance(folder, metrics.provenance if metrics else None, value.provenance if value else None)
    hint = f"branchpoint runs show {folder}"
    return "\n" + "\n".join(provenance_section([("report.md", collect("report")), *rows], hint))


def _value_figures(value: ValueReport, out: Path, figures: dict[str, Path | None], simulated: bool = False) -> str:
    """The figures drawn from value.json (learning curves, when `value --learning-curves` ran;
    the per-stratum panels and the SD of gains' bootstrap distribution, when value.json has them),
    added to `figures` and linked from the report ("" when there are none)."""
    from branchpoint.evaluation.value.curve_figure import plot_learning_curves
    from branchpoint.evaluation.value.seed_figures import plot_gain_sd, plot_strata_panels

    path = plot_learning_curves(value, out / FIGURES_DIR / "learning_curves.png", simulated)
    figures["learning_curves"] = path
    text = "" if path is None else f"\n![Learning curves]({os.path.relpath(path, out)})\n"
    for key, title, plot in (
        ("strata_panels", "Per-stratum panels", plot_strata_panels),
        ("gain_sd", "SD of gains: bootstrap distribution", plot_gain_sd),
    ):
        drawn = plot(value, out / FIGURES_DIR / f"{key}.png", simulated)
        figures[key] = drawn
        if drawn is not None:
            text += f"\n![{title}]({os.path.relpath(drawn, out)})\n"
    return text
