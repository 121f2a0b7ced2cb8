"""The search-value section of report.md, from a value.json (see docs/search-value.md).

`value_markdown(report)` gives markdown tables: forecasters (Brier and its split, gain risk,
R²_Δ), the level split, router utility per price, the zero-price oracle range, the decision
factorial, scoring objectives, audit bounds and learning curves, each with its interval
where value.json has one. `branchpoint report RUN_DIR` appends it when RUN_DIR has value.json.
"""

from __future__ import annotations

from typing import Any


def _f(x: Any, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{float(x):.{digits}f}"


def _ci(x: Any, interval: Any, digits: int = 4) -> str:
    if not interval or interval[0] is None:
        return _f(x, digits)
    return f"{_f(x, digits)} [{_f(interval[0], digits)}, {_f(interval[1], digits)}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines + [""]


def value_markdown(report: dict[str, Any]) -> str:
    """Markdown for every quantity of a value.json report."""
    iv = report.get("intervals", {})
    level = int(round(100 * float(iv.get("level", 0.95))))
    st = report.get("states", {})
    out = ["## Search value", ""]
    out += [f"{st.get('test', '?')} test states ({st.get('dev', 0)} dev) of {st.get('forked_states', '?')} forked; "
            f"brackets: {level}% support-component bootstrap intervals ({iv.get('resamples', 0)} resamples, "
            "within strata), conditional on the fitted forecasters.", ""]  # fmt: skip
    for w in report.get("warnings", []):
        out += [f"> **Warning:** {w}", ""]
    out += _forecasters(report, iv)
    out += _level_split(report)
    out += _utility(report, iv)
    out += _factorial(report)
    out += _objectives(report)
    out += _audit(report)
    out += _curves(report)
    out += _three_action(report)
    return "\n".join(out)


def _three_action(report: dict[str, Any]) -> list[str]:
    block = report.get("three_action")
    if not block:
        return []
    rows = [[f"`{name}`", _ci(e["outcome_error"]["value"], e["outcome_error"]["interval"]),
             _ci(e["gain_loss"]["value"], e["gain_loss"]["interval"])] for name, e in block["forecasts"].items()]  # fmt: skip
    prices = list(block["utility"])
    routers = list(dict.fromkeys(r for p in prices for r in block["utility"][p]))
    urows = [[f"`{r}`", *[_ci(block["utility"][p][r]["value"], block["utility"][p][r]["interval"]) for p in prices]]
             for r in routers]  # fmt: skip
    return ["### STOP / SAME / SWITCH at pending queries", "",
            f"{block['states']['test']} test states with all three actions; references fitted on "
            f"{block['chosen_on']}. Gain loss = ½[L(SAME − STOP) + L(SWITCH − STOP)].", "",
            *_table(["forecast", "outcome error", "gain loss"], rows),
            *_table(["router", *[f"λ={p}" for p in prices]], urows)]  # fmt: skip


def _forecasters(report: dict[str, Any], iv: dict[str, Any]) -> list[str]:
    rows = []
    for name, parts in report.get("brier", {}).items():
        rows.append([
            f"`{name}`", _ci(parts["brier"], iv.get("brier", {}).get(name)), _f(parts["level"]), _f(parts["gain"]),
            _f(parts["variance"]), _ci(report["gain_risk"][name], iv.get("gain_risk", {}).get(name)),
            _ci(report["gain_r2"][name], iv.get("gain_r2", {}).get(name)),
        ])  # fmt: skip
    lines = ["### Forecasters", "",
             f"θ̂ (E Δ²) = {_ci(report.get('theta'), iv.get('theta'))}; mean gain = "
             f"{_ci(report.get('mean_gain'), iv.get('mean_gain'))}; gain variance V_Δ = "
             f"{_ci(report.get('gain_variance'), iv.get('gain_variance'))}.", ""]  # fmt: skip
    if not rows:
        return lines + ["No forecaster was scored.", ""]
    skipped = report.get("skipped_forecasters") or {}
    lines += _table(["forecaster", "Brier", "level", "¼ gain", "variance", "gain risk L", "R²_Δ"], rows)
    if skipped:
        lines += ["Skipped: " + "; ".join(f"`{k}` ({v})" for k, v in skipped.items()), ""]
    return lines


def _level_split(report: dict[str, Any]) -> list[str]:
    split = report.get("level_split") or {}
    if not split:
        return []
    rows = [[f"`{k}`", _ci(v["level_total"]["value"], v["level_total"]["interval"]),
             _ci(v["level_mean_bias"]["value"], v["level_mean_bias"]["interval"]),
             _ci(v["level_variation"]["value"], v["level_variation"]["interval"]),
             _ci(v["gain_quarter"]["value"], v["gain_quarter"]["interval"])] for k, v in split.items()]  # fmt: skip
    return ["### Brier contrast against a constant level", "",
            "Level contrast = mean-bias part + variation part (Var ℓ − 2 Cov(ℓ, ℓ*)); the gain part is ¼ΔL.", "",
            *_table(["forecaster − constant", "level", "mean bias", "variation", "¼ gain"], rows)]  # fmt: skip


def _utility(report: dict[str, Any], iv: dict[str, Any]) -> list[str]:
    util = report.get("utility") or {}
    by_price = util.get("by_price") or {}
    prices = list(by_price)
    if not prices:
        return []
    names = list(dict.fromkeys(r for p in prices for r in by_price[p] if not r.startswith("factorial:")))
    rows = [[f"`{r}`", *[_ci(by_price[p].get(r, {}).get("utility"), iv.get("utility", {}).get(p, {}).get(r))
                         for p in prices]] for r in names]  # fmt: skip
    rng = util.get("oracle_range") or {}
    lines = ["### Router utility (U = Y − λ·T/1000)", ""]
    lines += _table(["router", *[f"λ={p}" for p in prices]], rows)
    lines += [f"Zero-price oracle improvement over the best constant H = (E|Δ| − |EΔ|)/2 lies in "
              f"[{_f(rng.get('lower'))}, {_f(rng.get('upper'))}] (from θ̂"
              + (f"; {_f(rng['interval'][0])} to {_f(rng['interval'][1])} with sampling uncertainty"
                 if rng.get("interval") else "") + f"); the plug-in (mean|Δ̄| − |mean Δ̄|)/2 = "
              f"{_f(util.get('oracle_plugin_optimistic'))} is optimistic (generation noise inflates |Δ̄|). "
              f"Best constant and τ chosen on: {util.get('chosen_on', 'dev')}.", ""]  # fmt: skip
    for name, why in (util.get("skipped_routers") or {}).items():
        lines += [f"`{name}` not scored: {why}.", ""]
    return lines


def _factorial(report: dict[str, Any]) -> list[str]:
    fac = report.get("decision_factorial") or {}
    by_price = fac.get("by_price") or {}
    if not by_price:
        return []
    rows = []
    for pk, entry in by_price.items():
        cells = entry["over_best_constant"]
        c = entry["contrasts"]
        rows.append([pk, *[_ci(cells[k]["difference"], cells[k]["interval"]) for k in (
            "query_gain_fixed_cost", "fixed_gain_query_cost", "query_gain_query_cost")],
            _ci(c["cost_added_to_gain"]["difference"], c["cost_added_to_gain"]["interval"]),
            _ci(c["gain_added_to_cost"]["difference"], c["gain_added_to_cost"]["interval"]),
            _ci(c["interaction"]["difference"], c["interaction"]["interval"])])  # fmt: skip
    fixed = fac.get("fixed_terms") or {}
    return ["### Decision factorial (utility over the best constant)", "",
            f"Selection draws free; fixed terms from {fac.get('fixed_terms_from')}: rewards "
            f"{_f(fixed.get('reward_think'))} / {_f(fixed.get('reward_search'))}, incremental tokens "
            f"{_f(fixed.get('incremental_tokens'), 1)}.", "",
            *_table(["λ", "gain only", "cost only", "gain + cost", "cost added to gain", "gain added to cost",
                     "interaction"], rows)]  # fmt: skip


def _objectives(report: dict[str, Any]) -> list[str]:
    obj = report.get("scoring_objectives") or {}
    if "objectives" not in obj:
        return []
    rows = []
    for name, e in obj["objectives"].items():
        diff = e.get("gain_minus_reference")
        rows.append([name, _ci(e["think"]["value"], e["think"]["interval"]),
                     _ci(e["search"]["value"], e["search"]["interval"]), _ci(e["gain"]["value"], e["gain"]["interval"]),
                     _ci(diff["value"], diff["interval"]) if diff else "—"])  # fmt: skip
    return ["### Scoring objectives on the same executions", "",
            *_table(["objective", "THINK success", "SEARCH success", "mean gain", "gain − reference"], rows),
            f"Reference: `{obj.get('reference')}` (judge {obj.get('reference_judge')}). "
            f"{obj.get('incomplete_records', 0)} incomplete records: {obj.get('note', '')}.", ""]  # fmt: skip


def _audit(report: dict[str, Any]) -> list[str]:
    audit = report.get("audit_bounds")
    if not audit:
        return []
    rows = []
    for block in ("gain_vs_mean_gain", "gain_vs_zero", "brier_vs_mean"):
        for name, e in audit.get(block, {}).items():
            rows.append([block, f"`{name}`", _f(e["original"]), f"[{_f(e['lower'])}, {_f(e['upper'])}]",
                         f"[{_f(e['interval'][0])}, {_f(e['interval'][1])}]" if e.get("interval") else "—",
                         str(e["uncertain_pairs"])])  # fmt: skip
    return ["### Shared-label audit bounds", "",
            f"Judges {', '.join(audit.get('judges', []))}: agreed answers fixed, disagreements in [0, 1], one label "
            "per question–answer pair.", "",
            *_table(["contrast", "forecaster", "original", "bounds", "interval", "uncertain pairs"], rows)]  # fmt: skip


def _curves(report: dict[str, Any]) -> list[str]:
    curves = report.get("learning_curves")
    if not curves:
        return []
    if "skipped" in curves:
        return ["### Learning curves", "", curves["skipped"], ""]
    rows = []
    for fam, e in curves["families"].items():
        for budget, b in e["by_budget"].items():
            rows.append([f"`{fam}`", budget, _f(b["gain_r2"]),
                         f"[{_f(b['gain_r2_band'][0])}, {_f(b['gain_r2_band'][1])}]", _f(b["brier"]),
                         f"[{_f(b['brier_band'][0])}, {_f(b['brier_band'][1])}]", _f(b["mean_guard_share"], 2)])  # fmt: skip
        largest = e.get("largest_budget")
        if largest and largest.get("gain_r2_interval"):
            rows.append([f"`{fam}`", f"{largest['budget']} ({curves.get('samples')} fits, interval)",
                         f"[{_f(largest['gain_r2_interval'][0])}, {_f(largest['gain_r2_interval'][1])}]", "",
                         f"[{_f(largest['brier_interval'][0])}, {_f(largest['brier_interval'][1])}]", "", ""])  # fmt: skip
    return ["### Matched-configuration learning curves", "",
            f"{curves['outer_folds']} support-disjoint outer folds, {curves['samples']} nested samples; band = range "
            "over samples.", "",
            *_table(["family", "training questions", "gain R²_Δ", "band", "Brier", "band", "mean-guard share"], rows)]  # fmt: skip
