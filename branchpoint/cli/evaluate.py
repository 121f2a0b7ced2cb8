"""`branchpoint evaluate`, `agreement` and `report`: judge traces, compare judges, write reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from branchpoint.cli.common import (
    FORK_SETTINGS_HELP,
    MIX_FORK_SETTINGS_HELP,
    app,
    console,
    friendly_errors,
    print_identical,
)
from branchpoint.defaults import DEFAULT_JUDGE, DEFAULT_LAMBDA, DEFAULT_MU
from branchpoint.traces import AGREEMENT_FILE, METRICS_FILE

#: How many disagreeing executions (decisive label) the agreement printout lists.
SHOWN_DISAGREEMENTS = 20
SPEC_FIRST = "Default: the run's spec.yaml, else {default}."


@app.command()
@friendly_errors
def evaluate(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A run directory or a .jsonl trace file (its spec.yaml is read first)."),
    judge: str = typer.Option(
        DEFAULT_JUDGE,
        "--judge",
        help="A registered judge: rule (offline default), given (labels in the traces), llm, llm-answer, a "
        "plug-in's, or package.module:attr. Default: the spec's evaluation.judge, else rule.",
    ),
    judge_arg: list[str] = typer.Option(
        [],
        "--judge-arg",
        help="A setting of the judge: KEY=VALUE with a YAML value (threshold=0.9, model.name=M; dotted keys "
        "nest), checked against the judge's settings; repeatable, applied after the spec's and the options below.",
    ),
    judge_model: str | None = typer.Option(None, "--judge-model", help="--judge llm: model name sent to the server."),
    judge_base_url: str | None = typer.Option(
        None, "--judge-base-url", help="--judge llm: OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."
    ),
    judge_api_key_env: str | None = typer.Option(
        None, "--judge-api-key-env", help="--judge llm: environment variable holding the API key (never the key)."
    ),
    judge_cache: Path | None = typer.Option(
        None,
        "--judge-cache",
        help="--judge llm: SQLite judgment cache (default: judge_cache.sqlite beside the traces).",
    ),
    judge_retries: int | None = typer.Option(
        None, "--judge-retries", min=0, help="--judge llm: retries of an unparseable reply (default 1)."
    ),
    judge_concurrency: int | None = typer.Option(
        None, "--judge-concurrency", min=1, help="--judge llm: requests at once (default 4)."
    ),
    evidence: bool | None = typer.Option(
        None,
        "--evidence/--no-evidence",
        help="--judge llm: also label retrieved documents (default: llm yes, llm-answer no).",
    ),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: beside the traces)."),
    lam: float | None = typer.Option(
        None, "--lam", help="TPC weight of input tokens (λ). " + SPEC_FIRST.format(default=f"{DEFAULT_LAMBDA:g}")
    ),
    mu: float | None = typer.Option(
        None, "--mu", help="TPC weight of a search call (μ). " + SPEC_FIRST.format(default=f"{DEFAULT_MU:g}")
    ),
    bootstrap: int = typer.Option(
        1000,
        "--bootstrap",
        min=0,
        help="Bootstrap resamples of questions (0: no intervals). " + SPEC_FIRST.format(default=1000),
    ),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the bootstrap (evaluation.bootstrap_seed). " + SPEC_FIRST.format(default=0)
    ),
    agreement: bool = typer.Option(
        False, "--agreement", help="Also print and write agreement.json: agreement and Cohen's κ between judges."
    ),
    also_judge: list[str] = typer.Option(
        [],
        "--also-judge",
        help="Another judge that takes no settings (rule, given, a plug-in's) run on the same traces in this "
        "call, e.g. --judge llm ... --also-judge rule --agreement; repeatable. The metrics describe --judge.",
    ),
    fork_settings: str | None = typer.Option(None, "--fork-settings", help=FORK_SETTINGS_HELP),
    mix_fork_settings: bool = typer.Option(False, "--mix-fork-settings", help=MIX_FORK_SETTINGS_HELP),
    cache: Path | None = typer.Option(
        None,
        "--cache",
        help="--judge llm: response cache DIR/responses.sqlite, shared across runs: a judge request sent before "
        "(the body as sent and the server's fingerprint) is answered from it. Default off (or the judge "
        "settings' model.response_cache).",
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Judge traces and write metrics.json (and judged.jsonl); prints the comparison table.

    The run's spec.yaml (beside the traces) is read first: its evaluation section gives the
    judge, the judge's settings, λ, μ and the bootstrap; options given here override it, and
    metrics.json's `settings` records which came from where.

    On forks.jsonl each fork setting is its own condition; branches of different fork settings
    within one condition (e.g. sampling as sent) are refused unless --fork-settings or
    --mix-fork-settings says which to read (recorded in metrics.json).

    Judgments accumulate in judged.jsonl, one set per judge, so evaluating again with another
    judge lets --agreement compare them.

    Example: branchpoint evaluate runs/quickstart --judge rule

    Example: branchpoint evaluate runs/quickstart --judge llm --judge-model Qwen/Qwen3-8B
    --judge-base-url http://127.0.0.1:8000/v1 --judge-arg max_tokens=256 --agreement
    """
    from branchpoint.cli.study_options import given_settings
    from branchpoint.evaluation import MetricsConfig, comparison_table
    from branchpoint.evaluation import evaluate as run_evaluation
    from branchpoint.evaluation.fork_settings import ForkSettingsChoice
    from branchpoint.evaluation.judge_options import judge_cache_path
    from branchpoint.evaluation.judges import JudgeRun, build_judge
    from branchpoint.experiments.study_settings import evaluation_settings
    from branchpoint.registry import settings_from_args

    cli = given_settings(
        ctx,
        {
            "judge": ("judge", judge),
            **({"lam": ("lam", lam)} if lam is not None else {}),  # None: not given (MetricsConfig's default)
            **({"mu": ("mu", mu)} if mu is not None else {}),
            "bootstrap": ("bootstrap", bootstrap),
            "seed": ("bootstrap_seed", seed),
        },
    )
    judge_options = dict(
        model=judge_model,
        base_url=judge_base_url,
        api_key_env=judge_api_key_env,
        retries=judge_retries,
        concurrency=judge_concurrency,
        evidence=evidence,
    )
    settings = evaluation_settings(path, cli, judge_options, settings_from_args(judge_arg, "--judge-arg"))
    v = settings.values
    judge_obj = build_judge(
        v["judge"],
        v["judge_settings"],
        JudgeRun(
            judge_cache_path(path, judge_cache),
            progress=not no_progress,
            response_cache=None if cache is None else str(cache.expanduser().resolve()),
        ),
        settings.search_paths,
    )
    cfg = MetricsConfig(lam=v["lam"], mu=v["mu"], bootstrap=v["bootstrap"], seed=v["bootstrap_seed"])
    choice = ForkSettingsChoice(fingerprint=fork_settings, mix=mix_fork_settings)
    also = [build_judge(name, None, JudgeRun(), settings.search_paths) for name in also_judge]
    metrics = run_evaluation(
        path,
        judge=judge_obj,
        out_dir=out,
        cfg=cfg,
        agreement=agreement,
        also=also,
        settings=settings.block(),
        fork_choice=choice,
    )
    console.print(settings.describe(), soft_wrap=True, highlight=False)
    console.print(comparison_table(metrics))
    print_identical(metrics.get("identical_conditions") or [])
    st = getattr(judge_obj, "stats", None)
    if st is not None:
        console.print(
            f"judge {judge_obj.name}: {st.items} items, {st.cached} from the cache, {st.calls} model calls "
            f"({st.input_tokens} input / {st.output_tokens} output tokens"
            + (f"; {st.response_cache_hits} answered by the response cache" if st.response_cache_hits else "")
            + f"), {st.unparseable} unparseable",
            soft_wrap=True,
        )
    if metrics.get("n_unparseable"):
        console.print(f"{metrics['n_unparseable']} executions left out: their judge output could not be parsed")
    target = out or (path if path.is_dir() else path.parent)
    if agreement:
        _print_agreement(metrics.get("judge_agreement") or {"judges": [metrics["judge"]], "pairs": []})
        console.print(f"wrote {target / AGREEMENT_FILE}")
    console.print(f"wrote {target / METRICS_FILE}")


def _print_agreement(agreed: dict[str, Any]) -> None:
    from rich.table import Table

    if not agreed["pairs"]:
        console.print(f"no two judges labelled the same items (judges: {', '.join(agreed['judges']) or 'none'})")
        return
    table = Table("judge A", "judge B", "kind", "n", "agreement", "Cohen's κ", "excluded", title="Judge agreement")
    for p in agreed["pairs"]:
        table.add_row(
            p["judge_a"],
            p["judge_b"],
            p["kind"],
            str(p["n"]),
            "—" if p["agreement"] is None else f"{100 * p['agreement']:.1f}%",
            "—" if p["kappa"] is None else f"{p['kappa']:.3f}",
            str(p["n_excluded"]),
        )
    console.print(table)
    for a in agreed.get("averages") or []:
        kappa = "—" if a["mean_kappa"] is None else f"{a['mean_kappa']:.3f}"
        console.print(
            f"average over {len(a['judges'])} judges ({a['kind']}): {100 * a['mean_agreement']:.1f}% agreement, "
            f"mean κ {kappa}",
            soft_wrap=True,
        )
    for d in agreed.get("vs_reference") or []:
        if d["n_disagree"]:
            console.print(
                f"{d['judge']} vs {agreed['reference']} ({d['kind']}): {d['n_disagree']} disagreements, "
                f"{d['other_yes_ref_no']} where only {d['judge']} gave the positive label, "
                f"{d['other_no_ref_yes']} where only {agreed['reference']} did",
                soft_wrap=True,
            )
    decisive = [d for d in agreed.get("disagreements") or [] if d["kind"] == "decisive"]
    for d in decisive[:SHOWN_DISAGREEMENTS]:
        console.print(
            f"disagree on {d['execution_id']}: {d['judge_a']} {d['label_a']}, {d['judge_b']} {d['label_b']}",
            soft_wrap=True,
            highlight=False,
        )
    if len(decisive) > SHOWN_DISAGREEMENTS:
        console.print(f"... {len(decisive) - SHOWN_DISAGREEMENTS} more (all in agreement.json: disagreements)")


@app.command()
@friendly_errors
def agreement(
    path: Path = typer.Argument(..., help="A run directory (its judged.jsonl) or a judged .jsonl file."),
    out: Path | None = typer.Option(None, "--out", help="Where to write agreement.json (default: beside the file)."),
    reference: str | None = typer.Option(
        None,
        "--reference",
        help='Judge whose labels count as right for the direction of disagreements (default: "human" if present).',
    ),
) -> None:
    """Pairwise agreement and Cohen's κ between every pair of judges in judged traces, per kind;
    the average over three or more judges; which way each judge disagrees with the reference.

    Example: branchpoint agreement runs/quickstart
    """
    from branchpoint.evaluation.agreement import agreement_json, judge_agreement
    from branchpoint.evaluation.evaluate import judged_path
    from branchpoint.provenance import collect, dump_block
    from branchpoint.traces import read_records

    source = judged_path(path)
    from branchpoint.errors import InputError

    records = read_records(source)
    if reference is not None and not any(j.judge == reference for r in records for j in r.judgments):
        raise InputError(f'{source}: no judgments by the reference judge "{reference}"')
    agreed = judge_agreement(records, reference=reference)
    _print_agreement(agreed)
    target = (out or source.parent) / AGREEMENT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(agreement_json({**agreed, "provenance": dump_block(collect("agreement"))}), encoding="utf-8")
    console.print(f"wrote {target}")


@app.command()
@friendly_errors
def report(
    run_dirs: list[Path] = typer.Argument(
        ...,
        help="One or more run directories with metrics.json (`branchpoint evaluate`) and/or value.json "
        "(`branchpoint value`).",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Output folder (default: the run directory; required for several)."
    ),
) -> None:
    """Write report.md and figures (PNG + SVG, data as CSV beside each; seed-study tables with
    bootstrap 95% intervals). Several runs: one report setting them side by side, and each run's
    own report under OUT/<run>/.

    Example: branchpoint report runs/quickstart --out reports/quickstart

    Example: branchpoint report runs/corpora runs/mitigations --out reports/both
    """
    from branchpoint.errors import InputError
    from branchpoint.evaluation.report import write_report

    if len(run_dirs) > 1:
        from branchpoint.evaluation.combined import write_combined_report

        if out is None:
            raise InputError("report: several run directories need --out DIR for the combined report")
        path, figures = write_combined_report(run_dirs, out)
    else:
        path, figures = write_report(run_dirs[0], out)
    made = [p.name for p in figures.values() if p is not None]
    skipped = [k for k, p in figures.items() if p is None]
    noun = "figure" if len(made) == 1 else "figures"
    console.print(f"wrote {path} and {len(made)} {noun} ({', '.join(made) or 'none'})", soft_wrap=True)
    if skipped:
        console.print(f"skipped figures without data: {', '.join(skipped)}", soft_wrap=True)
