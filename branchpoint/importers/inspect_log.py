"""inspect_ai eval logs -> branchpoint traces, read with inspect_ai's own reader.

`pip install 'branchpoint[inspect]'` (inspect_ai is optional). One `ExecutionRecord` per sample
and epoch of `read_eval_log(path)`:

- ids: `execution_id(run id, condition, sample id, repeat = epoch - 1)`; `run_id` is the eval's
  run id; `condition` holds the eval's `task` and `model`;
- question: the sample's input (its user messages' text when it is a message list); gold answers
  from `target`; `answerable`, `category`, `stratum`, `support_group` from the sample's metadata
  when present (default answerable);
- steps, from the sample's events in order: a `ModelEvent` is a `decide` step (an `answer` step
  when it is the last model call and asks for no tool) with its usage (input, output, reasoning
  tokens) and working time; a `ToolEvent` of a search tool (`search_tools`, default search,
  web_search, retrieve, wikipedia_search) is a `search` step with its query (the `query`
  argument, else the first string argument) and the tool's result as one retrieved document;
  other tool calls are kept as steps of kind `tool` (usage none);
- totals: search calls, tokens summed over the model calls, `wall_s` = the sample's total time;
- status: `incomplete` (with the error) for a sample that errored, `length` when it hit a token
  limit, else `ok`; `final_answer` is the output's completion;
- judgments: each score as judge `inspect:<scorer>`, kind `answer` (or `abstention` for an
  unanswerable sample), label CORRECT / INCORRECT / NOT_ATTEMPTED from inspect's C / I / N (P,
  partial, counts as INCORRECT; numbers >= 1 as CORRECT), `raw` keeping the value. Score them
  with `branchpoint evaluate TRACES.jsonl --judge given`, or any other judge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.traces import ExecutionRecord, Judgment, RetrievedDoc, Step, Usage, execution_id

SEARCH_TOOLS = frozenset({"search", "web_search", "retrieve", "wikipedia_search"})
_LABELS = {"C": "CORRECT", "I": "INCORRECT", "N": "NOT_ATTEMPTED", "P": "INCORRECT"}


def _inspect() -> Any:
    try:
        import inspect_ai.log as log
    except ImportError:
        raise InputError(
            "importing inspect_ai logs needs the package inspect_ai: "
            "pip install 'branchpoint[inspect]' (inspect_ai==0.3.285)"
        ) from None
    return log


def _text(value: Any) -> str:
    """Text of an input: a string, or the user messages' text of a message list."""
    if isinstance(value, str):
        return value
    parts = [getattr(m, "text", "") for m in value or [] if getattr(m, "role", "user") == "user"]
    return "\n".join(p for p in parts if p)


def _targets(target: Any) -> list[str]:
    if target is None:
        return []
    return [target] if isinstance(target, str) else [str(t) for t in target]


def _label(value: Any) -> str:
    if isinstance(value, str):
        return _LABELS.get(value.upper(), "INCORRECT")
    if isinstance(value, bool):
        return "CORRECT" if value else "INCORRECT"
    if isinstance(value, (int, float)):
        return "CORRECT" if value >= 1 else "INCORRECT"
    return "INCORRECT"


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    return Usage(
        input_tokens=int(usage.input_tokens or 0),
        output_tokens=int(usage.output_tokens or 0),
        reasoning_tokens=usage.reasoning_tokens,
    )


def _query(arguments: dict[str, Any]) -> str | None:
    if isinstance(arguments.get("query"), str):
        return arguments["query"]
    return next((v for v in arguments.values() if isinstance(v, str)), None)


def _steps(events: Iterable[Any], search_tools: frozenset[str]) -> list[Step]:
    steps: list[Step] = []
    events = list(events)
    model_events = [e for e in events if getattr(e, "event", None) == "model"]
    last_model = model_events[-1] if model_events else None
    for event in events:
        kind = getattr(event, "event", None)
        if kind == "model":
            output = event.output
            message = output.message if output is not None and output.choices else None
            calls = list(getattr(message, "tool_calls", None) or [])
            answering = event is last_model and not calls
            steps.append(
                Step(
                    kind="answer" if answering else "decide",
                    usage=_usage(getattr(output, "usage", None)),
                    latency_s=float(getattr(event, "working_time", None) or 0.0),
                    action="answer"
                    if not calls
                    else ("search" if calls[0].function in search_tools else calls[0].function),
                    text=output.completion if output is not None else None,
                    finish_reason=output.stop_reason if output is not None else None,
                )
            )
        elif kind == "tool":
            arguments = dict(event.arguments or {})
            result = event.result if isinstance(event.result, str) else str(event.result or "")
            if event.function in search_tools:
                doc = RetrievedDoc(
                    doc_id="h-" + hashlib.sha256(result.encode("utf-8")).hexdigest()[:16],
                    score=0.0,
                    text=result,
                    source=event.function,
                )
                steps.append(
                    Step(
                        kind="search",
                        query=_query(arguments),
                        source=event.function,
                        retrieved=[doc] if result else [],
                        latency_s=float(getattr(event, "working_time", None) or 0.0),
                    )
                )
            else:
                steps.append(
                    Step(
                        kind="tool",
                        action=event.function,
                        text=result,
                        latency_s=float(getattr(event, "working_time", None) or 0.0),
                        tool_arguments=arguments,
                    )
                )
    return steps


def sample_record(log: Any, sample: Any, search_tools: frozenset[str] = SEARCH_TOOLS) -> ExecutionRecord:
    """One inspect_ai sample (one epoch) as an ExecutionRecord (see the module docstring)."""
    meta = dict(sample.metadata or {})
    answerable = bool(meta.get("answerable", True))
    condition = {"task": log.eval.task, "model": log.eval.model}
    run_id = log.eval.run_id or log.eval.eval_id
    steps = _steps(sample.events or [], search_tools)
    model_usage = [s.usage for s in steps if s.kind in ("decide", "answer") and s.usage is not None]
    status, error = "ok", None
    if sample.error is not None:
        status, error = "incomplete", str(getattr(sample.error, "message", sample.error))
    elif sample.limit is not None and "token" in str(getattr(sample.limit, "type", "")):
        status = "length"
    judgments = [
        Judgment(
            judge=f"inspect:{name}",
            kind="answer" if answerable else "abstention",
            label=_label(score.value)
            if answerable
            else ("ABSTAINED" if _label(score.value) == "CORRECT" else "ANSWERED"),
            raw=str(score.value),
        )
        for name, score in (sample.scores or {}).items()
    ]
    return ExecutionRecord(
        execution_id=execution_id(run_id, condition, str(sample.id), repeat=int(sample.epoch or 1) - 1),
        run_id=run_id,
        condition=condition,
        question_id=str(sample.id),
        question=_text(sample.input),
        answerable=answerable,
        category=meta.get("category"),
        gold_answers=_targets(sample.target),
        stratum=meta.get("stratum"),
        support_group=meta.get("support_group"),
        repeat=int(sample.epoch or 1) - 1,
        status=status,
        final_answer=sample.output.completion if sample.output is not None else None,
        steps=steps,
        search_calls=sum(1 for s in steps if s.kind == "search"),
        input_tokens=sum(u.input_tokens for u in model_usage),
        output_tokens=sum(u.output_tokens for u in model_usage),
        reasoning_tokens=sum(u.reasoning_tokens or 0 for u in model_usage),
        wall_s=float(getattr(sample, "total_time", None) or 0.0),
        judgments=judgments,
        error=error,
        imported_from="inspect_ai",
    )


def read_inspect_log(path: str | Path, search_tools: Iterable[str] = SEARCH_TOOLS) -> Iterator[ExecutionRecord]:
    """ExecutionRecords of every sample of an inspect_ai log (`.eval` or `.json`), in log order."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: inspect_ai log not found")
    log_module = _inspect()
    try:
        log = log_module.read_eval_log(str(path))
    except Exception as exc:
        raise InputError(f"{path}: not an inspect_ai eval log ({type(exc).__name__}: {exc})") from None
    tools = frozenset(search_tools)
    for sample in log.samples or []:
        yield sample_record(log, sample, tools)
