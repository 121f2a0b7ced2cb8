"""PNG figures of a metrics dict (matplotlib, Agg canvas; pyplot's global state is never touched).

Each `plot_*` function takes the metrics (as computed, or read back from metrics.json) and a
path, draws one figure and returns the path, or returns None without writing anything when the
metrics hold no data for it. Error bars and bands are the bootstrap 95 % intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from branchpoint.evaluation.tally import condition_label

FIGURES: dict[str, str] = {
    "accuracy_search": "accuracy_with_without_search.png",
    "tpc_search_cap": "tpc_vs_search_cap.png",
    "marginal_roi": "marginal_roi.png",
    "tpc_outcome": "tpc_by_outcome.png",
    "evidence_balance": "evidence_balance.png",
    "multi_turn": "multi_turn.png",
}
OUTCOME_NAMES = {
    "correct_answer": "correct answer",
    "wrong_answer": "wrong answer",
    "correct_abstention": "correct abstention",
    "failed_abstention": "failed abstention",
}
GROUP_NAMES = {
    "only_positive": "only positive",
    "positive_ge_negative": "positive ≥ negative",
    "negative_gt_positive": "negative > positive",
    "only_negative": "only negative",
    "no_evidence": "no evidence",
}


def num(value: Any) -> float | None:
    """A number from metrics or metrics.json ("inf" strings included); None stays None."""
    if value is None:
        return None
    return float(value)


def _finite(value: Any) -> float | None:
    v = num(value)
    return v if v is not None and math.isfinite(v) else None


def _err(value: Any, ci: Any, scale: float = 1.0) -> tuple[float, float]:
    """Asymmetric error-bar half-widths of a value from its interval (0 when unknown or infinite)."""
    v = _finite(value)
    if v is None or not ci:
        return 0.0, 0.0
    lo, hi = _finite(ci[0]), _finite(ci[1])
    if lo is None or hi is None:
        return 0.0, 0.0
    return max(0.0, v - lo) * scale, max(0.0, hi - v) * scale


def _pct(value: Any) -> float:
    v = _finite(value)
    return math.nan if v is None else 100.0 * v


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def short(label: str, width: int = 28) -> str:
    """`agent.search=true,model.name=x` -> `search=true,name=x`, cut to `width` characters."""
    parts = []
    for part in label.split(","):
        key, sep, value = part.partition("=")
        parts.append(f"{key.rsplit('.', 1)[-1]}={value}" if sep else part)
    text = ",".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def plot_accuracy_search(metrics: dict[str, Any], path: Path) -> Path | None:
    """Answer and abstention accuracy with and without search, one bar group per pair (model)."""
    pairs = metrics.get("search_effect") or []
    if not pairs:
        return None
    conds = metrics["by_condition"]
    fig = Figure(figsize=(max(5.0, 2.2 * len(pairs) + 1.5), 3.8))
    ax = fig.add_subplot()
    width = 0.2
    series = [
        ("answer acc, no search", "without", "answer_accuracy", "#9ecae1"),
        ("answer acc, search", "with", "answer_accuracy", "#3182bd"),
        ("abstention acc, no search", "without", "abstention_accuracy", "#fdae6b"),
        ("abstention acc, search", "with", "abstention_accuracy", "#e6550d"),
    ]
    for i, (name, side, metric, color) in enumerate(series):
        xs, ys, errs = [], [], ([], [])
        for j, pair in enumerate(pairs):
            m = conds[pair[side]]
            xs.append(j + (i - 1.5) * width)
            ys.append(_pct(m[metric]))
            lo, hi = _err(m[metric], m.get(f"{metric}_ci"), 100.0)
            errs[0].append(lo)
            errs[1].append(hi)
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=name, color=color)
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels([f"{p['model']}\n{short(p['with'], 22)}" for p in pairs], fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Accuracy with vs without search (95% CI)")
    ax.legend(fontsize=7, ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return _save(fig, path)


def plot_tpc_search_cap(metrics: dict[str, Any], path: Path) -> Path | None:
    """TPC against the search cap (left axis), answer and abstention accuracy (right axis)."""
    sweeps = metrics.get("search_cap_sweep") or []
    if not sweeps:
        return None
    cols = min(3, len(sweeps))
    rows = math.ceil(len(sweeps) / cols)
    fig = Figure(figsize=(4.6 * cols, 3.4 * rows))
    for k, sweep in enumerate(sweeps):
        ax = fig.add_subplot(rows, cols, k + 1)
        caps = [p["cap"] for p in sweep["points"]]
        tpcs = [_finite(p["tpc"]) for p in sweep["points"]]
        ax.plot(caps, [math.nan if t is None else t for t in tpcs], "o-", color="#444444", label="TPC")
        lo = [_finite((p.get("tpc_ci") or [None, None])[0]) for p in sweep["points"]]
        hi = [_finite((p.get("tpc_ci") or [None, None])[1]) for p in sweep["points"]]
        ax.fill_between(caps, [math.nan if v is None else v for v in lo],
                        [math.nan if v is None else v for v in hi], color="#444444", alpha=0.15)  # fmt: skip
        ax.set_xlabel("search cap")
        ax.set_ylabel("TPC (tokens per correct)")
        acc = ax.twinx()
        for metric, color, name in (("answer_accuracy", "#3182bd", "answer acc"),
                                    ("abstention_accuracy", "#e6550d", "abstention acc")):  # fmt: skip
            acc.plot(caps, [_pct(p[metric]) for p in sweep["points"]], "s--", color=color, label=name)
        acc.set_ylabel("accuracy (%)")
        acc.set_ylim(0, 105)
        other = short(condition_label(sweep["other"]), 60) if sweep["other"] else ""
        ax.set_title(f"{sweep['model']}: {other}" if other else sweep["model"], fontsize=9)
        lines = ax.get_legend_handles_labels()
        more = acc.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="best")
    fig.suptitle("TPC and accuracy across the search-cap sweep")
    return _save(fig, path)


def plot_marginal_roi(metrics: dict[str, Any], path: Path) -> Path | None:
    """Marginal ROI per step of each search-cap sweep (accuracy points per 1,000 tokens, 95% CI);
    undefined steps (the cost barely moved) are marked with an x on the zero line."""
    sweeps = [s for s in metrics.get("search_cap_sweep") or [] if s.get("marginal_roi")]
    if not sweeps:
        return None
    cols = min(3, len(sweeps))
    rows = math.ceil(len(sweeps) / cols)
    fig = Figure(figsize=(4.6 * cols, 3.4 * rows))
    series = (("overall_accuracy", "#444444", "overall"), ("answer_accuracy", "#3182bd", "answer"),
              ("abstention_accuracy", "#e6550d", "abstention"))  # fmt: skip
    for k, sweep in enumerate(sweeps):
        ax = fig.add_subplot(rows, cols, k + 1)
        steps = sweep["marginal_roi"]
        labels = [f"{r['from_cap']}→{r['to_cap']}" for r in steps]
        width = 0.8 / len(series)
        for i, (metric, color, name) in enumerate(series):
            key = f"{metric}_per_1k_tokens"
            xs = [j + (i - 1) * width for j in range(len(steps))]
            ys = [_pct(r.get(key)) for r in steps]
            errs = list(zip(*(_err(r.get(key), r.get(key + "_ci"), 100.0) for r in steps)))
            ax.bar(xs, ys, width, yerr=errs, capsize=2, color=color, label=name)
            undefined = [x for x, y in zip(xs, ys) if math.isnan(y)]
            ax.plot(undefined, [0.0] * len(undefined), "x", color=color, markersize=6)
        ax.axhline(0.0, color="#999999", linewidth=0.8)
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlabel("search cap step")
        ax.set_ylabel("accuracy points per 1k tokens")
        other = short(condition_label(sweep["other"]), 60) if sweep["other"] else ""
        ax.set_title(f"{sweep['model']}: {other}" if other else sweep["model"], fontsize=9)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Marginal ROI of raising the search cap (x: undefined, cost barely moved)")
    return _save(fig, path)


def plot_tpc_outcome(metrics: dict[str, Any], path: Path) -> Path | None:
    """Mean cost per execution of each outcome, grouped by condition."""
    conds = metrics.get("by_condition") or {}
    if not conds or not any("tpc_by_outcome" in m for m in conds.values()):
        return None
    labels = list(conds)
    fig = Figure(figsize=(max(5.0, 1.1 * len(labels) + 2.0), 3.8))
    ax = fig.add_subplot()
    width = 0.8 / len(OUTCOME_NAMES)
    colors = ("#31a354", "#de2d26", "#3182bd", "#fd8d3c")
    for i, (outcome, name) in enumerate(OUTCOME_NAMES.items()):
        ys, errs = [], ([], [])
        for label in labels:
            entry = conds[label]["tpc_by_outcome"][outcome]
            v = _finite(entry["cost_per_execution"])
            ys.append(math.nan if v is None else v)
            lo, hi = _err(entry["cost_per_execution"], entry.get("cost_per_execution_ci"))
            errs[0].append(lo)
            errs[1].append(hi)
        xs = [j + (i - (len(OUTCOME_NAMES) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=name, color=colors[i])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([short(lbl, 20) for lbl in labels], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("cost per execution (tokens)")
    ax.set_title("Cost by outcome (g + λ·x + μ·|S| per execution, 95% CI)")
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_evidence_balance(metrics: dict[str, Any], path: Path) -> Path | None:
    """Abstention accuracy by evidence-balance group (pooled over conditions), n on each bar."""
    ev = metrics.get("evidence_balance") or {}
    if not ev.get("available"):
        return None
    groups = [g for g in GROUP_NAMES if ev["groups"][g]["n"]]
    fig = Figure(figsize=(6.0, 3.6))
    ax = fig.add_subplot()
    ys = [_pct(ev["groups"][g]["abstention_accuracy"]) for g in groups]
    errs = list(zip(*(_err(ev["groups"][g]["abstention_accuracy"], ev["groups"][g].get("abstention_accuracy_ci"), 100.0)
                      for g in groups))) or ([], [])  # fmt: skip
    bars = ax.bar(range(len(groups)), ys, yerr=errs, capsize=3,
                  color=["#e6550d", "#fdae6b", "#9ecae1", "#3182bd", "#bdbdbd"][: len(groups)])  # fmt: skip
    for bar, g in zip(bars, groups):
        ax.annotate(f"n={ev['groups'][g]['n']}", (bar.get_x() + bar.get_width() / 2, 2), ha="center", fontsize=7)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([GROUP_NAMES[g] for g in groups], fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("abstention accuracy (%)")
    share = _finite(ev.get("negative_share"))
    note = "" if share is None else f"; negative documents: {100 * share:.1f}%"
    ax.set_title(f"Abstention by evidence balance (unanswerable questions{note})", fontsize=9)
    return _save(fig, path)


def plot_multi_turn(metrics: dict[str, Any], path: Path) -> Path | None:
    """Answer and abstention accuracy by number of preceding turns, one line per context kind."""
    mt = metrics.get("multi_turn") or {}
    if not mt.get("available"):
        return None
    fig = Figure(figsize=(9.0, 3.6))
    for k, (metric, title) in enumerate((("answer_accuracy", "answer accuracy"),
                                         ("abstention_accuracy", "abstention accuracy"))):  # fmt: skip
        ax = fig.add_subplot(1, 2, k + 1)
        for series in mt["series"]:
            xs = [p["preceding"] for p in series["points"]]
            ys = [_pct(p[metric]) for p in series["points"]]
            errs = list(zip(*(_err(p[metric], p.get(f"{metric}_ci"), 100.0) for p in series["points"])))
            other = short(condition_label(series["other"]), 30) if series["other"] else ""
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=2,
                        label=short(f"{series['context']} {other}".strip(), 36))  # fmt: skip
        ax.set_xlabel("preceding turns")
        ax.set_ylabel(f"{title} (%)")
        ax.set_ylim(0, 105)
        ax.set_title(title)
        ax.legend(fontsize=7, title="context", title_fontsize=7)
    fig.suptitle("Multi-turn: accuracy by conversation history")
    return _save(fig, path)


PLOTTERS: dict[str, Callable[[dict[str, Any], Path], Path | None]] = {
    "accuracy_search": plot_accuracy_search,
    "tpc_search_cap": plot_tpc_search_cap,
    "marginal_roi": plot_marginal_roi,
    "tpc_outcome": plot_tpc_outcome,
    "evidence_balance": plot_evidence_balance,
    "multi_turn": plot_multi_turn,
}


def write_figures(metrics: dict[str, Any], folder: Path) -> dict[str, Path | None]:
    """Every figure whose data is present, as folder/<name>.png; None for those skipped."""
    return {key: PLOTTERS[key](metrics, Path(folder) / FIGURES[key]) for key in PLOTTERS}
