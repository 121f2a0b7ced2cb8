"""inspect_ai eval logs -> branchpoint traces, read with inspect_ai's own reader.

`pip install 'branchpoint[inspect]'` (inspect_ai is optional). One `ExecutionRecord` per sample
and epoch of `read_eval_log(path)`:

- ids: `execution_id(run id, condition, sample id, repeat = epoch - 1)`; `run_id` is the eval's
  run id; `condition` holds the eval's `task` and `model`;
- question: the sample's input (its user messages' text when it is a message list); gold answers
  from `target`; `answerable`, `category`, `stratum`, `support_group` from the sample's metadata
  when present (default answerable);
- the scorers' own calls are no agent steps: model and tool events inside a scorer's span (inspect
  runs each scorer in a span of type `scorer` within the `scorers` span; `model_graded_qa`'s
  grader calls are there), and, in logs without spans, model events of the `grader` role, are
  left out of the steps and totals; their usage is kept apart as the record's `scoring_usage`;
- steps, from the sample's agent events in order: a `ModelEvent` is a `decide` step (an `answer` step
  when it is the last model call and asks for no tool) with its usage (input, output, reasoning
  tokens) and working time (its kind is the event's metadata `branchpoint_step_kind` where a
  branchpoint export wrote one); a `ToolEvent` of a search tool (`search_tools`, default search,
  web_search, retrieve, wikipedia_search) is a `search` step with its query (the `query`
  argument, else the first string argument) and the tool's result as one retrieved document;
  other tool calls are kept as steps of kind `tool` (usage none);
- totals: search calls, tokens summed over the model calls, `wall_s` = the sample's total time;
- status: `incomplete` (with the error) for a sample that errored, `length` when it hit a token
  limit, else `ok`; `final_answer` is the output's completion;
- judgments: the scores of one scorer (`scorer`, which a log with several scorers must name:
  several, unnamed, are refused, listing them; the `given` judge would otherwise take whichever
  came last) as judge `inspect:<scorer>`, kind `answer` (or `abstention` for an
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
#: Span types inside which inspect_ai runs scoring (`span(name="scorers")`, one `scorer` span each).
SCORING_SPAN_TYPES = frozenset({"scorers", "scorer"})
#: Event metadata naming a model step's kind, as `branchpoint export inspect` writes it.
STEP_KIND_KEY = "branchpoint_step_kind"
#: The model role inspect's model-graded scorers call by default.
GRADER_ROLE = "grader"
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
    query = arguments.get("query")
    if isinstance(query, str):
        return query
    return next((v for v in arguments.values() if isinstance(v, str)), None)


def scoring_spans(events: Iterable[Any]) -> set[str]:
    """Ids of the spans that are scoring (`SCORING_SPAN_TYPES`) or lie inside one."""
    types: dict[str, str | None] = {}
    parents: dict[str, str | None] = {}
    for event in events:
        if getattr(event, "event", None) == "span_begin":
            types[event.id], parents[event.id] = event.type, event.parent_id

    def under_scoring(span: str | None, depth: int = 0) -> bool:
        if span is None or depth > len(types):  # the depth bound guards against a cycle in a bad log
            return False
        return types.get(span) in SCORING_SPAN_TYPES or under_scoring(parents.get(span), depth + 1)

    return {span for span in types if under_scoring(span)}


def is_scoring(event: Any, spans: set[str]) -> bool:
    """Whether an event is the scorers' (see the module docstring), not the agent's."""
    span = getattr(event, "span_id", None)
    if span is not None:
        return span in spans
    return getattr(event, "event", None) == "model" and getattr(event, "role", None) == GRADER_ROLE


def split_events(events: Iterable[Any]) -> tuple[list[Any], list[Any]]:
    """A sample's events as (the agent's, the scorers')."""
    events = list(events)
    spans = scoring_spans(events)
    agent = [e for e in events if not is_scoring(e, spans)]
    scoring = [e for e in events if is_scoring(e, spans)]
    return agent, scoring


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
            kept = (getattr(event, "metadata", None) or {}).get(STEP_KIND_KEY)  # a branchpoint export's
            steps.append(
                Step(
                    kind=kept if isinstance(kept, str) else ("answer" if answering else "decide"),
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


def scorer_names(log: Any) -> list[str]:
    """The scorers whose scores the log's samples hold, in the order they first appear."""
    names: dict[str, None] = {}
    for sample in log.samples or []:
        names.update(dict.fromkeys(sample.scores or {}))
    return list(names)


def choose_scorer(log: Any, scorer: str | None, where: str) -> str | None:
    """The scorer whose scores become judgments: `scorer`, or the log's only one (None: no
    scores). InputError, listing the scorers, for a name the log lacks or several unnamed."""
    names = scorer_names(log)
    listed = ", ".join(names) or "none"
    if scorer is not None:
        if scorer not in names:
            raise InputError(f"{where}: no scorer {scorer!r} in the log (its scorers: {listed})")
        return scorer
    if len(names) > 1:
        raise InputError(f"{where}: the log has {len(names)} scorers ({listed}): choose one with --scorer NAME")
    return names[0] if names else None


def _usage_total(events: Iterable[Any]) -> dict[str, int]:
    usages = [_usage(getattr(e.output, "usage", None)) for e in events if getattr(e, "event", None) == "model"]
    return {
        "calls": len(usages),
        "input_tokens": sum(u.input_tokens for u in usages if u is not None),
        "output_tokens": sum(u.output_tokens for u in usages if u is not None),
    }


def sample_record(
    log: Any, sample: Any, search_tools: frozenset[str] = SEARCH_TOOLS, scorer: str | None = None
) -> ExecutionRecord:
    """One inspect_ai sample (one epoch) as an ExecutionRecord (see the module docstring);
    `scorer`: the scorer whose score is the judgment (None: none)."""
    meta = dict(sample.metadata or {})
    answerable = bool(meta.get("answerable", True))
    condition = {"task": log.eval.task, "model": log.eval.model}
    run_id = log.eval.run_id or log.eval.eval_id
    agent_events, scoring_events = split_events(sample.events or [])
    steps = _steps(agent_events, search_tools)
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
        if name == scorer
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
        scoring_usage=_usage_total(scoring_events),
    )


def read_inspect_log(
    path: str | Path, search_tools: Iterable[str] = SEARCH_TOOLS, scorer: str | None = None
) -> Iterator[ExecutionRecord]:
    """ExecutionRecords of every sample of an inspect_ai log (`.eval` or `.json`), in log order,
    judged by `scorer` (required when the log has several; see `choose_scorer`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: inspect_ai log not found")
    log_module = _inspect()
    try:
        log = log_module.read_eval_log(str(path))
    except Exception as exc:
        raise InputError(f"{path}: not an inspect_ai eval log ({type(exc).__name__}: {exc})") from None
    tools = frozenset(search_tools)
    chosen = choose_scorer(log, scorer, str(path))
    for sample in log.samples or []:
        yield sample_record(log, sample, tools, chosen)
