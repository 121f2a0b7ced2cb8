"""branchpoint traces -> inspect_ai eval logs, built from inspect_ai's own log classes.

`branchpoint export inspect RUN --out DIR` writes one `.eval` log per condition of a run (a run
folder: its judged traces when `evaluate` has run, else its executions; or a traces file), so
`inspect view DIR` shows a branchpoint study and `inspect_ai.log.read_eval_log` reads it:

- the log: task = the run's name (spec `name`, else the run id), `task_args` = the condition,
  model = the condition's `model` (an imported log's) else `<provider>/<name>` of the run's spec;
  epochs = the most repeats + 1; results = per scorer its accuracy (share of C);
- a sample per record: `id` = question id, `epoch` = repeat + 1, `input` = the question,
  `target` = the gold answers, metadata = answerable, category, stratum, support group,
  execution id, status, search calls;
- messages: the question as the user's; each model step as the assistant's (a search decision
  as a `search` tool call with its query, an answer as its text); each search step as the tool's
  reply (the retrieved passages' text, one per line); other tool steps likewise;
- events: a `ModelEvent` per model step (its usage, latency as working time, the messages before
  it as input, its step kind in the event's metadata `branchpoint_step_kind`) and a `ToolEvent` per search or tool step, so `branchpoint import inspect` of the
  export gives back the run's steps, queries and token totals;
- `output`: the final answer with the record's token totals; `model_usage` the same totals;
  `total_time` = `wall_s`; an `incomplete` record's error as the sample's error;
- scores: one scorer per judge of the records (`given` included), its value C / I / N from the
  label of the kind that decides correctness (answer: CORRECT / INCORRECT / NOT_ATTEMPTED;
  abstention, unanswerable questions: ABSTAINED as C, ANSWERED as I), the inverse of the
  importer's mapping, `answer` the final answer, `explanation` the judgment's raw text.

Every log is built (and validated by inspect_ai's pydantic models) before any is written, and
the files are written in a temporary folder beside DIR and then moved in: nothing partial.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.traces import EXECUTIONS_FILE, JUDGED_FILE, ExecutionRecord, Judgment, Step, read_records

#: The event metadata key that keeps a model step's kind (decide, answer, forced_answer).
STEP_KIND_KEY = "branchpoint_step_kind"
#: Step kinds that are model calls.
MODEL_STEPS = frozenset({"decide", "answer", "forced_answer"})
#: branchpoint finish reasons -> inspect_ai stop reasons.
STOP_REASONS = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls"}
#: Labels of the kind that decides correctness -> inspect_ai score values.
SCORE_VALUES = {"CORRECT": "C", "INCORRECT": "I", "NOT_ATTEMPTED": "N", "ABSTAINED": "C", "ANSWERED": "I"}


def _inspect() -> Any:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise InputError(
            "exporting inspect_ai logs needs the package inspect_ai: "
            "pip install 'branchpoint[inspect]' (inspect_ai==0.3.285)"
        ) from None


def run_traces(run: Path) -> tuple[list[ExecutionRecord], dict[str, Any]]:
    """The records to export (a run folder's judged traces, else its executions; or a traces
    file) and the run's spec (empty for a bare traces file)."""
    run = Path(run)
    if run.is_dir():
        path = run / JUDGED_FILE if (run / JUDGED_FILE).is_file() else run / EXECUTIONS_FILE
        if not path.is_file():
            raise InputError(f"{run}: no {EXECUTIONS_FILE} (expected a run folder or a traces .jsonl file)")
    elif run.is_file():
        path = run
    else:
        raise InputError(f"{run}: not found (expected a run folder or a traces .jsonl file)")
    spec: dict[str, Any] = {}
    spec_file = path.parent / "spec.yaml"
    if spec_file.is_file():
        import yaml

        loaded = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
        spec = loaded if isinstance(loaded, dict) else {}
    records = read_records(path)
    if not records:
        raise InputError(f"{path}: no records to export")
    return records, spec


def _model_name(record: ExecutionRecord, spec: dict[str, Any]) -> str:
    name = record.condition.get("model")
    if isinstance(name, str):
        return name
    found = spec.get("model")
    model: dict[str, Any] = found if isinstance(found, dict) else {}
    return f"{model.get('provider', 'embedded')}/{model.get('name', 'gemma-3-270m')}"


def _task_name(record: ExecutionRecord, spec: dict[str, Any]) -> str:
    name = record.condition.get("task")
    if isinstance(name, str):
        return name
    return str(spec.get("name") or record.run_id)


def _tool_text(step: Step) -> str:
    if step.kind == "search":
        return "\n".join(doc.text for doc in step.retrieved)
    return step.text or ""


def _score(record: ExecutionRecord, judgments: list[Judgment]) -> Any:
    """The inspect Score of one judge's judgments of a record (the kind that decides it)."""
    from inspect_ai.scorer import Score

    kind = "answer" if record.answerable else "abstention"
    decisive = [j for j in judgments if j.kind == kind]
    if not decisive:
        return None
    judgment = decisive[-1]
    return Score(
        value=SCORE_VALUES.get(judgment.label.upper(), "I"),
        answer=record.final_answer,
        explanation=judgment.raw,
        metadata={"label": judgment.label, "kind": kind},
    )


def _model_output(model: str, text: str, calls: list[Any], usage: Any, finish: str | None) -> Any:
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput

    message = ChatMessageAssistant(content=text, tool_calls=calls or None, model=model, source="generate")
    stop = "tool_calls" if calls else STOP_REASONS.get(finish or "stop", "unknown")
    return ModelOutput(model=model, choices=[ChatCompletionChoice(message=message, stop_reason=stop)], usage=usage)


def _usage(input_tokens: int, output_tokens: int, reasoning: int | None) -> Any:
    from inspect_ai.model import ModelUsage

    return ModelUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        reasoning_tokens=reasoning,
    )


def _conversation(record: ExecutionRecord, model: str) -> tuple[list[Any], list[Any]]:
    """The sample's messages and events from the record's steps (see the module docstring)."""
    from inspect_ai.event import ModelEvent, ToolEvent
    from inspect_ai.model import ChatMessageTool, ChatMessageUser, GenerateConfig
    from inspect_ai.tool import ToolCall, ToolInfo, ToolParams
    from inspect_ai.util import JSONSchema

    search_tool = ToolInfo(
        name="search",
        description="Search the corpus.",
        parameters=ToolParams(properties={"query": JSONSchema(type="string")}, required=["query"]),
    )
    messages: list[Any] = [ChatMessageUser(content=record.question)]
    events: list[Any] = []
    steps = record.steps
    pending: dict[int, ToolCall] = {}  # index of a tool step -> the call that asked for it
    for i, step in enumerate(steps):
        if step.kind in MODEL_STEPS:
            following = steps[i + 1] if i + 1 < len(steps) else None
            calls: list[Any] = []
            if following is not None and following.kind not in MODEL_STEPS:
                function = "search" if following.kind == "search" else str(following.action or following.kind)
                arguments = (
                    {"query": following.query or ""}
                    if following.kind == "search"
                    else dict((following.model_extra or {}).get("tool_arguments") or {})
                )
                pending[i + 1] = ToolCall(id=f"call_{i + 1}", function=function, arguments=arguments)
                calls.append(pending[i + 1])
            text = step.text or ""
            if not calls and step.kind != "decide" and i == len(steps) - 1 and record.final_answer is not None:
                text = record.final_answer
            usage = step.usage
            output = _model_output(
                model,
                text,
                calls,
                _usage(usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) if usage else None,
                step.finish_reason,
            )
            events.append(
                ModelEvent(
                    model=model,
                    input=list(messages),
                    tools=[search_tool],
                    tool_choice="auto",
                    config=GenerateConfig(),
                    output=output,
                    working_time=step.latency_s,
                    metadata={STEP_KIND_KEY: step.kind},
                )
            )
            messages.append(output.message)
        else:
            call = pending.get(i) or ToolCall(
                id=f"call_{i}",
                function="search" if step.kind == "search" else str(step.action or step.kind),
                arguments={"query": step.query or ""} if step.kind == "search" else {},
            )
            result = _tool_text(step)
            events.append(
                ToolEvent(
                    id=call.id,
                    function=call.function,
                    arguments=call.arguments,
                    result=result,
                    working_time=step.latency_s,
                )
            )
            messages.append(ChatMessageTool(content=result, tool_call_id=call.id, function=call.function))
    return messages, events


def sample_of(record: ExecutionRecord, model: str, judges: Iterable[str]) -> Any:
    """One record as an inspect_ai EvalSample (see the module docstring)."""
    from inspect_ai._util.error import EvalError
    from inspect_ai.log import EvalSample

    messages, events = _conversation(record, model)
    usage = _usage(record.input_tokens, record.output_tokens, record.reasoning_tokens or None)
    last = next((s for s in reversed(record.steps) if s.kind in MODEL_STEPS), None)
    output = _model_output(model, record.final_answer or "", [], usage, last.finish_reason if last else None)
    scores = {}
    for judge in judges:
        score = _score(record, [j for j in record.judgments if j.judge == judge])
        if score is not None:
            scores[judge] = score
    metadata = {
        "answerable": record.answerable,
        "category": record.category,
        "stratum": record.stratum,
        "support_group": record.support_group,
        "execution_id": record.execution_id,
        "status": record.status,
        "search_calls": record.search_calls,
    }
    error = None
    if record.status == "incomplete":
        error = EvalError(message=record.error or "incomplete", traceback="", traceback_ansi="")
    return EvalSample(
        id=record.question_id,
        epoch=record.repeat + 1,
        input=record.question,
        target=list(record.gold_answers),
        messages=messages,
        output=output,
        scores=scores or None,
        metadata={k: v for k, v in metadata.items() if v is not None},
        events=events,
        model_usage={model: usage},
        total_time=record.wall_s,
        working_time=record.wall_s,
        error=error,
    )


def _group_key(record: ExecutionRecord) -> str:
    return json.dumps(record.condition, sort_keys=True, default=str)


def eval_logs(records: list[ExecutionRecord], spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """(file name, EvalLog) per condition of the records, in first-seen order."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    groups: dict[str, list[ExecutionRecord]] = {}
    for record in records:
        groups.setdefault(_group_key(record), []).append(record)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    logs = []
    for key, group in groups.items():
        seen: dict[tuple[str, int], str] = {}
        for record in group:
            twin = seen.setdefault((record.question_id, record.repeat), record.execution_id)
            if twin != record.execution_id:
                raise InputError(
                    f"executions {twin} and {record.execution_id}: the same question {record.question_id!r} and "
                    f"repeat {record.repeat} under one condition (inspect_ai keys samples by id and epoch); "
                    "export a run's executions, not its fork branches"
                )
        first = group[0]
        model, task = _model_name(first, spec), _task_name(first, spec)
        judges = list(dict.fromkeys(j.judge for r in group for j in r.judgments if j.kind != "evidence"))
        samples = [sample_of(r, model, judges) for r in group]
        digest = hashlib.sha256(f"{first.run_id}|{key}".encode()).hexdigest()[:22]
        scores = []
        for judge in judges:
            values = [s.scores[judge].value for s in samples if s.scores and judge in s.scores]
            accuracy = sum(v == "C" for v in values) / len(values) if values else 0.0
            metrics = {"accuracy": EvalMetric(name="accuracy", value=accuracy)}
            scores.append(EvalScore(name=judge, scorer=judge, scored_samples=len(values), metrics=metrics))
        usage = _usage(
            sum(r.input_tokens for r in group),
            sum(r.output_tokens for r in group),
            sum(r.reasoning_tokens for r in group) or None,
        )
        eval_spec = EvalSpec(
            created=now,
            task=task,
            task_id=digest,
            eval_id=digest,
            run_id=first.run_id,
            task_args=dict(first.condition),
            dataset=EvalDataset(name=task, samples=len({r.question_id for r in group})),
            model=model,
            config=EvalConfig(epochs=max(r.repeat for r in group) + 1),
            metadata={"exported_by": "branchpoint export inspect"},
        )
        log = EvalLog(
            status="success",
            eval=eval_spec,
            results=EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=scores),
            stats=EvalStats(started_at=now, completed_at=now, model_usage={model: usage}),
            samples=samples,
        )
        slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in task)[:60]
        logs.append((f"{slug}_{digest}.eval", log))
    return logs


def export_inspect(run: Path, out_dir: Path) -> list[Path]:
    """Write the run's traces as inspect_ai logs into `out_dir` (see the module docstring)."""
    _inspect()
    from inspect_ai.log import write_eval_log

    records, spec = run_traces(run)
    logs = eval_logs(records, spec)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a folder")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}-export-") as tmp:
        for name, log in logs:
            write_eval_log(log, str(Path(tmp) / name))
        out_dir.mkdir(exist_ok=True)
        for name, _ in logs:
            os.replace(Path(tmp) / name, out_dir / name)
            written.append(out_dir / name)
    return written
