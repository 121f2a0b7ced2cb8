"""What every command module of `branchpoint …` shares: the root app, the consoles, the error
handler (bad input prints one clear line and exits 2) and the small option parsers."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from branchpoint.diskspace import is_no_space, no_space
from branchpoint.errors import BranchpointError, InputError
from branchpoint.provenance import command_scope
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

console = Console()
if not console.is_terminal:  # logs and pipes: wide enough that tables are not squeezed to 80
    console = Console(width=max(console.width, 120))
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(fn: F) -> F:
    """Print input and server errors, and a full disk (`no space left on DEVICE (path)`), as one
    red line and exit with code 2 (no traceback); run the command in its provenance scope
    (`branchpoint.provenance.command_scope`), so what it writes names the command and the
    components it used."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            name = command_name(fn.__name__)
            with command_scope(name, command_argv(name)):
                return fn(*args, **kwargs)
        except (BranchpointError, TraceError) as exc:
            err_console.print(
                f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False, markup=True, soft_wrap=True
            )
            raise typer.Exit(code=2) from None
        except (OSError, sqlite3.DatabaseError) as exc:
            if is_no_space(exc, getattr(exc, "filename", None)):
                message = str(no_space(getattr(exc, "filename", None) or Path.cwd()))
            elif isinstance(exc, sqlite3.DatabaseError):  # damage found mid-run, past the checks made before it
                message = (
                    f"a SQLite database of the run is damaged ({exc}); `branchpoint runs verify RUN_DIR` tells "
                    "which: the caches can be deleted and rebuilt, checkpoints.sqlite cannot"
                )
            else:
                raise
            err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


def _click_context() -> Any:
    """The context of the command being run: typer's own copy of click (typer 0.2x vendors it
    as `typer._click`) or click's; None outside a command."""
    import importlib

    for module in ("typer._click.globals", "click"):
        try:
            found = importlib.import_module(module).get_current_context(silent=True)
        except (ImportError, AttributeError):
            continue
        if found is not None:
            return found
    return None


def command_name(fallback: str) -> str:
    """The user-facing name of the command being run (`branchpoint runs show`), from its
    context; `branchpoint FALLBACK` outside one."""
    ctx = _click_context()
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:  # the root's own name is how it was started
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(["branchpoint", *(names or [fallback])])


def command_argv(name: str) -> list[str]:
    """The command line of the command being run: `sys.argv` when it is this command's (the
    console script, `python -m branchpoint.cli`); else (the app called from Python, a test's
    runner) the command's words and the parameters given on its command line, as typed."""
    import sys

    words = name.split()[1:]
    if sys.argv[1 : 1 + len(words)] == words:
        return list(sys.argv)
    ctx = _click_context()
    argv = ["branchpoint", *words]
    if ctx is None:
        return argv
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if getattr(source, "name", None) != "COMMANDLINE":
            continue
        value = ctx.params.get(param.name)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if param.param_type_name == "argument":
            argv += [str(v) for v in values]
        elif getattr(param, "is_flag", False):
            argv.append(param.opts[0] if value else (param.secondary_opts or param.opts)[0])
        else:
            argv += [x for v in values for x in (param.opts[0], str(v))]
    return argv


def print_summary(summary: Any) -> None:
    """One line on what a run did, then loud warnings about conditions that sent identical requests."""
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(summary.statuses.items())) or "none run"
    console.print(
        f"[bold]{summary.run_dir}[/]: {summary.planned} planned, {summary.skipped} already recorded, "
        f"{summary.ran} run ({statuses}) in {summary.wall_s:.1f} s",
        soft_wrap=True,
    )
    print_cache_line(summary)
    print_identical(_run_identical(summary.run_dir))


def print_cache_line(summary: Any) -> None:
    """One line on the response cache (`--cache`): the model calls it answered, of those it was
    asked; nothing when no cache was asked."""
    counts = getattr(summary, "response_cache", None) or {}
    hits, misses = counts.get("hits", 0), counts.get("misses", 0)
    if hits or misses:
        console.print(
            f"response cache: {hits} of {hits + misses} model calls answered from the cache, {misses} sent",
            soft_wrap=True,
        )


def _run_identical(run_dir: Path) -> list[dict[str, Any]]:
    """The groups of conditions of a run directory that sent identical requests."""
    from branchpoint.evaluation.sameness import identical_conditions
    from branchpoint.experiments.store import RunStore

    return identical_conditions(RunStore(run_dir).records())


def print_identical(groups: list[dict[str, Any]]) -> None:
    """Say loudly which sweep conditions sent the model identical requests."""
    from branchpoint.evaluation.sameness import identical_warnings

    for line in identical_warnings(groups):
        err_console.print(f"[bold red]warning:[/] [bold]{escape(line)}[/]", soft_wrap=True)


def warn_identical_before(spec: Any, strict: bool = False) -> None:
    """Before a sweep runs: say loudly which of its conditions would send the model identical
    requests (`experiments.prerun`: built and fingerprinted without calling the model); with
    `strict`, refuse the run instead (InputError, nothing written). A spec without a sweep is
    not probed."""
    if len(spec.sweep) == 0:
        return
    from branchpoint.evaluation.sameness import before_run_warnings
    from branchpoint.experiments.prerun import probe_conditions

    lines = before_run_warnings(probe_conditions(spec).groups)
    if strict and lines:
        raise InputError("--strict-conditions: " + "\n".join(lines))
    for line in lines:
        err_console.print(f"[bold red]warning:[/] [bold]{escape(line)}[/]", soft_wrap=True)


STRICT_CONDITIONS_HELP = (
    "Refuse a sweep whose conditions would send the model identical requests (found before the run from the "
    "first requests of a few questions); default: a warning."
)


CACHE_HELP = (
    "Response cache: DIR/responses.sqlite (shared by runs, forks and processes) answers every model request "
    "sent before (the body as sent, seed included, and the server's fingerprint); default off "
    "(or the spec's model.response_cache)."
)
NO_CACHE_HELP = "No response cache, even where the run's spec names one (model.response_cache)."


def cache_override(cache: Path | None, no_cache: bool) -> str | Literal[False] | None:
    """What `--cache DIR` / `--no-cache` ask of the spec's `model.response_cache`: the folder
    (absolute), False (off), or None (as the spec has it)."""
    if cache is not None and no_cache:
        raise InputError("--cache and --no-cache: give one of them")
    if no_cache:
        return False
    return None if cache is None else str(Path(cache).expanduser().resolve())


SET_HELP = (
    "Override a spec setting: KEY=VALUE, a dotted path with a YAML value (agent.search_cap=3, "
    "model='{name: m, base_url: ...}', sweep.agent.search_cap='[0, 2]'); repeatable."
)
SAMPLE_HELP = "A,U: a balanced seeded sample of A answerable and U unanswerable questions (questions.sample)."
FORK_SETTINGS_HELP = (
    "Read only the branches of this fork settings fingerprint (or a unique start of it; the refusal "
    "of a mix lists them): branches of other settings are left out and counted."
)
#: The TPC weights `--lam` / `--mu` default to, as their help shows them. They are defined once,
#: as `evaluation.cost.DEFAULT_LAMBDA` / `DEFAULT_MU`: importing that here would load the whole
#: evaluation package at every start of the CLI, so the options default to None ("not given")
#: and the commands take `MetricsConfig`'s defaults; tests/evaluation/test_tpc_weights.py checks
#: this text against the definition.
TPC_DEFAULTS = {"lam": "0.25", "mu": "500"}
MIX_FORK_SETTINGS_HELP = "Pool branches of different fork settings (refused by default; recorded in the output file)."


def sample_counts(sample: str) -> tuple[int, int]:
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
    a, u = sample_counts(sample)
    return [f"questions.sample={{answerable: {a}, unanswerable: {u}}}"]


def load_spec_with(spec: Path, sets: list[str], sample: str | None, limit: int | None = None) -> Any:
    """The spec with --set / --sample / --limit applied: the resolved spec that a run stores."""
    from branchpoint.experiments.spec import load_spec

    limit_set = [f"questions.limit={limit}"] if limit is not None else []
    return load_spec(spec, [*sets, *_sample_override(sample), *limit_set])


def exit_if_incomplete(incomplete: int, what: str, resume: list[str] | None, checkpoints: str | None) -> None:
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
        f"scored); to resume them: {escape(command)}{hint}",
        soft_wrap=True,
        highlight=False,
    )
    raise typer.Exit(code=3)


def csv_list(value: str) -> list[str]:
    """A comma-separated option as its non-empty, stripped items."""
    return [v.strip() for v in value.split(",") if v.strip()]


def index_params(values: list[str]) -> dict[str, Any]:
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
