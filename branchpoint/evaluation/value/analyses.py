"""The analyses of `branchpoint value` beyond the main scores, each a section of value.json: the
scoring-objective comparison, the shared-label audit bounds, the STOP / SAME / SWITCH study at
pending queries (with three-action forecasts files), and the three-pair composition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.fork_settings import choose
from branchpoint.evaluation.value.audit_sample import AuditSample
from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval, single_component_strata
from branchpoint.evaluation.value.config import ValueConfig, price_key
from branchpoint.evaluation.value.forecasters import Forecast
from branchpoint.evaluation.value.json_numbers import interval_of, num
from branchpoint.evaluation.value.objectives import LEXICAL_OBJECTIVES, align, objective_comparison
from branchpoint.evaluation.value.outcomes import Roles, StateTable, build_states
from branchpoint.evaluation.value.scores import balanced_mean
from branchpoint.traces import ExecutionRecord, TraceError, read_records


def read_trace(path: Path) -> list[ExecutionRecord]:
    """The records of a trace file, a malformed line as an InputError naming file and line."""
    try:
        return read_records(path)
    except TraceError as exc:
        raise InputError(str(exc)) from None


def forked_records(path: Path, config: ValueConfig | None = None) -> list[ExecutionRecord]:
    """The records of a forks file that have a parent (the forked continuations), of the fork
    settings `config` reads (`fork_settings.choose`; a mix is refused unless it allows one)."""
    forked = [r for r in read_trace(path) if r.parent is not None]
    return chosen_branches(forked, config or ValueConfig(), path)[0]


def chosen_branches(
    records: list[ExecutionRecord], config: ValueConfig, path: Path
) -> tuple[list[ExecutionRecord], dict[str, Any]]:
    """`records` of the fork settings `config` reads, and the summary value.json records."""
    return choose(records, config.fork_choice(), str(path))


def compare_objectives(states: StateTable, dev: np.ndarray, forks_path: Path, config: ValueConfig) -> dict[str, Any]:
    """The scoring-objective comparison (`objectives.objective_comparison`): the main `correct`
    reward (reference equivalence under `config.judge`) beside normalised containment and
    exact match, on the same executions and test states. Only for the `correct` reward."""
    if config.reward != "correct":
        return {"skipped": f'compares answer-correctness objectives; the reward here is "{config.reward}"'}
    forked = forked_records(forks_path, config)
    roles = Roles(config.pending_roles)
    tables: dict[str, StateTable] = {"correct": states}
    for name in LEXICAL_OBJECTIVES:
        tables[name] = align(states, build_states(forked, reward_name=name, judge=config.judge, roles=roles))
    test = ~dev if dev.any() else np.ones(len(states), dtype=bool)
    out = objective_comparison(
        tables, test, reference="correct", resamples=config.resamples, seed=config.seed, level=config.level
    )
    out["reference_judge"] = config.judge
    return out


def audit_bounds(
    states: StateTable,
    dev: np.ndarray,
    forecasts: Mapping[str, Forecast],
    forks_path: Path,
    config: ValueConfig,
    sample: AuditSample | None = None,
) -> dict[str, Any]:
    """Shared-label audit bounds (`audit.shared_label_bounds`): the labels of two judges
    (`config.audit_judges`) fix the answers they agree on and leave the others in [0, 1]; for
    every forecaster, the gain-risk contrast against the mean-gain comparator
    (`historical_mean`) and against zero gain, and the Brier contrast against
    `historical_mean`, under the original labels and at both bounds, with an interval from
    the lower bound's lower end to the upper bound's upper end.

    With a sampled audit (`sample`, `audit_sample.read_audit_sample`) only its questions are
    audited: the others' answers keep their original labels, and each audited question's
    corrections are weighted by 1/π, its inclusion probability (search-value study, Appendix C,
    "Shared labels and sample weights"); `sampling_se` is then the audit-sampling error."""
    from branchpoint.evaluation.value.audit import (
        bound_summary,
        brier_contrast,
        gain_contrast,
        label_intervals,
        shared_label_bounds,
    )

    forked = forked_records(forks_path, config)
    roles = Roles(config.pending_roles)
    panels = [
        align(states, build_states(forked, reward_name="correct", judge=j, roles=roles))
        for j in config.audit_judges or ()
    ]
    low, high = label_intervals(*((p.think.y, p.search.y) for p in panels))
    test = ~dev if dev.any() else np.ones(len(states), dtype=bool)
    tt = states.subset(test)
    idx = np.flatnonzero(test)
    audited = sample.audited(tt.question_id) if sample is not None else np.ones(len(tt), dtype=bool)
    inclusion = sample.inclusion_of(tt.question_id) if sample is not None else None

    # an answer outside the audit keeps its original label: a fixed interval at it, no correction
    def audited_ends(ends: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
        return (
            [ends[0][i] if audited[j] else tt.think.y[j] for j, i in enumerate(idx)],
            [ends[1][i] if audited[j] else tt.search.y[j] for j, i in enumerate(idx)],
        )

    low_t, high_t = audited_ends(low), audited_ends(high)
    single = single_component_strata(tt.component, tt.stratum)

    def summarise(contrast: Any) -> dict[str, Any]:
        b = shared_label_bounds(tt, contrast, low_t, high_t, inclusion=inclusion)
        samples = None
        if config.resamples > 0 and not single:
            boot = bootstrap_means(
                np.stack([b.lower, b.upper], axis=1),
                tt.component,
                tt.stratum,
                resamples=config.resamples,
                seed=config.seed,
            )
            samples = {"lower": boot[:, 0], "upper": boot[:, 1]}

        def iv(x: np.ndarray) -> list[Any]:
            lo, hi = percentile_interval(x, config.level)
            return interval_of(lo, hi)

        return bound_summary(b, tt.stratum, samples, iv)

    out: dict[str, Any] = {
        "judges": list(config.audit_judges or ()),
        "gain_vs_mean_gain": {},
        "gain_vs_zero": {},
        "brier_vs_mean": {},
    }
    ref = forecasts.get("historical_mean")
    for name, fc in forecasts.items():
        q_t, q_s = fc.q_think[test], fc.q_search[test]
        f = q_s - q_t
        out["gain_vs_zero"][name] = summarise(gain_contrast(f, np.zeros_like(f)))
        if ref is not None and name != "historical_mean":
            rt, rs = ref.q_think[test], ref.q_search[test]
            out["gain_vs_mean_gain"][name] = summarise(gain_contrast(f, rs - rt))
            out["brier_vs_mean"][name] = summarise(brier_contrast(q_t, q_s, rt, rs))
    if single:
        out["intervals_withheld"] = f"single-component strata: {', '.join(single)}"
    if sample is not None:
        out["audit_sample"] = {
            "file": sample.path,
            "audited_test_questions": len({q for q, a in zip(tt.question_id, audited) if a}),
            "test_questions": len(set(tt.question_id)),
            "unknown_questions": sample.unknown(states.question_id),
            "weighting": "inverse inclusion (1/π) on each audited question's corrections; unaudited answers "
            "keep their original labels",
        }
    return out


def three_action_study(
    states: StateTable, dev: np.ndarray, forks_path: Path, config: ValueConfig, files: Sequence[Path] = ()
) -> dict[str, Any] | None:
    """STOP / SAME / SWITCH at pending queries (`three_action`): outcome error and two-action
    gain loss of the dev references and of each three-action forecasts file (`files`, read by
    `three_action.read_three_action_forecasts`, named `file:<stem>`), and constant /
    best-constant / sample-informed utility per price, with intervals; None when no
    pending_query state has all three actions. Dev rows are the main split's (by state key)."""
    from branchpoint.evaluation.value.three_action import (
        read_three_action_forecasts,
        three_action_columns,
        three_action_table,
    )

    forked = forked_records(forks_path, config)
    if not any(r.branch == "SWITCH" and r.parent is not None and r.parent.boundary == "pending_query" for r in forked):
        return None
    same = build_states(forked, reward_name=config.reward, judge=config.judge, roles=Roles(("STOP", "SEARCH")))
    switch = build_states(forked, reward_name=config.reward, judge=config.judge, roles=Roles(("STOP", "SWITCH")))
    table = three_action_table(same, switch)
    if table is None:
        return None
    dev_keys = {k for k, d in zip(states.keys, dev) if d}
    t_dev = np.array([k in dev_keys for k in table.states.keys], dtype=bool)
    t_test = ~t_dev if t_dev.any() else np.ones(len(t_dev), dtype=bool)
    known = set(states.keys) | set(states.excluded_keys)
    given: dict[str, Any] = {}
    file_info: dict[str, Any] = {}
    for path in files:
        name = f"file:{Path(path).stem}"
        while name in given:
            name += "'"
        given[name], file_info[name] = read_three_action_forecasts(Path(path), table, known)
    names, matrix, chosen = three_action_columns(table, t_dev, t_test, config.prices, given)
    strata = chosen.pop("strata")
    comps = table.states.component[t_test]
    point = dict(zip(names, balanced_mean(matrix, strata)))
    single = single_component_strata(comps, strata)
    samples: dict[str, np.ndarray] = {}
    if config.resamples > 0 and not single:
        boot = bootstrap_means(matrix, comps, strata, resamples=config.resamples, seed=config.seed)
        samples = {n: boot[:, j] for j, n in enumerate(names)}

    def entry(name: str) -> dict[str, Any]:
        iv = None
        if samples:
            lo, hi = percentile_interval(samples[name], config.level)
            iv = interval_of(lo, hi)
        return {"value": num(point[name]), "interval": iv}

    forecasts = sorted({n.split("/", 1)[1] for n in names if n.startswith("outcome/")})
    out: dict[str, Any] = {
        "states": {"dev": int(t_dev.sum()), "test": int(t_test.sum())},
        "forecasts": {f: {"outcome_error": entry(f"outcome/{f}"), "gain_loss": entry(f"gain/{f}")} for f in forecasts},
        "utility": {
            pk: {n.split("/", 2)[2]: entry(n) for n in names if n.startswith(f"U/{pk}/")}
            for pk in (price_key(p) for p in config.prices)
        },
        "best_constant": {k: v for k, v in chosen.items() if k != "chosen_on"},
        "chosen_on": chosen["chosen_on"],
        "intervals_withheld": f"single-component strata: {', '.join(single)}" if single else None,
    }
    if file_info:
        out["forecast_files"] = file_info
    return out


THREE_PAIR_FORECASTER = "three_pair"
THREE_PAIR_COMPARATOR = "historical_mean"
THREE_PAIR_FORMULA = "p̃_BY,T = p̃_BX,T;  Δ̃_BY = Δ̃_BX + Δ̃_AY − Δ̃_AX;  p̃_BY,S = clip[0,1](p̃_BY,T + Δ̃_BY)"
PAIR_NAMES: tuple[str, str, str] = ("A/X", "A/Y", "B/X")


THREE_PAIR_DESIGNS: tuple[str, ...] = ("auto", "same_questions", "disjoint")


def history_moments(
    history: StateTable, by: str = "question"
) -> tuple[dict[tuple[str, str], tuple[float, float]], tuple[float, float]]:
    """Per group of a history pair's states: their mean THINK (STOP) success and mean gain
    Δ̄ = Ȳ_S − Ȳ_T; and both means over all its states (the pair's historical means). Groups
    are (question_id, boundary kind) with `by="question"`, (stratum, boundary kind) with
    `by="stratum"`, (boundary kind,) with `by="kind"` (its key's first part is then "")."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (qid, stratum, kind) in enumerate(zip(history.question_id, history.stratum, history.boundary_kind)):
        first = {"question": str(qid), "stratum": str(stratum), "kind": ""}[by]
        groups.setdefault((first, str(kind)), []).append(i)
    think, gain = history.think.mean_y, history.dbar
    per = {k: (float(think[rows].mean()), float(gain[rows].mean())) for k, rows in groups.items()}
    return per, (float(think.mean()), float(gain.mean()))


def _lookup(
    keys: Sequence[tuple[str, str]], levels: Sequence[dict[tuple[str, str], tuple[float, float]]], mean: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Per key (first part, boundary kind) the moments of the first level that has it, else
    `mean`, and the level used (len(levels) for `mean`). A level made `by="kind"` is looked up
    by ("", kind)."""
    out = np.zeros((len(keys), 2))
    level = np.full(len(keys), len(levels))
    for i, key in enumerate(keys):
        out[i] = mean
        for j, per in enumerate(levels):
            hit = per.get(key, per.get(("", key[1])))
            if hit is not None:
                out[i], level[i] = hit, j
                break
    return out, level


def three_pair_forecast(
    target: StateTable, histories: Sequence[StateTable], design: str = "auto"
) -> tuple[Forecast, dict[str, Any]]:
    """The composed B/Y forecast of every target state from the histories of A/X, A/Y and B/X
    (in that order), by `audit.three_pair_composition` (search-value study, Appendix D,
    "Component composition", Eqs. 7–9). Each component uses its own historical labels.

    `design`:
    - `same_questions`: the histories ran the target's questions; a target state takes each
      history's moments of its own question and boundary kind (a state some history lacks takes
      that history's means over all its states and is counted in `unmatched_states`);
    - `disjoint`: the seed's development / test design: the histories ran other (development)
      questions, so a target state takes each history's moments of its stratum and boundary
      kind, else of its boundary kind, else the history's means (counted per level in
      `fallbacks`);
    - `auto`: `same_questions` when some target question is in all three histories, else
      `disjoint`.
    """
    from branchpoint.evaluation.value.audit import three_pair_composition

    if len(histories) != 3:
        raise InputError(f"three-pair composition needs three histories (A/X, A/Y, B/X), got {len(histories)}")
    if design not in THREE_PAIR_DESIGNS:
        raise InputError(f"three-pair design: expected one of {', '.join(THREE_PAIR_DESIGNS)}, got {design!r}")
    shared = set(target.question_id).intersection(*(set(h.question_id) for h in histories))
    chosen = design if design != "auto" else ("same_questions" if shared else "disjoint")
    cols = np.zeros((3, len(target), 2))
    info: dict[str, Any] = {"design": chosen, "design_asked": design}
    if chosen == "same_questions":
        keys = [(str(q), str(k)) for q, k in zip(target.question_id, target.boundary_kind)]
        matched = np.ones(len(keys), dtype=bool)
        for j, h in enumerate(histories):
            per, mean = history_moments(h, "question")
            cols[j], level = _lookup(keys, [per], mean)
            matched &= level == 0
        info["matched_questions"] = len({target.question_id[i] for i in np.flatnonzero(matched)})
        info["unmatched_states"] = int((~matched).sum())
    else:
        keys = [(str(s), str(k)) for s, k in zip(target.stratum, target.boundary_kind)]
        fallbacks = {"stratum_and_kind": 0, "kind": 0, "history_mean": 0}
        for j, h in enumerate(histories):
            by_stratum, mean = history_moments(h, "stratum")
            by_kind, _ = history_moments(h, "kind")
            cols[j], level = _lookup(keys, [by_stratum, by_kind], mean)
            for lv, name in enumerate(fallbacks):
                fallbacks[name] += int((level == lv).sum())
        info["matched_questions"] = len(shared)
        info["unmatched_states"] = sum(1 for q in target.question_id if q not in shared)
        info["fallbacks"] = fallbacks
        info["shared_questions"] = len(shared)
    ax, ay, bx = cols
    q_t, q_s = three_pair_composition(bx[:, 0], bx[:, 1], ay[:, 1], ax[:, 1])
    return Forecast(q_t, q_s, dict(info)), info


def _oriented(scores: Mapping[str, Any], name: str, other: str, key: str) -> dict[str, Any] | None:
    """The paired difference name − other of `key` from value.json's `paired`, whichever order it was stored in."""
    paired = scores.get("paired", {})
    if f"{name} - {other}" in paired:
        d = paired[f"{name} - {other}"][key]
        return {"value": d["difference"], "interval": d["interval"]}
    if f"{other} - {name}" in paired:
        d = paired[f"{other} - {name}"][key]
        iv = d["interval"]

        def neg(x: Any) -> Any:
            return None if x is None else -x

        return {"value": neg(d["difference"]), "interval": [neg(iv[1]), neg(iv[0])] if iv else None}
    return None


def three_pair_section(scores: Mapping[str, Any], histories: Sequence[Path], info: Mapping[str, Any]) -> dict[str, Any]:
    """value.json's `three_pair_composition`: the composed forecast's Brier, gain risk L and R²_Δ
    on the target's test states with their intervals, and its paired Brier and L differences
    from the `historical_mean` comparator (the study's component controls compare composition
    with historical means on fixed target outcomes)."""
    name, ref = THREE_PAIR_FORECASTER, THREE_PAIR_COMPARATOR
    iv = scores["intervals"]
    has_ref = ref in scores["brier"]
    return {
        "forecaster": name,
        "histories": {pair: str(path) for pair, path in zip(PAIR_NAMES, histories)},
        "matched_questions": info["matched_questions"],
        "unmatched_states": info["unmatched_states"],
        "design": info.get("design"),
        **({"fallbacks": info["fallbacks"]} if "fallbacks" in info else {}),
        "comparator": ref if has_ref else None,
        "scores": {
            "brier": {"value": scores["brier"][name]["brier"], "interval": iv["brier"].get(name)},
            "gain_risk": {"value": scores["gain_risk"][name], "interval": iv["gain_risk"].get(name)},
            "gain_r2": {"value": scores["gain_r2"][name], "interval": iv["gain_r2"].get(name)},
            "brier_minus_comparator": _oriented(scores, name, ref, "brier") if has_ref else None,
            "gain_risk_minus_comparator": _oriented(scores, name, ref, "gain_risk") if has_ref else None,
        },
        "formula": THREE_PAIR_FORMULA,
    }
