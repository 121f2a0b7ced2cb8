"""`evaluate`: judge a run's traces, compute metrics, write metrics.json and judged.jsonl.

Judgments accumulate: when the output folder already has a judged.jsonl, the judgments other
judges gave there are carried over (for executions whose status and final answer are unchanged),
so running `evaluate` once per judge leaves every judge's labels side by side in judged.jsonl,
ready for `judge_agreement`. metrics.json always describes the judge of the latest call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.errors import InputError
from branchpoint.evaluation.agreement import agreement_json, judge_agreement
from branchpoint.evaluation.fork_settings import ForkSettingsChoice, choose
from branchpoint.evaluation.frontier import spec_sweep
from branchpoint.evaluation.gold_lists import gold_list_warnings
from branchpoint.evaluation.judges import BatchJudge, judge_records
from branchpoint.evaluation.metrics import MetricsConfig, compute_metrics, metrics_json
from branchpoint.evaluation.over_search import read_minimal_search
from branchpoint.evaluation.sameness import identical_conditions
from branchpoint.models.server_info import describe_client
from branchpoint.provenance import ModelServer, collect, dump_block
from branchpoint.traces import (
    AGREEMENT_FILE,
    EXECUTIONS_FILE,
    JUDGED_FILE,
    METRICS_FILE,
    MINIMAL_SEARCH_FILE,
    ExecutionRecord,
    dump_record,
    read_records,
    write_files_atomically,
)


def trace_path(path: Path) -> Path:
    """The trace file of a run directory (RUN_DIR/executions.jsonl) or the file itself."""
    path = Path(path)
    if path.is_dir():
        traces = path / EXECUTIONS_FILE
        if not traces.is_file():
            raise InputError(f"{traces}: not found (expected a run directory with {EXECUTIONS_FILE})")
        return traces
    if not path.is_file():
        raise InputError(f"{path}: not found (expected a run directory or a .jsonl trace file)")
    return path


def judged_path(path: Path) -> Path:
    """The judged traces of a run directory (RUN_DIR/judged.jsonl) or the file itself."""
    path = Path(path)
    if path.is_dir():
        judged = path / JUDGED_FILE
        if not judged.is_file():
            raise InputError(f"{judged}: not found (run `branchpoint evaluate {path}` first)")
        return judged
    if not path.is_file():
        raise InputError(f"{path}: not found (expected a run directory or a judged .jsonl file)")
    return path


def carry_judgments(records: list[ExecutionRecord], previous: list[ExecutionRecord]) -> list[ExecutionRecord]:
    """Copies of `records` with the judgments of judges that `previous` (an earlier judged.jsonl)
    has and the record lacks, where the execution's status and final answer are unchanged.

    Carried judgments go before the record's own, so labels that came with the traces stay the
    last of their kind (the ones the `given` judge takes).
    """
    earlier = {r.execution_id: r for r in previous}
    out = []
    for record in records:
        old = earlier.get(record.execution_id)
        if old is None or (old.status, old.final_answer) != (record.status, record.final_answer):
            out.append(record)
            continue
        own = {j.judge for j in record.judgments}
        copy = record.model_copy(deep=True)
        copy.judgments = [j.model_copy() for j in old.judgments if j.judge not in own] + copy.judgments
        out.append(copy)
    return out


def minimal_rows(path: Path, records: list[ExecutionRecord]) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The rows of a minimal_search.jsonl that describe executions among `records` (None when
    there is no such file), and why none are used when the file describes other executions (a
    forks.jsonl beside the run's minimal_search.jsonl: its rows are the run's executions)."""
    if not path.is_file():
        return None, None
    rows = read_minimal_search(path)
    ids = {r.execution_id for r in records}
    mine = [row for row in rows if row.get("execution_id") in ids]
    if rows and not mine:
        return None, (
            f"{path.name} beside the traces describes other executions (the run's own: "
            f"`branchpoint evaluate {path.parent}` reports their over-search)"
        )
    return mine, None


def judge_servers(judge: str | BatchJudge) -> list[ModelServer]:
    """The model server a judge object talks to (an LLM judge's), for the provenance block."""
    described = describe_client(getattr(judge, "client", None))
    return [described] if described is not None else []


def evaluate(
    path: Path,
    judge: str | BatchJudge = DEFAULT_JUDGE,
    out_dir: Path | None = None,
    cfg: MetricsConfig = MetricsConfig(),
    *,
    agreement: bool = False,
    also: Sequence[str | BatchJudge] = (),
    settings: Mapping[str, Any] | None = None,
    fork_choice: ForkSettingsChoice = ForkSettingsChoice(),
) -> dict[str, Any]:
    """Judge the traces at `path`, write metrics.json and judged.jsonl to `out_dir`, return metrics.

    `settings` (the settings the command resolved and where each came from, see
    `experiments.study_settings`) is recorded in metrics.json under `settings`.

    `path` is a run directory (its executions.jsonl is read) or a trace file; `out_dir`
    defaults to the run directory or the trace file's folder. `judge` is a registered judge name
    (`rule`, `given`) or a judge object (`LLMJudge`). A `minimal_search.jsonl` beside the traces
    feeds the over-search section. When two or more judges have labelled the same items, the
    metrics include `judge_agreement`; `agreement=True` also writes agreement.json. `also` are
    more judges run on the same traces in the same call (e.g. `rule` beside an LLM judge), so
    `judge_agreement` compares them and lists where they disagree. Both files
    carry a `provenance` block (`branchpoint.provenance`). Nothing is written unless reading,
    judging and scoring all succeeded.

    Fork branches of one condition must share one fork settings fingerprint (conditions keep the
    action, budget and sampling plan apart already): a mix within a condition is refused unless
    `fork_choice` picks one fingerprint or allows the mix; metrics.json's `fork_settings` says
    what was read.

    Questions whose gold list looks like an alias dump from another data set are logged and
    listed under `gold_list_warnings` (`evaluation.gold_lists`); their judgments are kept.
    """
    traces = trace_path(Path(path))
    records = read_records(traces)
    if not records:
        raise InputError(f"{traces}: no execution records to evaluate")
    out = Path(out_dir) if out_dir is not None else traces.parent
    if (out / JUDGED_FILE).is_file():
        records = carry_judgments(records, read_records(out / JUDGED_FILE))
    records, fork_summary = choose(records, fork_choice, str(traces), group=lambda r: r.condition)
    minimal, elsewhere = minimal_rows(traces.parent / MINIMAL_SEARCH_FILE, records)
    for other in also:  # judged first, so `judge` stays the one the metrics describe
        records = judge_records(records, other)
    judged = judge_records(records, judge)
    judge_name = judge if isinstance(judge, str) else judge.name
    metrics = compute_metrics(judged, judge_name, cfg, minimal_search=minimal, sweep=spec_sweep(traces.parent))
    if elsewhere:
        metrics["over_search"]["reason"] = elsewhere
    if fork_summary["fingerprints"]:
        metrics["fork_settings"] = fork_summary
    metrics["identical_conditions"] = identical_conditions(records)  # a sweep axis that changed nothing
    if settings is not None:
        metrics["settings"] = dict(settings)
    warnings = gold_list_warnings(records)  # logged per question
    if warnings:
        metrics["gold_list_warnings"] = [w.model_dump() for w in warnings]
    agreed = judge_agreement(judged)
    if agreed["pairs"]:
        metrics["judge_agreement"] = agreed
    block = dump_block(collect("evaluate", model_servers=judge_servers(judge)))
    metrics["provenance"] = block
    files = {
        out / METRICS_FILE: metrics_json(metrics),
        out / JUDGED_FILE: "".join(dump_record(r) + "\n" for r in judged),
    }
    if agreement:
        files[out / AGREEMENT_FILE] = agreement_json({**agreed, "provenance": block})
    write_files_atomically(files)
    return metrics
