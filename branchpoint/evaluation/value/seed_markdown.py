"""The report's sections for `seed_analyses`' value.json keys: paired router differences and
their simultaneous intervals, per-stratum panels, the spread of gains, the power calculation
and failure rates (search-value study §4.2, §5.2, §5.4–5.5, Figure 3, Appendices A–E).

Utility differences print in utility points (× 100), as the study writes "−1.25 [−2.38, −0.35]".
"""

from __future__ import annotations

from typing import Any

from branchpoint.evaluation.value.md_format import fmt as _f
from branchpoint.evaluation.value.md_format import table as _table
from branchpoint.evaluation.value.value_file import ValueReport

FOCAL_PRICE = "0.005"  # the study's focal token valuation


def _ci(x: Any, interval: Any, digits: int = 4, scale: float = 1.0) -> str:
    if not interval or interval[0] is None or interval[1] is None:
        return _f(x, digits, scale)
    return f"{_f(x, digits, scale)} [{_f(interval[0], digits, scale)}, {_f(interval[1], digits, scale)}]"


def focal_price(keys: list[str]) -> str | None:
    """The study's focal price 0.005 when scored, else the first price."""
    return FOCAL_PRICE if FOCAL_PRICE in keys else (keys[0] if keys else None)


def seed_markdown(report: ValueReport) -> list[str]:
    """Every section of this module that value.json has (older files: none)."""
    return [
        *_router_differences(report),
        *_simultaneous(report),
        *_strata(report),
        *_spread(report),
        *_power(report),
        *_failures(report),
    ]


def _router_differences(report: ValueReport) -> list[str]:
    block = report.router_differences
    if block is None or not block.by_price:
        return []
    prices = list(block.by_price)
    out = ["### Paired router differences (utility points)", ""]
    out += [
        "Each router's utility minus a reference router's on the same test states, its interval the "
        "percentile interval of the difference over the same component resamples.",
        "",
    ]
    for ref in block.references:
        suffix = f" - {ref}"
        names = list(
            dict.fromkeys(
                k[: -len(suffix)]
                for p in prices
                for k in block.by_price[p]
                if k.endswith(suffix) and not k.startswith("factorial:")
            )
        )
        if not names:
            continue
        rows = [
            [
                f"`{n}` − `{ref}`",
                *[
                    _ci(d.difference, d.interval, 2, 100.0) if (d := block.by_price[p].get(n + suffix)) else "—"
                    for p in prices
                ],
            ]
            for n in names
        ]
        out += _table(["difference", *[f"λ={p}" for p in prices]], rows)
    return out


def _simultaneous(report: ValueReport) -> list[str]:
    block = report.simultaneous
    if block is None or not block.families:
        return []
    out = [
        "### Simultaneous intervals (max-standardised bootstrap)",
        "",
        f"θ̂ ± c·se over each declared family, c the {round(100 * float(block.level))}% quantile of the "
        f"largest standardised deviation over the family (marginal c = {_f(block.marginal_critical, 2)}); "
        "the intervals of a family hold together.",
        "",
    ]
    util = block.families.get("utility - always_search")
    if util is not None and util.members:
        prices = list(dict.fromkeys(k.split(": ", 1)[0] for k in util.members))
        names = list(
            dict.fromkeys(k.split(": ", 1)[1] for k in util.members if not k.split(": ", 1)[1].startswith("factorial:"))
        )
        rows = []
        for n in names:
            cells = []
            for p in prices:
                m = util.members.get(f"{p}: {n}")
                cells.append("—" if m is None else _ci(m.difference, m.interval, 2, 100.0))
            rows.append([f"`{n}`", *cells])
        out += [f"Utility − always SEARCH (points), c = {_f(util.critical, 2)}:", ""]
        out += _table(["router − always_search", *[f"λ={p}" for p in prices]], rows)
    for name, fam in block.families.items():
        if name == "utility - always_search" or not fam.members:
            continue
        rows = [[f"`{k}`", _ci(m.difference, m.interval), _f(m.se)] for k, m in fam.members.items()]
        out += [f"{name.replace('_', ' ')}, c = {_f(fam.critical, 2)}:", ""]
        out += _table(["contrast", "difference [simultaneous]", "se"], rows)
    return out


def _strata(report: ValueReport) -> list[str]:
    block = report.strata_panels
    if block is None or not block.panels:
        return []
    strata = list(block.strata)
    out = [
        "### Per-stratum panels",
        "",
        "Plain means over each stratum's test states, with intervals from the same component resamples "
        "("
        + ", ".join(
            f"{s}: {v.get('states', 0)} states, {v.get('components', 0)} components" for s, v in block.strata.items()
        )
        + ").",
        "",
    ]
    for s, why in block.no_interval.items():
        out += [f"No interval for stratum `{s}`: {why}.", ""]
    keys = [k[len("utility:") :] for k in block.panels if k.startswith("utility:")]
    pk = focal_price(keys)
    header = ["", *[f"`{s}`" for s in strata]]
    for panel, title, scale, digits in (
        ("mean_gain", "Mean gain Δ̄", 1.0, 4),
        (f"utility:{pk}", f"Router utility at λ = {pk} (points)", 100.0, 2),
        ("brier_minus_reference", "Brier minus the task prior", 1.0, 4),
    ):
        entries = block.panels.get(panel)
        if not entries:
            continue
        rows = [
            [
                f"`{name}`",
                *[_ci(e.value, e.interval, digits, scale) if (e := row.get(s)) else "—" for s in strata],
            ]
            for name, row in entries.items()
            if not name.startswith("factorial:")
        ]
        out += [f"{title}:", "", *_table(header, rows)]
    return out


def _spread(report: ValueReport) -> list[str]:
    g = report.gain_spread
    if g is None:
        return []
    rows = [
        ["SD of gains √V_Δ (points)", _ci(g.gain_sd.value, g.gain_sd.interval, 1, 100.0)],
        ["gain variance V_Δ", _ci(g.gain_variance.value, g.gain_variance.interval)],
        ["observed variance of Δ̄", _ci(g.observed_variance.value, g.observed_variance.interval)],
        ["repeat noise N", _ci(g.noise_variance.value, g.noise_variance.interval)],
        ["noise share N / observed", _ci(g.noise_share.value, g.noise_share.interval, 3)],
    ]
    out = ["### Spread of gains across questions", "", *_table(["quantity", "estimate"], rows)]
    dist = g.sd_distribution
    if dist is not None:
        qs = ", ".join(f"{float(q):.1%}: {_f(v, 1, 100.0)}" for q, v in dist.quantiles.items())
        out += [
            f"Bootstrap distribution of the SD ({dist.resamples} resamples, points): mean {_f(dist.mean, 1, 100.0)}, "
            f"SE {_f(dist.se, 1, 100.0)}; quantiles {qs}; V_Δ ≤ 0 (SD 0) in {_f(dist.undefined_share, 3)} of resamples.",
            "",
        ]
    return out


def _power(report: ValueReport) -> list[str]:
    p = report.power
    if p is None or not p.contrasts:
        return []
    pk = focal_price(
        list(dict.fromkeys(k.split(":")[0].split(" ", 1)[1] for k in p.contrasts if k.startswith("utility ")))
    )
    shown = {
        k: c
        for k, c in p.contrasts.items()
        if k.startswith("gain_risk:") or (pk is not None and k.startswith(f"utility {pk}:"))
    }
    deltas = [f"{float(d):g}" for d in p.deltas]
    rows = [
        [
            f"`{k}`",
            _f(c.difference),
            _f(c.sd),
            str(c.n),
            _f(c.detectable_difference),
            *[str(c.required_n.get(d) or "—") for d in deltas],
            _f(c.design_effect, 2),
        ]
        for k, c in shown.items()
    ]
    return [
        "### Power of the paired comparisons",
        "",
        f"Two-sided α = {_f(p.alpha, 2)}, power {_f(p.power, 2)}, normal approximation over independent "
        "questions: n(δ) = ⌈((z_{1−α/2} + z_power)·σ/δ)²⌉, σ the SD of the per-state differences. The design "
        "effect (component bootstrap variance over σ²/n) scales n for this study's layout.",
        "",
        *_table(
            ["contrast", "difference", "σ", "n", "detectable at n", *[f"n for δ={d}" for d in deltas], "design effect"],
            rows,
        ),
    ]


def _failures(report: ValueReport) -> list[str]:
    f = report.failure_rates
    if f is None or not f.by_role:
        return []
    rows = []
    for role, block in f.by_role.items():
        for group, r in block.rows.items():
            rows.append(
                [
                    f"{role} ({', '.join(block.actions)})",
                    group,
                    str(r.executions),
                    str(r.ok),
                    str(r.malformed),
                    str(r.length),
                    _ci(r.failed_rate.value, r.failed_rate.interval, 3),
                    _f(r.failed_reward, 2),
                ]
            )
    return [
        "### Failure rates",
        "",
        f"Scored executions by status; the failed share is the stratum-balanced mean of each state's share. "
        f"{f.incomplete_records} incomplete (transport) records are left out, never scored as failures.",
        "",
        *_table(["role", "group", "executions", "valid", "malformed", "length", "failed share", "failed reward"], rows),
    ]
