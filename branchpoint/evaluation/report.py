"""Human-readable views of a metrics dict: a rich table for the terminal, a markdown report, and
`write_report` (report.md + PNG figures for a run directory).

All accept the dict from `compute_metrics` or the same dict read back from metrics.json (where
infinities are the string "inf"). The main table follows the seed study's layout (rows =
conditions, columns = answer accuracy, abstention accuracy per category AU / FP / UC, TPC) so
results can be set side by side; every number carries its bootstrap 95 % interval in brackets.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from branchpoint.errors import InputError
from branchpoint.evaluation.tally import condition_label
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

_COLUMNS: tuple[str, ...] = (
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


def fmt_accuracy(value: float | None) -> str:
    """An accuracy as a percentage with one decimal; "—" when undefined."""
    return "—" if value is None else f"{100 * value:.1f}%"


def fmt_tpc(value: float | str | None) -> str:
    """A TPC with thousands separators; "∞" when nothing was correct, "—" when undefined."""
    if value is None:
        return "—"
    value = float(value)  # "inf" read back from JSON parses too
    return "∞" if math.isinf(value) else f"{value:,.1f}"


def fmt_mean(value: float | None) -> str:
    """A mean with one decimal; "—" when undefined."""
    return "—" if value is None else f"{value:,.1f}"


def _condition_row(label: str, m: dict[str, Any]) -> list[str]:
    return [
        label,
        str(m["n"]) + (f" (+{m['n_incomplete']} incomplete)" if m.get("n_incomplete") else ""),
        fmt_accuracy(m["answer_accuracy"]),
        fmt_accuracy(m["abstention_accuracy"]),
        fmt_accuracy(m["overall_accuracy"]),
        fmt_tpc(m["tpc"]),
        fmt_mean(m["mean_search_calls"]),
        fmt_mean(m["mean_input_tokens"]),
        fmt_mean(m["mean_output_tokens"]),
    ]


def _category_row(key: str, m: dict[str, Any]) -> list[str]:
    accuracy = m["answer_accuracy"] if key == "answerable" else m["abstention_accuracy"]
    return [
        _CATEGORY_NAMES.get(key, key),
        str(m["n"]) + (f" (+{m['n_incomplete']} incomplete)" if m.get("n_incomplete") else ""),
        fmt_accuracy(accuracy),
        fmt_tpc(m["tpc"]),
        fmt_mean(m["mean_search_calls"]),
        fmt_mean(m["mean_input_tokens"]),
        fmt_mean(m["mean_output_tokens"]),
    ]


def tpc_caption(metrics: dict[str, Any]) -> str:
    """One sentence on how TPC was computed, with this run's λ and μ."""
    return (
        f"TPC (tokens per correctness) = Σ(g + λ·x + μ·|S|) / #correct with λ = {metrics['lam']:g}, "
        f"μ = {metrics['mu']:g}: g generated tokens (reasoning included), x input tokens, "
        "|S| search calls, summed over scored questions; ∞ when nothing is correct; lower is "
        "better. Correct = answer judged CORRECT (answerable) or abstained (unanswerable); "
        f"judge: {metrics['judge']}; incomplete executions are excluded."
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _whole(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


#: Short headers for the terminal table, so it fits 80 columns.
_SHORT_COLUMNS: tuple[str, ...] = (
    "condition", "n", "answer", "abstain", "overall", "TPC", "searches", "in tok", "out tok",
)  # fmt: skip


def short_label(label: str) -> str:
    """`agent.search=true,retrieval.sources.noisy.chunk_words=40` -> `agent.search=true,noisy.chunk_words=40`:
    each key keeps its section and setting (the last two parts), never a bare `default=clean`."""
    return ",".join(".".join(part.split("=", 1)[0].split(".")[-2:]) + "=" + part.split("=", 1)[1]
                    if "=" in part else part for part in label.split(","))


def comparison_table(metrics: dict[str, Any]) -> Table:
    """A rich table with one row per condition (accuracies in %, means per execution)."""
    table = Table(
        title="Accuracy (%) and cost by condition",
        caption=tpc_caption(metrics),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for i, col in enumerate(_SHORT_COLUMNS):
        table.add_column(col, justify="left" if i == 0 else "right", no_wrap=True)
    labels = {label: short_label(label) for label in metrics["by_condition"]}
    if len(set(labels.values())) < len(labels):  # shortening made two conditions look alike
        labels = {label: label for label in labels}
    for k, group in enumerate(metrics.get("identical_conditions") or [], start=1):
        for label in group["conditions"]:  # rows that sent identical requests, marked ≡k
            if label in labels:
                labels[label] += f" ≡{k}"
    for label, m in metrics["by_condition"].items():
        tpc = m["tpc"]
        table.add_row(
            labels[label],
            str(m["n"]) + (f" (+{m['n_incomplete']})" if m.get("n_incomplete") else ""),
            *(_pct(m[k]) for k in ("answer_accuracy", "abstention_accuracy", "overall_accuracy")),
            fmt_tpc(tpc) if tpc is None or math.isinf(float(tpc)) else f"{float(tpc):,.0f}",
            fmt_mean(m["mean_search_calls"]),
            *(_whole(m[k]) for k in ("mean_input_tokens", "mean_output_tokens")),
        )
    return table


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(header: tuple[str, ...], rows: list[list[str]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


SEED_COLUMNS: tuple[str, ...] = (
    "condition", "n", "Answer Acc", "Abst. Acc AU", "Abst. Acc FP", "Abst. Acc UC", "Abst. Acc (all)", "TPC",
)  # fmt: skip


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def fmt_interval(ci: Any, scale: float = 1.0, digits: int = 1) -> str:
    """` [lo, hi]` of a bootstrap interval (scaled), "" when there is none."""
    if not ci:
        return ""
    lo, hi = (_num(v) for v in ci)
    if lo is None or hi is None:
        return ""

    def one(v: float) -> str:
        return ("∞" if v > 0 else "−∞") if math.isinf(v) else f"{v * scale:,.{digits}f}"

    return f" [{one(lo)}, {one(hi)}]"


def fmt_pct_ci(m: dict[str, Any] | None, key: str) -> str:
    """An accuracy in % with its interval, e.g. `61.2 [55.0, 67.1]`; "—" when undefined."""
    if not m or m.get(key) is None:
        return "—"
    return f"{100 * float(m[key]):.1f}{fmt_interval(m.get(key + '_ci'), 100.0)}"


def fmt_num_ci(m: dict[str, Any] | None, key: str, digits: int = 1) -> str:
    """A number (TPC, a mean, a share) with its interval; ∞ for infinity, "—" when undefined."""
    if not m or m.get(key) is None:
        return "—"
    v = float(m[key])
    text = "∞" if math.isinf(v) else f"{v:,.{digits}f}"
    return text + fmt_interval(m.get(key + "_ci"), 1.0, digits)


def _figure(figures: dict[str, str | None] | None, key: str, caption: str, missing: str) -> list[str]:
    if figures is None:
        return []
    if figures.get(key):
        return [f"![{caption}]({figures[key]})", ""]
    return [f"_Figure skipped: {missing}._", ""]


def _no_data(section: dict[str, Any] | list[Any] | None, default: str) -> str:
    reason = section.get("reason") if isinstance(section, dict) else None
    return f"No data: {reason or default}."


def seed_study_table(metrics: dict[str, Any]) -> str:
    """Rows = conditions; columns = answer accuracy, abstention accuracy AU / FP / UC / all, TPC."""
    rows = []
    for label, m in metrics["by_condition"].items():
        cats = m.get("by_category", {})
        rows.append([
            label, str(m["n"]), fmt_pct_ci(m, "answer_accuracy"),
            *(fmt_pct_ci(cats.get(c), "abstention_accuracy") for c in ("AU", "FP", "UC")),
            fmt_pct_ci(m, "abstention_accuracy"), fmt_num_ci(m, "tpc", 0),
        ])  # fmt: skip
    return _md_table(SEED_COLUMNS, rows)


def _cost_section(metrics: dict[str, Any]) -> list[str]:
    header = ("condition", "n", "TPC", "generated", "λ·input", "μ·search", "mean searches",
              "mean wall s", "model latency s / query", "s / model call")  # fmt: skip
    rows = []
    for label, m in metrics["by_condition"].items():
        ch = m.get("tpc_channels") or {}

        def share(name: str) -> str:
            c = ch.get(name)
            return "—" if not c or c.get("share") is None else f"{fmt_num_ci(c, 'per_correct', 0)} ({100 * float(c['share']):.0f}%)"

        rows.append([label, str(m["n"]), fmt_num_ci(m, "tpc", 0), share("generated"), share("input"), share("search"),
                     fmt_num_ci(m, "mean_search_calls", 2), fmt_num_ci(m, "mean_wall_s", 2),
                     fmt_num_ci(m, "mean_model_latency_s", 2), fmt_num_ci(m, "mean_model_call_latency_s", 2)])  # fmt: skip
    return [
        "## Cost channels and latency", "",
        "TPC split into its three channels, each as tokens per correct answer and (share of the "
        "total cost): generated tokens g, λ·input tokens, μ·search calls. Latency per query: mean "
        "wall-clock seconds, mean model-call seconds per execution and per call.", "",
        _md_table(header, rows), "",
    ]


def _outcome_section(metrics: dict[str, Any], figures: dict[str, str | None] | None) -> list[str]:
    outcomes = ("correct_answer", "wrong_answer", "correct_abstention", "failed_abstention")
    header = ("condition", "n", "correct answer", "wrong answer", "correct abstention", "failed abstention")
    rows = []
    for label, m in metrics["by_condition"].items():
        by = m.get("tpc_by_outcome") or {}
        rows.append([label, str(m["n"]), *(
            "—" if o not in by or by[o]["cost_per_execution"] is None
            else f"{fmt_num_ci(by[o], 'cost_per_execution', 0)} (n={by[o]['n']})" for o in outcomes
        )])  # fmt: skip
    return [
        "## TPC by outcome", "",
        "Mean cost (g + λ·x + μ·|S|) per execution within each outcome; a wrong answer includes "
        "not attempting an answerable question. TPC itself stays Σ cost / Σ correct.", "",
        _md_table(header, rows), "",
        *_figure(figures, "tpc_outcome", "TPC by outcome", "no scored executions"),
    ]


def _search_effect_section(metrics: dict[str, Any], figures: dict[str, str | None] | None) -> list[str]:
    pairs = metrics.get("search_effect")
    lines = ["## With vs without search", ""]
    if not pairs:
        lines += [_no_data(None, "no two conditions differ only in agent.search (or search_cap 0 vs > 0)"), ""]
    else:
        header = ("model", "with search", "n with / without", "answer acc Δ", "abstention acc Δ", "overall acc Δ", "TPC Δ")
        rows = []
        for p in pairs:
            rows.append([p["model"], p["with"], f"{p.get('n_with', '—')} / {p.get('n_without', '—')}",
                         *(_delta_pct(p[k]) for k in ("answer_accuracy", "abstention_accuracy", "overall_accuracy")),
                         fmt_num_ci(p["tpc"], "change", 0)])  # fmt: skip
        lines += ["Change = with search − without (percentage points; paired bootstrap 95% CI).", "",
                  _md_table(header, rows), ""]  # fmt: skip
    lines += _figure(figures, "accuracy_search", "Accuracy with vs without search", "no with/without-search pairs")
    return lines


def _delta_pct(entry: dict[str, Any]) -> str:
    if entry.get("change") is None:
        return "—"
    w, wo = entry.get("with"), entry.get("without")
    base = f"{100 * float(entry['change']):+.1f}{fmt_interval(entry.get('change_ci'), 100.0)}"
    return base if w is None or wo is None else f"{base} ({100 * float(wo):.1f} → {100 * float(w):.1f})"


def _sweep_section(metrics: dict[str, Any], figures: dict[str, str | None] | None) -> list[str]:
    sweeps = metrics.get("search_cap_sweep")
    lines = ["## Search-cap sweep and marginal ROI", ""]
    if not sweeps:
        lines += [_no_data(None, "no conditions differ only in agent.search_cap"), ""]
    for sweep in sweeps or []:
        other = condition_label(sweep["other"]) if sweep["other"] else "—"
        lines += [f"### {sweep['model']} (`{other}`)", ""]
        rows = [[str(p["cap"]), str(p["n"]), fmt_pct_ci(p, "answer_accuracy"), fmt_pct_ci(p, "abstention_accuracy"),
                 fmt_num_ci(p, "tpc", 0), fmt_num_ci(p, "mean_search_calls", 2)] for p in sweep["points"]]  # fmt: skip
        lines += [_md_table(("cap", "n", "Answer Acc", "Abst. Acc", "TPC", "mean searches"), rows), ""]
        n_at = {p["cap"]: p["n"] for p in sweep["points"]}
        roi = [[f"{r['from_cap']} → {r['to_cap']}", f"{n_at.get(r['from_cap'], '—')} / {n_at.get(r['to_cap'], '—')}",
                fmt_num_ci(r, "added_cost_per_query", 0),
                _roi(r, "overall_accuracy"), _roi(r, "answer_accuracy"), _roi(r, "abstention_accuracy")]
               for r in sweep["marginal_roi"]]  # fmt: skip
        threshold = sweep.get("roi_min_added_cost")
        note = (f" ROI is undefined (—) where the mean cost per query moves by less than {threshold:g} tokens."
                if threshold is not None else "")
        lines += ["Marginal ROI (study Appendix A.2): accuracy change in percentage points per 1,000 tokens "
                  "of added cost per query." + note, "",
                  _md_table(("caps", "n", "added cost / query", "overall pp / 1k", "answer pp / 1k", "abstention pp / 1k"), roi),
                  ""]  # fmt: skip
    lines += _figure(figures, "tpc_search_cap", "TPC vs search cap", "no search-cap sweep")
    lines += _figure(figures, "marginal_roi", "Marginal ROI per search-cap step", "no search-cap sweep")
    return lines


def _roi(step: dict[str, Any], metric: str) -> str:
    key = f"{metric}_per_1k_tokens"
    if step.get(key) is None:
        return "—"
    return f"{100 * float(step[key]):+.2f}{fmt_interval(step.get(key + '_ci'), 100.0, 2)}"


def _over_search_section(metrics: dict[str, Any]) -> list[str]:
    ov = metrics.get("over_search") or {}
    lines = ["## Over-search", ""]
    if not ov.get("available"):
        return lines + [_no_data(ov, "no minimal_search.jsonl"), ""]
    rows = [[label, str(e["n"]), fmt_num_ci(e, "mean_searches", 2), fmt_num_ci(e, "mean_minimal_searches", 2),
             fmt_num_ci(e, "over_search_pct", 1)] for label, e in ov["by_condition"].items()]  # fmt: skip
    rows.append(["all", str(ov["n"]), fmt_num_ci(ov, "mean_searches", 2), fmt_num_ci(ov, "mean_minimal_searches", 2),
                 fmt_num_ci(ov, "over_search_pct", 1)])  # fmt: skip
    judges = ", ".join(ov.get("judges") or []) or "unknown"
    lines += [
        "Over-search % (study Appendix A.1) = mean searches / mean minimal searches − 1, over correct "
        "executions, those that needed no search included (n = correct executions, of which n₀ made no "
        f"search; minimal searches from THINK forks, `branchpoint fork --minimal-search`; judge: {judges}).", "",
        _md_table(("condition", "n", "n₀", "mean searches", "mean minimal", "over-search %"),
                  [[r[0], r[1], str(e.get("n_no_search", "—")), *r[2:]]
                   for r, e in zip(rows, [*ov["by_condition"].values(), ov])]), "",
    ]  # fmt: skip
    by_model = ov.get("by_model") or {}
    avg = ov.get("model_average") or {}
    if by_model:
        model_rows = [[m, str(e["n"]), str(e.get("n_no_search", "—")), fmt_num_ci(e, "mean_searches", 3),
                       fmt_num_ci(e, "mean_minimal_searches", 3), fmt_num_ci(e, "over_search_pct", 1)]
                      for m, e in by_model.items()]  # fmt: skip
        if avg.get("n_models"):
            model_rows.append([f"average of {avg['n_models']} models", "—", "—", fmt_num_ci(avg, "mean_searches", 3),
                               fmt_num_ci(avg, "mean_minimal_searches", 3), fmt_num_ci(avg, "over_search_pct", 1)])  # fmt: skip
        lines += ["Per model (its conditions pooled) and the unweighted average over models, as the study "
                  "averages Table 8.", "",
                  _md_table(("model", "n", "n₀", "mean searches", "mean minimal", "over-search %"), model_rows), ""]  # fmt: skip
    return lines


def _evidence_section(metrics: dict[str, Any], figures: dict[str, str | None] | None) -> list[str]:
    ev = metrics.get("evidence_balance") or {}
    lines = ["## Evidence balance", ""]
    if not ev.get("available"):
        lines += [_no_data(ev, "no evidence judgments"), ""]
    else:
        from branchpoint.evaluation.figures import GROUP_NAMES

        header = ("condition", "n", "negative docs (unanswerable)", "negative docs (answerable)", *GROUP_NAMES.values())
        rows = []
        for label, e in [*ev["by_condition"].items(), ("all", ev)]:
            rows.append([label, str(e.get("n_unanswerable", "—")), fmt_pct_ci(e, "negative_share"), fmt_pct_ci(e.get("answerable"), "negative_share"), *(
                "—" if not e["groups"][g]["n"] else f"{fmt_pct_ci(e['groups'][g], 'abstention_accuracy')} (n={e['groups'][g]['n']})"
                for g in GROUP_NAMES
            )])  # fmt: skip
        lines += [
            "Abstention accuracy by the balance of positive (supports an answer) and negative "
            "(signals uncertainty) documents among those retrieved, and the share of negative "
            "documents among those retrieved for unanswerable and for answerable questions (study "
            f"§5.2, Tables 5 and 10); judge: {metrics['judge']}"
            + (f"; {ev['n_unparseable_documents']} unparseable document judgments left out" if ev.get("n_unparseable_documents") else "")
            + ".", "", _md_table(header, rows), "",
        ]  # fmt: skip
    lines += _figure(figures, "evidence_balance", "Evidence balance", "no evidence judgments")
    return lines


def _multi_turn_section(metrics: dict[str, Any], figures: dict[str, str | None] | None) -> list[str]:
    mt = metrics.get("multi_turn") or {}
    lines = ["## Multi-turn", ""]
    if not mt.get("available"):
        lines += [_no_data(mt, "no multi_turn.preceding key in the conditions"), ""]
    else:
        rows = []
        for series in mt["series"]:
            other = condition_label(series["other"]) if series["other"] else ""
            for p in series["points"]:
                rows.append([series["context"], other or "—", str(p["preceding"]), str(p["n"]),
                             fmt_pct_ci(p, "answer_accuracy"), fmt_pct_ci(p, "abstention_accuracy"),
                             fmt_num_ci(p, "tpc", 0)])  # fmt: skip
        lines += [_md_table(("context", "other", "preceding turns", "n", "Answer Acc", "Abst. Acc", "TPC"), rows), ""]
    lines += _figure(figures, "multi_turn", "Multi-turn curves", "no multi-turn conditions")
    return lines


def _effort_section(metrics: dict[str, Any]) -> list[str]:
    re_ = metrics.get("reasoning_effort") or {}
    lines = ["## Reasoning effort", ""]
    if not re_.get("available"):
        return lines + [_no_data(re_, "no reasoning_effort key in the conditions"), ""]
    rows = [[r["model"], r["effort"], str(r["n"]), fmt_pct_ci(r, "answer_accuracy"), fmt_pct_ci(r, "abstention_accuracy"),
             fmt_num_ci(r, "tpc", 0), fmt_num_ci(r, "mean_search_calls", 2), fmt_num_ci(r, "mean_output_tokens", 0),
             fmt_num_ci(r, "mean_reasoning_tokens", 0)] for r in re_["rows"]]  # fmt: skip
    header = ("model", "effort", "n", "Answer Acc", "Abst. Acc", "TPC", "searches", "output tok", "reasoning tok")
    return lines + [_md_table(header, rows), ""]


def _agreement_section(metrics: dict[str, Any]) -> list[str]:
    from branchpoint.evaluation.agreement import agreement_markdown

    agreement = metrics.get("judge_agreement")
    lines = ["## Judge agreement", ""]
    if not agreement:
        return lines + ["No data: only one judge has labelled these traces (run `branchpoint evaluate` "
                        "with another `--judge`).", ""]  # fmt: skip
    return lines + [
        "Pairwise agreement and Cohen's κ on the items both judges labelled (`decisive` = the label "
        "that decides correctness). The seed study reports 89.4% / 92.3% between LLM judges and 84% "
        "with humans.", "", agreement_markdown(agreement), "",
    ]


def _identical_section(metrics: dict[str, Any]) -> list[str]:
    """A loud warning block naming the sweep conditions that sent the model identical requests."""
    from branchpoint.evaluation.sameness import identical_warnings

    lines = identical_warnings(metrics.get("identical_conditions") or [])
    if not lines:
        return []
    out = ["> **Warning: identical conditions.** These conditions sent the model exactly the same "
           "requests; their rows below differ only by label (or by sampling).", ">"]
    out += [f"> - {_md_cell(line.removeprefix('IDENTICAL CONDITIONS: '))}" for line in lines]
    return [*out, ""]




def _viewer_section(metrics: dict[str, Any], viewer: str) -> list[str]:
    """Links from each condition's outcome counts into the viewer's table, filtered to them."""
    from urllib.parse import urlencode

    names = {"correct_answer": "correct answer", "wrong_answer": "wrong answer",
             "correct_abstention": "correct abstention", "failed_abstention": "failed abstention"}  # fmt: skip
    lines = ["## Executions in the viewer", "", f"Each link opens the viewer export (`{viewer}`) filtered to those executions.", ""]
    for label, m in metrics["by_condition"].items():
        by = m.get("tpc_by_outcome") or {}
        links = [f"[{name}: {by[o]['n']}]({viewer}#/?{urlencode({'condition': label, 'outcome': o})})"
                 for o, name in names.items() if (by.get(o) or {}).get("n")]  # fmt: skip
        lines.append(f"- `{label}`: " + (", ".join(links) or "no scored executions"))
    return [*lines, ""]


def markdown_report(
    metrics: dict[str, Any], title: str, figures: dict[str, str | None] | None = None, viewer: str | None = None
) -> str:
    """A markdown report: the seed-study table, cost, outcomes, cross-condition views, agreement,
    then a per-category table for each condition.

    `figures` maps figure keys (`figures.FIGURES`) to paths relative to the report, or None for
    a skipped figure; without `figures` the report has no figure lines at all. `viewer` is the
    path of a viewer export's index.html relative to the report: the report then links each
    condition's outcomes into it.
    """
    boot = metrics.get("bootstrap") or {}
    parts = [f"# {title}", ""]
    parts += _identical_section(metrics)
    parts += [tpc_caption(metrics), ""]
    if boot.get("resamples"):
        parts += [f"Brackets: bootstrap {100 * float(boot['confidence']):.0f}% intervals "
                  f"({boot['resamples']} resamples of questions within each condition, seed {boot['seed']}).", ""]  # fmt: skip
    if metrics.get("n_unparseable"):
        parts += [f"{metrics['n_unparseable']} executions whose judge output could not be parsed are left out.", ""]
    parts += ["## Results (seed-study layout)", "",
              "Accuracies in %, TPC in tokens per correct answer.", "", seed_study_table(metrics), ""]  # fmt: skip
    parts += ["## By condition", ""]
    rows = [_condition_row(label, m) for label, m in metrics["by_condition"].items()]
    parts += [_md_table(_COLUMNS, rows), ""]
    if any("tpc_channels" in m for m in metrics["by_condition"].values()):
        parts += _cost_section(metrics)
        parts += _outcome_section(metrics, figures)
        if viewer:
            parts += _viewer_section(metrics, viewer)
    parts += _search_effect_section(metrics, figures)
    parts += _sweep_section(metrics, figures)
    parts += _over_search_section(metrics)
    parts += _evidence_section(metrics, figures)
    parts += _multi_turn_section(metrics, figures)
    parts += _effort_section(metrics)
    parts += _agreement_section(metrics)
    for label, m in metrics["by_condition"].items():
        parts += [f"## `{label}` by category", ""]
        cat_rows = [_category_row(k, c) for k, c in m["by_category"].items()]
        parts += [_md_table(_CATEGORY_COLUMNS, cat_rows), ""]
    parts += [
        "Accuracy is answer accuracy for answerable questions and abstention accuracy for "
        "AU / FP / UC questions.",
        "",
    ]
    return "\n".join(parts)


def is_simulated(run_dir: Path) -> bool:
    """True when a run's records came from the simulated model: its spec names provider `sim`, or
    a record says `model_provider: sim` (see `branchpoint.experiments.runner.simulated_marker`)."""
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


def read_metrics(run_dir: Path) -> dict[str, Any]:
    """The metrics.json of a run directory (or the file itself), checked to be one."""
    source = run_dir / METRICS_FILE if run_dir.is_dir() else run_dir
    if not source.is_file():
        raise InputError(f"{source}: not found (run `branchpoint evaluate {run_dir}` first)")
    try:
        metrics = json.loads(source.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: not a metrics file ({exc})") from None
    if not isinstance(metrics, dict) or "by_condition" not in metrics:
        raise InputError(f'{source}: field "by_condition" missing (expected the metrics.json of `branchpoint evaluate`)')
    return metrics

def write_report(run_dir: Path, out_dir: Path | None = None, title: str | None = None) -> tuple[Path, dict[str, Path | None]]:
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
    value = _value_section(source.parent)
    if not source.is_file() and value is not None:  # a fork study scored by `branchpoint value` only
        out = Path(out_dir) if out_dir is not None else source.parent
        out.mkdir(parents=True, exist_ok=True)
        name = title or f"branchpoint report: {source.parent.resolve().name}"
        report = out / REPORT_FILE
        figures: dict[str, Path | None] = {}
        report.write_text(f"# {name}\n\n{value}\n" + _value_figures(source.parent, out, figures), encoding="utf-8")
        return report, figures
    metrics = read_metrics(run_dir)
    out = Path(out_dir) if out_dir is not None else source.parent
    figures = write_figures(metrics, out / FIGURES_DIR)
    relative = {k: (os.path.relpath(p, out) if p is not None else None) for k, p in figures.items()}
    name = title or f"branchpoint report: {source.parent.resolve().name}"
    if is_simulated(source.parent) and "simulated model" not in name:
        name = f"{name} (simulated model)"
    report = out / REPORT_FILE
    export = out / VIEWER_DIR / "index.html"
    viewer = os.path.relpath(export, out) if export.is_file() else None
    text = markdown_report(metrics, name, relative, viewer)
    if value is not None:
        text += "\n" + value + "\n" + _value_figures(source.parent, out, figures)
    report.write_text(text, encoding="utf-8")
    return report, figures


def _value_figures(run_dir: Path, out: Path, figures: dict[str, Path | None]) -> str:
    """The figures drawn from value.json (learning curves, when `value --learning-curves` ran),
    added to `figures` and linked from the report ("" when there are none)."""
    from branchpoint.evaluation.figures import plot_learning_curves

    value = json.loads((Path(run_dir) / VALUE_FILE).read_text(encoding="utf-8"))
    path = plot_learning_curves(value, out / FIGURES_DIR / "learning_curves.png")
    figures["learning_curves"] = path
    if path is None:
        return ""
    return f"\n![Learning curves]({os.path.relpath(path, out)})\n"


def _value_section(run_dir: Path) -> str | None:
    """The search-value section (`value.markdown.value_markdown`) of RUN_DIR/value.json, or None."""
    path = Path(run_dir) / VALUE_FILE
    if not path.is_file():
        return None
    from branchpoint.evaluation.value.markdown import value_markdown

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a value.json file ({exc})") from None
    if not isinstance(data, dict) or "brier" not in data:
        raise InputError(f'{path}: field "brier" missing (expected the value.json of `branchpoint value`)')
    return value_markdown(data)
