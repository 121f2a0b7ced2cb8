"""`branchpoint value`: score search-value forecasters and routers on a fork study."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from branchpoint.cli.common import (
    FORK_SETTINGS_HELP,
    MIX_FORK_SETTINGS_HELP,
    app,
    console,
    csv_list,
    friendly_errors,
)
from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.traces import VALUE_FILE


@app.command()
@friendly_errors
def value(
    ctx: typer.Context,
    path: Path = typer.Argument(
        ..., help="A run directory with forks.jsonl (or a forks .jsonl file); its spec.yaml is read first."
    ),
    forecasts: list[Path] = typer.Option(
        [], "--forecasts", help='JSONL of {"parent_execution_id", "checkpoint_id", "q_think", "q_search"}; repeatable.'
    ),
    dev_split: float = typer.Option(
        0.3,
        "--dev-split",
        help="Fraction of support components to fit on; the rest is scored.",
    ),
    prices: str = typer.Option(
        "0,0.001,0.005,0.01,0.02",
        "--prices",
        help="Token prices λ: U = Y − λ·T/1000.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: beside forks.jsonl)."),
    judge: str = typer.Option(DEFAULT_JUDGE, "--judge", help="rule (offline default) or given (labels in the traces)."),
    reward: str = typer.Option(
        "correct", "--reward", help="correct (0/1), set_f1 (collection answers), containment or exact_match."
    ),
    pending_roles: str = typer.Option("STOP,SEARCH", "--pending-roles", help="T and S roles at pending_query."),
    resamples: int = typer.Option(10_000, "--resamples", min=0, help="Bootstrap resamples (0: no intervals)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the dev split, the folds and the bootstrap."),
    forecaster_module: list[str] = typer.Option(
        [],
        "--forecaster-module",
        help="Import a module that registers @forecaster functions (from the working directory or the run "
        "spec's folder); repeatable.",
    ),
    forecaster_arg: list[str] = typer.Option(
        [],
        "--forecaster-arg",
        help="A forecaster's setting: NAME.KEY=VALUE with a YAML value (public_prefix_ridge.folds=3), checked "
        "against its settings; repeatable.",
    ),
    calibrator_arg: list[str] = typer.Option(
        [], "--calibrator-arg", help="A calibration map's setting: NAME.KEY=VALUE with a YAML value; repeatable."
    ),
    llm_forecaster: bool = typer.Option(
        False, "--llm-forecaster", help="Also ask the run's model to forecast each state."
    ),
    text_head: bool = typer.Option(False, "--text-head", help="Also fit minilm_ridge on frozen MiniLM embeddings."),
    finetune_head: bool = typer.Option(
        False, "--finetune-head", help="Also fine-tune the MiniLM head minilm_finetuned on the dev states' texts."
    ),
    audit_judges: str = typer.Option(
        "", "--audit-judges", help="Two judges (e.g. rule,given): shared-label audit bounds."
    ),
    audit_sample: Path | None = typer.Option(
        None,
        "--audit-sample",
        help='JSONL of audited questions {"question_id", "inclusion", "source_supported"}: inverse-inclusion '
        "weights for the audit bounds, and scores on the source-supported subset.",
    ),
    learning_curves: bool = typer.Option(
        False, "--learning-curves", help="Matched-configuration gain learning curves."
    ),
    curve_budgets: str = typer.Option(
        "20,40,80,120,240,480,800,1100", "--curve-budgets", help="Training budgets (questions) of the learning curves."
    ),
    curve_samples: int = typer.Option(10, "--curve-samples", min=1, help="Nested training samples per budget."),
    three_pair: str = typer.Option(
        "", "--three-pair", help="Fork studies of A/X, A/Y, B/X (comma-separated): add the composed B/Y forecast."
    ),
    supervision_history: Path | None = typer.Option(
        None,
        "--supervision-history",
        help="A historical fork study: forecasters fitted on it vs on k labelled target questions.",
    ),
    supervision_budgets: str = typer.Option(
        "20,40,80,120,240", "--supervision-budgets", help="Target label budgets (questions) of the supervision study."
    ),
    three_pair_design: str = typer.Option(
        "auto",
        "--three-pair-design",
        help="same_questions (histories ran the target's questions), disjoint (other, development questions: "
        "moments per stratum and boundary kind) or auto.",
    ),
    decision_need: str = typer.Option(
        "gain",
        "--decision-need",
        help="When search is needed at a state, for the decision quality of the run's own searches: gain "
        "(Ȳ_S − Ȳ_T > 0) or think_fails (Ȳ_T < 0.5).",
    ),
    fork_settings: str | None = typer.Option(None, "--fork-settings", help=FORK_SETTINGS_HELP),
    mix_fork_settings: bool = typer.Option(False, "--mix-fork-settings", help=MIX_FORK_SETTINGS_HELP),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Score search-value forecasters and routers on a fork study; writes value.json.

    The run's spec.yaml is read first: its `value` section sets any of the scoring settings
    (dev split, prices, judge, reward, resamples, seed, ..., each forecaster's settings under
    `forecasters`); options given here override it, and value.json's `settings` records which
    came from where.

    Branches of different fork settings (search budget, switch source, depth, sampling as sent)
    are refused, naming the two settings: choose one with --fork-settings or pool them with
    --mix-fork-settings (recorded in value.json).

    Example: branchpoint value runs/fork-study --forecasts my_forecasts.jsonl --dev-split 0.3

    Example: branchpoint value runs/fork-study --forecaster-module my_forecasters --forecaster-arg metadata_ridge.folds=3

    Example: branchpoint value runs/fork-study --fork-settings 39019f740de3
    """
    from pydantic import ValidationError

    from branchpoint.cli.study_options import given_settings
    from branchpoint.errors import InputError
    from branchpoint.evaluation.value import ValueConfig
    from branchpoint.evaluation.value.tables import decision_line, factorial_table, forecaster_table, utility_table
    from branchpoint.experiments.study_settings import value_settings
    from branchpoint.experiments.value_study import import_forecaster_modules, run_value_study
    from branchpoint.registry import settings_from_args
    from branchpoint.traces import describe_validation_error

    try:
        price_list = tuple(float(p) for p in csv_list(prices))
    except ValueError:
        raise InputError(f"--prices: expected comma-separated numbers, got {prices!r}") from None
    try:
        budgets = tuple(int(b) for b in csv_list(curve_budgets))
    except ValueError:
        raise InputError(f"--curve-budgets: expected comma-separated whole numbers, got {curve_budgets!r}") from None
    try:
        sup_budgets = tuple(int(b) for b in csv_list(supervision_budgets))
    except ValueError:
        raise InputError(
            f"--supervision-budgets: expected comma-separated whole numbers, got {supervision_budgets!r}"
        ) from None
    histories = tuple(Path(p) for p in csv_list(three_pair))
    if histories and len(histories) != 3:
        raise InputError(f"--three-pair: expected three fork studies (A/X,A/Y,B/X), got {three_pair!r}")
    panels = tuple(csv_list(audit_judges))
    if panels and len(panels) != 2:
        raise InputError(f"--audit-judges: expected two judge names (e.g. rule,given), got {audit_judges!r}")
    cli = given_settings(
        ctx,
        {
            "judge": ("judge", judge),
            "reward": ("reward", reward),
            "dev_split": ("dev_split", dev_split),
            "prices": ("prices", list(price_list)),
            "resamples": ("resamples", resamples),
            "seed": ("seed", seed),
            "pending_roles": ("pending_roles", [a.upper() for a in csv_list(pending_roles)]),
            "text_head": ("text_head", text_head),
            "finetune_head": ("finetune_head", finetune_head),
            "audit_judges": ("audit_judges", list(panels) or None),
            "audit_sample": ("audit_sample", str(audit_sample) if audit_sample is not None else None),
            "learning_curves": ("learning_curves", learning_curves),
            "curve_budgets": ("curve_budgets", list(budgets)),
            "curve_samples": ("curve_samples", curve_samples),
            "forecaster_module": ("forecaster_modules", list(forecaster_module)),
            "three_pair_design": ("three_pair_design", three_pair_design),
            "supervision_history": (
                "supervision_history",
                str(supervision_history) if supervision_history is not None else None,
            ),
            "supervision_budgets": ("supervision_budgets", list(sup_budgets)),
            "decision_need": ("decision_need", decision_need),
            "fork_settings": ("fork_settings", fork_settings),
            "mix_fork_settings": ("mix_fork_settings", mix_fork_settings),
        },
    )
    settings = value_settings(
        path,
        cli,
        settings_from_args(forecaster_arg, "--forecaster-arg", named=True),
        settings_from_args(calibrator_arg, "--calibrator-arg", named=True),
    )
    try:
        config = ValueConfig.model_validate(settings.values)
    except ValidationError as exc:
        raise InputError(f"value settings: {describe_validation_error(exc)}") from None
    import_forecaster_modules(config.forecaster_modules, settings.search_paths)
    report = run_value_study(
        path,
        config=config,
        forecast_files=forecasts,
        llm_forecaster=llm_forecaster,
        out_dir=out,
        progress=not no_progress,
        three_pair=histories or None,
        settings_source=settings.source(),
    )
    console.print(settings.describe(), soft_wrap=True, highlight=False)
    console.print(forecaster_table(report))
    console.print(utility_table(report))
    console.print(factorial_table(report))
    console.print(decision_line(report), soft_wrap=True, highlight=False)
    for warning in report.get("warnings", []):
        console.print(f"[yellow]warning[/]: {warning}", soft_wrap=True)
    for name, meta in report["forecasters"].items():
        info = meta.get("info", {})
        for key in ("n_missing", "n_unknown", "n_unscored_state", "n_malformed"):
            if info.get(key):
                console.print(f"[yellow]{name}[/]: {key} = {info[key]}", soft_wrap=True)
        if info.get("n_lines") and info.get("n_unknown", 0) + info.get("n_unscored_state", 0) == info["n_lines"]:
            examples = "; ".join(info.get("unknown_examples") or [])
            console.print(
                f"[bold yellow]warning:[/] {escape(str(info.get('file', name)))}: none of its {info['n_lines']} forecasts "
                "matches a scored state of this fork study (is it for another run? its keys are parent_execution_id "
                f"and checkpoint_id{', e.g. ' + escape(examples) if examples else ''}); {name} is scored as 0.5 everywhere",
                soft_wrap=True,
                highlight=False,
            )
    target = out or (path if path.is_dir() else path.parent)
    console.print(f"wrote {target / VALUE_FILE}")
