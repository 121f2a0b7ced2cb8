"""Terminal tables of a value.json report (`ValueReport`, or its dict): forecaster scores, router
utility by price, and the decision factorial."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from branchpoint.evaluation.value.value_file import ValueReport, as_value


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}f}"


def _with_interval(x: Any, interval: list[Any] | None, digits: int = 3) -> str:
    if interval is None or interval[0] is None:
        return _fmt(x, digits)
    return f"{_fmt(x, digits)} [{_fmt(interval[0], digits)}, {_fmt(interval[1], digits)}]"


def forecaster_table(report: ValueReport | dict[str, Any]) -> Table:
    """One row per forecaster: Brier (and its split), gain risk L, gain skill R²_Δ, with intervals."""
    r = as_value(report)
    iv = r.intervals
    level = round(100 * iv.level)
    table = Table(title=f"forecasters on {r.states.test} test states")
    table.add_column("forecaster", no_wrap=True)  # whole names: shortened ones can look alike
    for header in (f"Brier [{level}% CI]", "level", "¼ gain", "variance", f"gain risk L [{level}% CI]"):
        table.add_column(header, overflow="fold")  # an interval wraps at its spaces, no number is cut
    table.add_column(f"R²_Δ [{level}% CI]", overflow="fold")
    for name, parts in r.brier.items():
        table.add_row(
            name,
            _with_interval(parts.brier, iv.brier.get(name)),
            _fmt(parts.level),
            _fmt(parts.gain),
            _fmt(parts.variance),
            _with_interval(r.gain_risk.get(name), iv.gain_risk.get(name)),
            _with_interval(r.gain_r2.get(name), iv.gain_r2.get(name)),
        )
    table.caption = f"θ̂ (mean Δ² estimate) = {_fmt(r.theta)}, gain variance V_Δ = {_fmt(r.gain_variance)}"
    undefined = iv.gain_r2_undefined
    if undefined is not None and undefined.withheld:
        table.caption += f"; R²_Δ intervals withheld: {undefined.withheld}"
    return table


def utility_table(report: ValueReport | dict[str, Any]) -> Table:
    """One row per router, one column per price: mean utility U = Y − λ·T/1000 on test states."""
    value = as_value(report)
    util = value.utility
    if util is None:
        return Table("router", title="utility per state: none scored")
    by_price = util.by_price
    prices = list(by_price)
    table = Table(title="utility per state (U = Y − λ·T/1000)")
    table.add_column("router", no_wrap=True)
    for p in prices:
        table.add_column(f"λ={p}", overflow="fold")
    routers = list(dict.fromkeys(r for p in prices for r in by_price[p]))
    for router in routers:
        table.add_row(router, *[_fmt(by_price[p][router].utility if router in by_price[p] else None) for p in prices])
    rng = util.oracle_range
    interval = (
        f"; {round(100 * value.intervals.level)}% interval [{_fmt(rng.interval[0])}, {_fmt(rng.interval[1])}] from joint limits of EΔ² and |EΔ|"
        if rng.interval and rng.interval[0] is not None
        else ""
    )
    table.caption = (
        f"zero-price oracle improvement H = (E|Δ| − |EΔ|)/2: bounds from the moments [{_fmt(rng.lower)}, "
        f"{_fmt(rng.upper)}] (point estimates{interval}; plug-in {_fmt(util.oracle_plugin_optimistic)} is "
        f"optimistic). Choices made on: {util.chosen_on}."
    )
    return table


def factorial_table(report: ValueReport | dict[str, Any]) -> Table:
    """The decision factorial: utility over the best constant per price (selection draws free)."""
    factorial = as_value(report).decision_factorial
    fac = factorial.by_price if factorial is not None else {}
    table = Table(title="decision factorial: utility over the best constant (selection draws free)")
    table.add_column("λ", no_wrap=True)
    for header in ("gain only", "cost only", "gain + cost", "cost added to gain", "gain added to cost"):
        table.add_column(header, overflow="fold")
    for pk, entry in fac.items():
        cells, c = entry.over_best_constant, entry.contrasts
        table.add_row(
            pk,
            *[
                _with_interval(cells[k].difference, cells[k].interval)
                for k in ("query_gain_fixed_cost", "fixed_gain_query_cost", "query_gain_query_cost")
            ],
            *[_with_interval(c[k].difference, c[k].interval) for k in ("cost_added_to_gain", "gain_added_to_cost")],
        )
    return table


def decision_line(report: ValueReport | dict[str, Any]) -> str:
    """One line for the terminal: decision-F1 of the run's own searches against need, and its
    over- and under-search rates (all steps), or why there is none."""
    block = as_value(report).decision_quality
    if block is None:
        return "decision quality: not computed"
    if not block.available or block.all is None:
        return f"decision quality: {block.reason}"
    d = block.all
    return (
        f"decision quality ({d.n} decisions, need: {block.need_rule}): F1 "
        f"{_with_interval(d.f1.value, d.f1.interval)}, over-search rate "
        f"{_with_interval(d.over_search_rate.value, d.over_search_rate.interval)}, under-search rate "
        f"{_with_interval(d.under_search_rate.value, d.under_search_rate.interval)}"
    )
