"""`value`: score forecasters and routers on a fork study and write value.json (`ValueReport`).

Steps: read RUN_DIR/forks.jsonl → states (`outcomes.build_states`) → dev/test split by support
component (`outcomes.dev_split`) → forecasts: every registered forecaster, each `--forecasts`
file, the LLM forecaster when a client is given, and each calibration map applied to the raw
ones (files, LLM) → per-state scores on the test rows → stratum-balanced means → bootstrap
intervals over support components → routers' utility at each price (`scoring`) → the further
analyses (`analyses`) and the parents' own decisions against each state's need
(`decisions`) → value.json, written through `value_file.ValueReport`.

Every number in value.json is computed on the test rows (all rows when there is no dev split),
so fitted and unfitted forecasters are compared on the same states.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.value import (
    decision_logprobs,  # registers the `logprob` forecaster
    fitted,  # noqa: F401  (registers the fitted forecasters and maps)
    heads,  # registers the forest and fine-tuned heads
)
from branchpoint.evaluation.value.analyses import (
    THREE_PAIR_FORECASTER,
    audit_bounds,
    chosen_branches,
    compare_objectives,
    read_trace,
    three_action_study,
    three_pair_forecast,
    three_pair_section,
)
from branchpoint.evaluation.value.audit_sample import read_audit_sample, source_supported_section
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.decisions import decision_quality
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import (
    Forecast,
    ForecasterUnavailable,
    calibrators,
    check_component_settings,
    read_forecasts,
    registered_forecasters,
    run_calibrator,
    run_forecaster,
)
from branchpoint.evaluation.value.outcomes import Roles, StateTable, build_states, dev_split
from branchpoint.evaluation.value.rewards import get_reward
from branchpoint.evaluation.value.scoring import score
from branchpoint.evaluation.value.three_action import is_three_action_file
from branchpoint.evaluation.value.value_file import VALUE_SCHEMA_VERSION, value_file_text
from branchpoint.models.server_info import describe_client
from branchpoint.provenance import collect, dump_block
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, VALUE_FILE, ExecutionRecord

if TYPE_CHECKING:
    from branchpoint.models.call import ModelClient

# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def fork_paths(path: Path) -> tuple[Path, Path | None]:
    """(forks file, parent executions file or None) of a run directory or a forks .jsonl file."""
    path = Path(path)
    if path.is_dir():
        forks = path / FORKS_FILE
        if not forks.is_file():
            raise InputError(
                f"{forks}: not found; this run has no forked executions yet (run `branchpoint fork {path}` first)"
            )
        execs = path / EXECUTIONS_FILE
        return forks, execs if execs.is_file() else None
    if not path.is_file():
        raise InputError(f"{path}: not found (expected a run directory or a forks .jsonl file)")
    sibling = path.parent / EXECUTIONS_FILE
    return path, sibling if sibling.is_file() and sibling != path else None


def load_states(path: Path, config: ValueConfig) -> tuple[StateTable, dict[str, ExecutionRecord], Path]:
    """The state table of a run (or forks file), the parent records by id, and the forks path.

    Only branches of one fork settings fingerprint are read, unless `config` chooses one
    (`fork_settings`) or pools them (`mix_fork_settings`); a mix is refused (`fork_settings.choose`).
    """
    states, parents, forks_path, _ = load_study(path, config)
    return states, parents, forks_path


def load_study(path: Path, config: ValueConfig) -> tuple[StateTable, dict[str, ExecutionRecord], Path, dict[str, Any]]:
    """`load_states`, and the summary of the fork settings read (value.json's `fork_settings`)."""
    forks_path, execs_path = fork_paths(path)
    get_reward(config.reward)  # unknown names fail before any work
    records = read_trace(forks_path)
    forked = [r for r in records if r.parent is not None]
    if not forked:
        raise InputError(f"{forks_path}: no forked executions (records with a parent); run `branchpoint fork` first")
    forked, fork_summary = chosen_branches(forked, config, forks_path)
    roles = Roles(config.pending_roles)
    states = build_states(forked, reward_name=config.reward, judge=config.judge, roles=roles)
    if len(states) == 0:
        c = states.counts
        raise InputError(
            f"{forks_path}: no state can be scored: of {c.groups} forked states, {c.missing_role} lack one of the "
            f"two actions and {c.few_repeats} have fewer than 2 repeats of one ({c.incomplete} incomplete records "
            "left out); fork with both actions and --repeats 2 or more"
        )
    parents: dict[str, ExecutionRecord] = {}
    if execs_path is not None:
        for r in read_trace(execs_path):
            parents[r.execution_id] = r
    return states, parents, forks_path, fork_summary


# --------------------------------------------------------------------------------------------
# Forecasts
# --------------------------------------------------------------------------------------------


def collect_forecasts(
    states: StateTable,
    dev: np.ndarray,
    *,
    files: Sequence[Path] = (),
    extra: Mapping[str, Forecast] | None = None,
    seed: int = 0,
    forecaster_settings: Mapping[str, Mapping[str, Any]] | None = None,
    calibrator_settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[dict[str, Forecast], dict[str, dict[str, Any]], dict[str, str]]:
    """Every forecast to score, what each is, and the forecasters skipped (with the reason).

    Registered forecasters and calibration maps see the development view of `states`
    (`dev_view.DevView`: no test outcomes), with their settings by name (`forecaster_settings`,
    `calibrator_settings`); forecast files are matched to the rows here."""
    out: dict[str, Forecast] = {}
    meta: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    raw: list[str] = []
    view = DevView.of(states, dev)
    for entry in registered_forecasters():
        if entry.fitted and not dev.any():
            skipped[entry.name] = "fitted on dev rows, and there are none (--dev-split 0)"
            continue
        try:
            out[entry.name] = run_forecaster(entry, view, view.dev, (forecaster_settings or {}).get(entry.name))
        except ForecasterUnavailable as exc:
            skipped[entry.name] = str(exc)
            continue
        meta[entry.name] = {"kind": "registered", "fitted": entry.fitted}
        if entry.calibrate:
            raw.append(entry.name)
    for path in files:
        name = f"file:{Path(path).stem}"
        while name in out:
            name += "'"
        out[name] = read_forecasts(Path(path), states)
        meta[name] = {"kind": "file"}
        raw.append(name)
    for name, fc in (extra or {}).items():
        fc.check(name, len(states))
        out[name] = fc
        meta[name] = {"kind": "given"}
        raw.append(name)
    for base in raw:
        for cal_name in calibrators():
            name = f"{base}+{cal_name}"
            if dev.sum() < 2:
                skipped[name] = "calibration needs at least 2 dev rows (--dev-split > 0)"
                continue
            try:
                fc = run_calibrator(cal_name, out[base], view, seed, (calibrator_settings or {}).get(cal_name))
            except ForecasterUnavailable as exc:
                skipped[name] = str(exc)
                continue
            fc.check(name, len(states))
            out[name] = fc
            meta[name] = {"kind": "calibrated", "raw": base, "map": cal_name}
    for name, fc in out.items():
        if fc.info:
            meta[name]["info"] = fc.info
    return out, meta, skipped


def state_summary(states: StateTable, dev: np.ndarray) -> dict[str, Any]:
    """How many records and states were read, scored, split and left out."""
    c = states.counts
    test = ~dev if dev.any() else np.ones(len(states), dtype=bool)
    strata, sizes = np.unique(states.stratum[test].astype(str), return_counts=True)
    return {
        "records": c.records,
        "incomplete_records": c.incomplete,
        "other_action_records": c.other_action,
        "judged_records": c.judged_records,
        "judge_calls": c.judge_calls,
        "forked_states": c.groups,
        "scored": len(states),
        "dev": int(dev.sum()),
        "test": int(test.sum()),
        "excluded": {"missing_action": c.missing_role, "fewer_than_2_repeats": c.few_repeats},
        "components": {
            "dev": len(set(states.component[dev].tolist())),
            "test": len(set(states.component[test].tolist())),
        },
        "test_strata": {str(s): int(n) for s, n in zip(strata, sizes)},
        "mean_repeats": {"think": float(states.think.m.mean()), "search": float(states.search.m.mean())},
    }


TextEncoder = Callable[[list[str]], np.ndarray]


def attach_features(
    states: StateTable,
    parents: Mapping[str, ExecutionRecord],
    config: ValueConfig,
    text_encoder: TextEncoder | None = None,
) -> None:
    """Attach the public per-state features the fitted forecasters read: "public_prefix" always
    (`features.prefix_features`), "decision_logprobs" where the parents' decide steps have log
    probabilities (`decision_logprobs.decision_features`), "minilm" (frozen embeddings of `features.state_texts`) when
    `config.text_head`. The encoder is passed in (`text_encoder`: texts → (n, d) array; the CLI
    passes the packaged MiniLM ONNX encoder's `encode`), since the evaluation never imports the
    retrieval package."""
    from branchpoint.evaluation.value.features import prefix_features, state_texts

    states.features["public_prefix"] = prefix_features(states, parents)
    decisions = decision_logprobs.decision_features(states, parents)
    if decisions is not None:  # only where decide steps recorded log probabilities
        states.features[decision_logprobs.FEATURE] = decisions
    if config.text_head:
        if text_encoder is None:
            raise InputError(
                "text_head needs a text encoder (`branchpoint value --text-head` passes the packaged MiniLM)"
            )
        states.features["minilm"] = np.asarray(text_encoder(state_texts(states, parents)), dtype=float)
    if config.finetune_head:  # the texts themselves, for the fine-tuned MiniLM head (`heads`)
        states.features[heads.TEXT_FEATURE] = np.array(state_texts(states, parents), dtype=object)


def supervision_section(states: StateTable, history_path: Path, config: ValueConfig) -> dict[str, Any]:
    """value.json's `supervision_subsets`: the forecasters fitted on the historical fork study at
    `history_path` against the same fitted on k target questions (`supervision.supervision_study`;
    all the target's scored states are dealt into its outer folds, the dev split aside)."""
    from branchpoint.evaluation.value.supervision import supervision_study

    # the history is another fork study: a fingerprint chosen here is not its own
    of_history = config.model_copy(update={"fork_settings": None, "text_head": False, "finetune_head": False})
    history, parents, history_path, _ = load_study(history_path, of_history)
    attach_features(history, parents, of_history)
    out = supervision_study(
        states,
        history,
        budgets=config.supervision_budgets,
        samples=config.supervision_samples,
        seed=config.seed,
        resamples=config.resamples,
        level=config.level,
    )
    out["history"]["source"] = str(history_path)
    return out


def value_study(
    path: str | Path,
    *,
    config: ValueConfig = ValueConfig(),
    forecast_files: Sequence[Path] = (),
    extra_forecasts: Mapping[str, Forecast] | None = None,
    llm_client: ModelClient | None = None,
    llm_actor: str | None = None,
    llm_style: str = "chat",
    text_encoder: TextEncoder | None = None,
    three_pair: Sequence[Path] | None = None,
    out_dir: Path | None = None,
    write: bool = True,
    progress: bool = False,
    settings_source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Score every forecaster and router on a fork study; write value.json; return its content.

    `settings_source` (where each setting came from: `spec`, `from_spec`, `overrides`, see
    `experiments.study_settings`) is recorded beside the settings in value.json's `settings`.

    `path` is a run directory (its forks.jsonl) or a forks .jsonl file. `extra_forecasts` adds
    forecasts computed elsewhere (arrays over the scored states, in `load_states` row order);
    `llm_client` adds the LLM forecaster (`llm.llm_forecasts`, endpoint style `llm_style`) under
    the name "llm". `text_encoder` (texts → embeddings) is needed with `config.text_head`.
    Forecasts files with `q_stop`, `q_same`, `q_switch` are three-action forecasts, scored in
    the `three_action` section. `three_pair` (three fork studies: A/X, A/Y, B/X) adds the
    composed forecast `three_pair` (`analyses.three_pair_forecast`) and its section
    `three_pair_composition`.
    """
    check_component_settings("forecaster", config.forecasters)  # unknown names and bad settings fail first
    check_component_settings("calibrator", config.calibrators)
    sample = read_audit_sample(Path(config.audit_sample)) if config.audit_sample else None  # bad lines fail first
    states, parents, forks_path, fork_summary = load_study(Path(path), config)
    attach_features(states, parents, config, text_encoder)
    dev = dev_split(states, config.dev_split, config.seed)
    extra = dict(extra_forecasts or {})
    if llm_client is not None:
        from branchpoint.evaluation.value.llm import llm_forecasts

        actor = llm_actor or getattr(llm_client, "name", None) or "a search-augmented LLM agent"
        extra["llm"] = llm_forecasts(llm_client, states, parents, actor=actor, style=llm_style, progress=progress)
    three_files = [Path(f) for f in forecast_files if is_three_action_file(Path(f))]
    two_files = [Path(f) for f in forecast_files if Path(f) not in three_files]
    fcs, meta, skipped = collect_forecasts(
        states,
        dev,
        files=two_files,
        extra=extra,
        seed=config.seed,
        forecaster_settings=config.forecasters,
        calibrator_settings=config.calibrators,
    )
    composed = None
    if three_pair:
        # the histories are other fork studies: a fingerprint chosen here is not theirs
        of_history = config.model_copy(update={"fork_settings": None})
        histories = [load_states(Path(h), of_history)[0] for h in three_pair]
        fc, composed = three_pair_forecast(states, histories, config.three_pair_design)
        fcs[THREE_PAIR_FORECASTER] = fc
        meta[THREE_PAIR_FORECASTER] = {"kind": "composition", "info": fc.info}
    raw_names = [name for name, m in meta.items() if m["kind"] in ("file", "given")]
    scores = score(states, dev, fcs, config, signal_forecasts=raw_names)
    if composed is not None:
        scores["three_pair_composition"] = three_pair_section(scores, [Path(h) for h in three_pair or ()], composed)
    scores["scoring_objectives"] = compare_objectives(states, dev, forks_path, config)
    scores["decision_quality"] = decision_quality(
        states,
        parents,
        ~dev if dev.any() else np.ones(len(states), dtype=bool),
        rule=config.decision_need,
        resamples=config.resamples,
        seed=config.seed,
        level=config.level,
    )
    if config.audit_judges:
        scores["audit_bounds"] = audit_bounds(states, dev, fcs, forks_path, config, sample)
    if sample is not None and sample.supported:
        scores["source_supported"] = source_supported_section(states, dev, fcs, config, sample)
    three = three_action_study(states, dev, forks_path, config, files=three_files)
    if three is not None:
        scores["three_action"] = three
    else:
        for f in three_files:
            skipped[f"file:{f.stem}"] = (
                "a three-action forecasts file (q_stop, q_same, q_switch), and no pending_query "
                "state has STOP, SEARCH and SWITCH with 2 or more repeats each"
            )
    if config.supervision_history:
        scores["supervision_subsets"] = supervision_section(states, Path(config.supervision_history), config)
    if config.learning_curves:
        from branchpoint.evaluation.value.curves import curve_families, learning_curves

        raw = {name: fcs[name] for name, m in meta.items() if m["kind"] in ("file", "given")}
        scores["learning_curves"] = learning_curves(
            states,
            curve_families(states, raw),
            budgets=config.curve_budgets,
            samples=config.curve_samples,
            seed=config.seed,
            resamples=config.resamples,
            level=config.level,
        )
    report: dict[str, Any] = {
        "schema_version": VALUE_SCHEMA_VERSION,
        "source": str(forks_path),
        "settings": {
            **config.model_dump(mode="json"),
            "roles": Roles(config.pending_roles).table(),
            **(settings_source or {}),
        },
        "states": state_summary(states, dev),
        "fork_settings": fork_summary,
        "forecasters": meta,
        "skipped_forecasters": skipped,
        **scores,
    }
    servers = [d for d in [describe_client(llm_client)] if d is not None]
    report["provenance"] = dump_block(collect("value", model_servers=servers))
    if write:
        from branchpoint.traces import write_files_atomically

        out = Path(out_dir) if out_dir is not None else forks_path.parent
        write_files_atomically({out / VALUE_FILE: value_file_text(report)})
    return report
