"""The search-value section of report.md, from a value.json (see docs/search-value.md).

`value_markdown(report)` gives markdown tables: forecasters (Brier and its split, gain risk,
R²_Δ), the level split, router utility per price, the zero-price oracle range, the decision
factorial, the decision quality of the actor's own searches, scoring objectives, audit bounds
and learning curves, each with its interval
where value.json has one, the three-action study and the three-pair composition. It reads the
`ValueReport` model. `branchpoint report RUN_DIR` appends it when RUN_DIR has value.json.
"""

from __future__ import annotations

from typing import Any

from branchpoint.evaluation.value.derived_markdown import (
    accounting_markdown,
    prior_share_markdown,
    source_supported_markdown,
    supervision_markdown,
)
from branchpoint.evaluation.value.md_format import fmt as _f
from branchpoint.evaluation.value.md_format import table as _table
from branchpoint.evaluation.value.seed_markdown import seed_markdown
from branchpoint.evaluation.value.value_file import Difference, Estimate, FactorialCell, ValueReport, as_value


def _ci(x: Any, interval: Any, digits: int = 4) -> str:
    if not interval or interval[0] is None:
        return _f(x, digits)
    return f"{_f(x, digits)} [{_f(interval[0], digits)}, {_f(interval[1], digits)}]"


def value_markdown(report: ValueReport | dict[str, Any]) -> str:
    """Markdown for every quantity of a value.json report (the model, or its dict)."""
    r = as_value(report)
    iv = r.intervals
    level = round(100 * float(iv.level))
    st = r.states
    out = ["## Search value", ""]
    out += [
        f"{st.test if st.test is not None else '?'} test states ({st.dev} dev) of "
        f"{st.forked_states if st.forked_states is not None else '?'} forked; "
        f"brackets: {level}% support-component bootstrap intervals ({iv.resamples} resamples, "
        "within strata), conditional on the fitted forecasters.",
        "",
    ]
    for w in r.warnings:
        out += [f"> **Warning:** {w}", ""]
    out += _forecasters(r)
    out += _level_split(r)
    out += _utility(r)
    out += _factorial(r)
    out += _decisions(r)
    out += accounting_markdown(r)
    out += prior_share_markdown(r)
    out += _objectives(r)
    out += _audit(r)
    out += source_supported_markdown(r)
    out += _curves(r)
    out += supervision_markdown(r)
    out += _three_action(r)
    out += _composition(r)
    out += seed_markdown(r)
    return "\n".join(out)


def _est(e: Estimate | None, digits: int = 4) -> str:
    return "—" if e is None else _ci(e.value, e.interval, digits)


def _decisions(report: ValueReport) -> list[str]:
    """The parents' own search decisions against need (`decisions`): decision-F1, over- and
    under-search rates, pooled and per step."""
    block = report.decision_quality
    if block is None:
        return []
    out = ["### Decision quality: searched vs needed", ""]
    if not block.available or block.all is None:
        return out + [f"No data: {block.reason or 'no decision to score'}.", ""]
    left_out = ", ".join(f"{k} {v}" for k, v in sorted(block.excluded.items())) or "none"
    out += [
        f"Need: {block.need}. Decision: whether the parent execution searched at that step (0 = its "
        f"first decision, at `initial`; k = after k searches). {block.n_states} test states; left out: "
        f"{left_out}. Over-search rate = searched where not needed / not needed; under-search rate = "
        "answered where needed / needed.",
        "",
    ]
    rows = []
    for name, d in [("all steps", block.all), *((f"step {k}", v) for k, v in block.by_step.items())]:
        rows.append(
            [
                name,
                str(d.n),
                str(d.n_needed),
                str(d.n_searched),
                _est(d.precision, 3),
                _est(d.recall, 3),
                _est(d.f1, 3),
                _est(d.over_search_rate, 3),
                _est(d.under_search_rate, 3),
            ]
        )
    header = ["decisions", "n", "needed", "searched", "precision", "recall", "F1", "over-search", "under-search"]
    return out + _table(header, rows)


def _three_action(report: ValueReport) -> list[str]:
    block = report.three_action
    if block is None:
        return []
    rows = [[f"`{name}`", _est(e.outcome_error), _est(e.gain_loss)] for name, e in block.forecasts.items()]
    prices = list(block.utility)
    routers = list(dict.fromkeys(r for p in prices for r in block.utility[p]))
    urows = [[f"`{r}`", *[_est(block.utility[p].get(r)) for p in prices]] for r in routers]
    return [
        "### STOP / SAME / SWITCH at pending queries",
        "",
        f"{block.states.get('test', 0)} test states with all three actions; references fitted on "
        f"{block.chosen_on}. Outcome error = ⅓ Σ_a mean (q_a − Y_a)²; gain loss = "
        "½[L(SAME − STOP) + L(SWITCH − STOP)]. Forecasts files with `q_stop`, `q_same`, `q_switch` "
        "are scored here.",
        "",
        *_table(["forecast", "outcome error", "gain loss"], rows),
        *_table(["router", *[f"λ={p}" for p in prices]], urows),
    ]


def _composition(report: ValueReport) -> list[str]:
    block = report.three_pair_composition
    if block is None:
        return []
    sc = block.scores
    rows = [
        ["Brier", _est(sc.brier), _est(sc.brier_minus_comparator)],
        ["gain risk L", _est(sc.gain_risk), _est(sc.gain_risk_minus_comparator)],
        ["R²_Δ", _est(sc.gain_r2), "—"],
    ]
    hist = ", ".join(f"{k} = `{v}`" for k, v in block.histories.items())
    return [
        "### Three-pair composition",
        "",
        f"B/Y forecast `{block.forecaster}` composed from {hist} (study Appendix D, Eqs. 7–9: "
        "p̃_BY,T = p̃_BX,T, Δ̃_BY = Δ̃_BX + Δ̃_AY − Δ̃_AX, p̃_BY,S = clip(p̃_BY,T + Δ̃_BY)); "
        f"{block.matched_questions} questions matched in all three histories, "
        f"{block.unmatched_states} target states without a match got the histories' mean.",
        "",
        *_table(["score", "composed", f"composed − `{block.comparator or '—'}`"], rows),
    ]


def _forecasters(report: ValueReport) -> list[str]:
    iv = report.intervals
    rows = []
    for name, parts in report.brier.items():
        rows.append(
            [
                f"`{name}`",
                _ci(parts.brier, iv.brier.get(name)),
                _f(parts.level),
                _f(parts.gain),
                _f(parts.variance),
                _ci(report.gain_risk.get(name), iv.gain_risk.get(name)),
                _ci(report.gain_r2.get(name), iv.gain_r2.get(name)),
            ]
        )
    lines = [
        "### Forecasters",
        "",
        f"θ̂ (E Δ²) = {_ci(report.theta, iv.theta)}; mean gain = "
        f"{_ci(report.mean_gain, iv.mean_gain)}; gain variance V_Δ = "
        f"{_ci(report.gain_variance, iv.gain_variance)}."
        + (
            " Studentized intervals (better coverage with few components): θ̂ "
            + ", mean gain ".join(_band(iv.studentized.get(k) or []) for k in ("theta", "mean_gain"))
            + f", V_Δ {_band(iv.studentized.get('gain_variance') or [])}."
            if iv.studentized
            else ""
        ),
        "",
    ]
    if not rows:
        return lines + ["No forecaster was scored.", ""]
    skipped = report.skipped_forecasters
    lines += _table(["forecaster", "Brier", "level", "¼ gain", "variance", "gain risk L", "R²_Δ"], rows)
    undefined = iv.gain_r2_undefined
    if undefined is not None and undefined.withheld:
        lines += [f"R²_Δ intervals withheld: {undefined.withheld}.", ""]
    elif undefined is not None and undefined.share:
        lines += [
            f"V_Δ ≤ 0 in {_f(100 * undefined.share, 1)}% of resamples: R²_Δ is undefined there; they count at both "
            "ends of its intervals.",
            "",
        ]
    if skipped:
        lines += ["Skipped: " + "; ".join(f"`{k}` ({v})" for k, v in skipped.items()), ""]
    return lines


def _level_split(report: ValueReport) -> list[str]:
    if not report.level_split:
        return []
    rows = [
        [f"`{k}`", _est(v.level_total), _est(v.level_mean_bias), _est(v.level_variation), _est(v.gain_quarter)]
        for k, v in report.level_split.items()
    ]
    return [
        "### Brier contrast against a constant level",
        "",
        "Level contrast = mean-bias part + variation part (Var ℓ − 2 Cov(ℓ, ℓ*)); the gain part is ¼ΔL.",
        "",
        *_table(["forecaster − constant", "level", "mean bias", "variation", "¼ gain"], rows),
    ]


def _utility(report: ValueReport) -> list[str]:
    util = report.utility
    if util is None or not util.by_price:
        return []
    by_price = util.by_price
    prices = list(by_price)
    iv = report.intervals.utility
    names = list(dict.fromkeys(r for p in prices for r in by_price[p] if not r.startswith("factorial:")))
    rows = [
        [f"`{r}`", *[_ci(by_price[p][r].utility if r in by_price[p] else None, iv.get(p, {}).get(r)) for p in prices]]
        for r in names
    ]
    rng = util.oracle_range
    lines = ["### Router utility (U = Y − λ·T/1000)", ""]
    lines += _table(["router", *[f"λ={p}" for p in prices]], rows)
    lines += [
        f"Zero-price oracle improvement over the best constant H = (E|Δ| − |EΔ|)/2: bounds from the moments "
        f"[{_f(rng.lower)}, {_f(rng.upper)}] (point estimates, from θ̂ and mean Δ̄"
        + (
            f"; {round(100 * report.intervals.level)}% interval {_f(rng.interval[0])} to {_f(rng.interval[1])}, "
            "from joint confidence limits of EΔ² and |EΔ|"
            if rng.interval
            else ""
        )
        + f"); the plug-in (mean|Δ̄| − |mean Δ̄|)/2 = "
        f"{_f(util.oracle_plugin_optimistic)} is optimistic (generation noise inflates |Δ̄|). "
        f"Best constant and τ chosen on: {util.chosen_on}.",
        "",
    ]
    for name, why in util.skipped_routers.items():
        lines += [f"`{name}` not scored: {why}.", ""]
    return lines


def _diff(d: Difference | FactorialCell | None) -> str:
    return "—" if d is None else _ci(d.difference, d.interval)


def _factorial(report: ValueReport) -> list[str]:
    fac = report.decision_factorial
    if fac is None or not fac.by_price:
        return []
    rows = []
    for pk, entry in fac.by_price.items():
        cells, c = entry.over_best_constant, entry.contrasts
        rows.append(
            [
                pk,
                *[
                    _diff(cells.get(k))
                    for k in ("query_gain_fixed_cost", "fixed_gain_query_cost", "query_gain_query_cost")
                ],
                *[_diff(c.get(k)) for k in ("cost_added_to_gain", "gain_added_to_cost", "interaction")],
            ]
        )
    fixed = fac.fixed_terms
    return [
        "### Decision factorial (utility over the best constant)",
        "",
        f"Selection draws free; fixed terms from {fac.fixed_terms_from}: rewards "
        f"{_f(fixed.get('reward_think'))} / {_f(fixed.get('reward_search'))}, incremental tokens "
        f"{_f(fixed.get('incremental_tokens'), 1)}.",
        "",
        *_table(
            ["λ", "gain only", "cost only", "gain + cost", "cost added to gain", "gain added to cost", "interaction"],
            rows,
        ),
    ]


def _objectives(report: ValueReport) -> list[str]:
    obj = report.scoring_objectives
    if obj is None or obj.objectives is None:
        return []
    rows = [
        [name, _est(e.think), _est(e.search), _est(e.gain), _est(e.gain_minus_reference)]
        for name, e in obj.objectives.items()
    ]
    return [
        "### Scoring objectives on the same executions",
        "",
        *_table(["objective", "THINK success", "SEARCH success", "mean gain", "gain − reference"], rows),
        f"Reference: `{obj.reference}` (judge {obj.reference_judge}). "
        f"{obj.incomplete_records} incomplete records: {obj.note or ''}.",
        "",
    ]


def _audit(report: ValueReport) -> list[str]:
    audit = report.audit_bounds
    if audit is None:
        return []
    rows = []
    for block, entries in (
        ("gain_vs_mean_gain", audit.gain_vs_mean_gain),
        ("gain_vs_zero", audit.gain_vs_zero),
        ("brier_vs_mean", audit.brier_vs_mean),
    ):
        for name, e in entries.items():
            rows.append(
                [
                    block,
                    f"`{name}`",
                    _f(e.original),
                    f"[{_f(e.lower)}, {_f(e.upper)}]",
                    f"[{_f(e.interval[0])}, {_f(e.interval[1])}]" if e.interval else "—",
                    str(e.uncertain_pairs),
                ]
            )
    return [
        "### Shared-label audit bounds",
        "",
        f"Judges {', '.join(audit.judges)}: agreed answers fixed, disagreements in [0, 1], one label "
        "per question–answer pair.",
        "",
        *_table(["contrast", "forecaster", "original", "bounds", "interval", "uncertain pairs"], rows),
        *(
            [
                f"Sampled audit {audit.audit_sample.get('file')}: {audit.audit_sample.get('audited_test_questions')} "
                f"of {audit.audit_sample.get('test_questions')} test questions audited; corrections weighted by "
                "1/π (`sampling_se` in value.json: the audit-sampling standard error).",
                "",
            ]
            if audit.audit_sample
            else []
        ),
    ]


def _band(band: list[Any]) -> str:
    return f"[{_f(band[0])}, {_f(band[1])}]" if len(band) == 2 else "—"


def _curves(report: ValueReport) -> list[str]:
    curves = report.learning_curves
    if curves is None:
        return []
    if curves.skipped:
        return ["### Learning curves", "", curves.skipped, ""]
    rows = []
    for fam, e in curves.families.items():
        for budget, b in e.by_budget.items():
            rows.append(
                [
                    f"`{fam}`",
                    budget,
                    _f(b.gain_r2),
                    _band(b.gain_r2_band),
                    _f(b.brier),
                    _band(b.brier_band),
                    _f(b.mean_guard_share, 2),
                ]
            )
        largest = e.largest_budget
        if largest is not None and (largest.gain_r2_interval or largest.brier_interval):
            rows.append(
                [
                    f"`{fam}`",
                    f"{largest.budget} ({curves.samples} fits, interval)",
                    _band(largest.gain_r2_interval) if largest.gain_r2_interval else "withheld (V_Δ ≤ 0 in resamples)",
                    "",
                    _band(largest.brier_interval or []),
                    "",
                    "",
                ]
            )
    return [
        "### Matched-configuration learning curves",
        "",
        f"{curves.outer_folds} support-disjoint outer folds, {curves.samples} nested samples; band = range "
        "over samples.",
        "",
        *_table(["family", "training questions", "gain R²_Δ", "band", "Brier", "band", "mean-guard share"], rows),
    ]
