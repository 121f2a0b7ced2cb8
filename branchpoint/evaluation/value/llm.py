"""The LLM forecaster: a model reads a state's public history and forecasts q_T and q_S.

For each state the model gets the question, the actor's identity (which agent acts: model and
condition), the public history up to the checkpoint (queries issued and passages retrieved, and
a query decided but not yet run; never the original continuation or any private reasoning), and
the definitions of the two actions at that boundary. It replies with JSON
`{"q_think": p, "q_search": p}`. A reply that is not such an object with both numbers in [0, 1]
is *malformed*: the forecast is (0.5, 0.5) and it is counted (`n_malformed`).

The history is rebuilt from the parent execution's `steps` (RUN_DIR/executions.jsonl): the first
`prefix.steps` of them, the count each branch record carries. Any `ModelClient` works:
`open_model(ModelSpec(...))` for a server (ask it for JSON, e.g. `extra_body: {response_format:
{type: json_object}}` on vLLM), or `ScriptedModel` in tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from branchpoint.errors import InputError
from branchpoint.evaluation.value.forecasters import NEUTRAL, Forecast
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.traces import SPEC_FILE, ExecutionRecord, Step, describe_validation_error

if TYPE_CHECKING:  # importing branchpoint.models loads langchain: only when a model is used
    from branchpoint.models.call import ModelClient
    from branchpoint.models.spec import ModelSpec

SYSTEM = (
    "You forecast how likely an AI agent is to answer a question correctly. You see what the agent "
    "has seen so far and two actions it could take next. Reply with one JSON object only: "
    '{"q_think": <probability in [0, 1]>, "q_search": <probability in [0, 1]>}.'
)

ACTION_TEXT = {
    "THINK": "answer now from the evidence in hand, without searching again",
    "STOP": "cancel the pending query and answer now from the evidence in hand",
    "SEARCH": "keep searching (up to {budget} more searches), then answer",
    "SAME": "run the pending query on the same source, keep searching (up to {budget} searches), then answer",
    "SWITCH": "run the pending query on another source, keep searching (up to {budget} searches), then answer",
}
PASSAGE_CHARS = 300


def public_history(parent: ExecutionRecord | None, prefix_steps: int | None) -> list[Step]:
    """The parent's steps before the checkpoint (empty when the parent or the count is unknown)."""
    if parent is None or prefix_steps is None:
        return []
    return parent.steps[:prefix_steps]


def describe_history(steps: list[Step]) -> str:
    """The public history as numbered lines: searches with their passages, a pending query."""
    lines: list[str] = []
    pending: str | None = None
    for step in steps:
        if step.kind == "decide" and (step.action or "").lower() == "search":
            pending = step.query or step.text
        elif step.kind == "search":
            lines.append(f'{len(lines) + 1}. searched "{step.query}"' + (f" on {step.source}" if step.source else ""))
            for k, doc in enumerate(step.retrieved, start=1):
                title = f'"{doc.title}" ' if doc.title else ""
                text = doc.text if len(doc.text) <= PASSAGE_CHARS else doc.text[:PASSAGE_CHARS] + "…"
                lines.append(f"   [{k}] {title}{text}")
            pending = None
    if pending:
        lines.append(f'{len(lines) + 1}. decided to search "{pending}" (not run yet)')
    return "\n".join(lines) if lines else "(nothing yet: no search has been made)"


def action_definition(action: str, boundary_kind: str, budget: int | None) -> str:
    """What an action does at a boundary kind, in words."""
    key = "SAME" if action == "SEARCH" and boundary_kind == "pending_query" else action
    return ACTION_TEXT[key].format(budget=budget if budget is not None else "a few")


def forecast_messages(states: StateTable, row: int, history: list[Step], actor: str) -> list[dict[str, str]]:
    """The chat messages for one state."""
    kind = str(states.boundary_kind[row])
    t, s = states.t_action[row], states.s_action[row]
    budget = states.search_budget[row]
    user = (
        f"Agent: {actor}\n"
        f"Question: {states.question[row]}\n"
        f"What the agent has done so far:\n{describe_history(history)}\n\n"
        f"Action THINK ({t}): {action_definition(t, kind, budget)}.\n"
        f"Action SEARCH ({s}): {action_definition(s, kind, budget)}.\n\n"
        "How likely is the agent's final answer to be correct after each action? "
        'Reply with JSON only: {"q_think": ..., "q_search": ...}'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)


def _probability(v: Any) -> TypeGuard[float]:
    """A number in [0, 1] (booleans are not numbers here)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0


def parse_forecast(text: str) -> tuple[float, float] | None:
    """(q_think, q_search) from the first JSON object in a reply that has both as numbers in
    [0, 1]; None for anything else (malformed)."""
    for match in _OBJECT.finditer(text or ""):
        try:
            obj = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        q_t, q_s = obj.get("q_think"), obj.get("q_search")
        if _probability(q_t) and _probability(q_s):
            return float(q_t), float(q_s)
    return None


#: GBNF for completion-style models (llama.cpp): the reply can only be the forecast object.
FORECAST_GRAMMAR = (
    r'root ::= "{\"q_think\": " num ", \"q_search\": " num "}"'
    + "\n"
    + r'num ::= "0" ("." [0-9] [0-9]?)? | "1" (".0")?'
    + "\n"
)


def _ask(client: ModelClient, messages: list[dict[str, str]], style: str, max_tokens: int) -> Any:
    if style == "completion":  # base models: one prompt, the grammar makes the reply structured
        prompt = "\n\n".join(m["content"] for m in messages) + "\nJSON: "
        return client.complete(prompt, grammar=FORECAST_GRAMMAR, stop=["\n"], max_tokens=max_tokens)
    return client.chat(messages, max_tokens=max_tokens)


def llm_forecasts(
    client: ModelClient,
    states: StateTable,
    parents: Mapping[str, ExecutionRecord],
    *,
    actor: str = "a search-augmented LLM agent",
    style: str = "chat",
    max_tokens: int = 64,
    progress: bool = False,
) -> Forecast:
    """Ask `client` for (q_T, q_S) at every state; malformed replies give (0.5, 0.5), counted.

    `parents` maps parent execution ids to their records (for the public history); a state
    whose parent is missing is forecast from the question alone (`n_no_history`). `style`
    `chat` sends system + user messages (ask the server for JSON output where it can);
    `completion` sends one prompt with `FORECAST_GRAMMAR`, so llama.cpp can only reply with
    the forecast object.
    """
    from rich.progress import track

    n = len(states)
    q_t, q_s = np.full(n, NEUTRAL), np.full(n, NEUTRAL)
    info: dict[str, Any] = {
        "n_calls": 0,
        "n_malformed": 0,
        "n_no_history": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "malformed_examples": [],
    }
    for row in track(range(n), description="LLM forecaster", disable=not progress):
        parent = parents.get(states.keys[row][0])
        history = public_history(parent, states.prefix_steps[row])
        if parent is None or states.prefix_steps[row] is None:
            info["n_no_history"] += 1
        call = _ask(client, forecast_messages(states, row, history, actor), style, max_tokens)
        info["n_calls"] += 1
        info["input_tokens"] += call.usage.input_tokens
        info["output_tokens"] += call.usage.output_tokens
        parsed = parse_forecast(call.text)
        if parsed is None:
            info["n_malformed"] += 1
            if len(info["malformed_examples"]) < 3:
                info["malformed_examples"].append(call.text[:120])
            continue
        q_t[row], q_s[row] = parsed
    return Forecast(q_t, q_s, info)


def run_model_spec(run_dir: Path) -> ModelSpec:
    """The `model` section of RUN_DIR/spec.yaml as a ModelSpec (the run's own agent model)."""
    import yaml
    from pydantic import ValidationError

    from branchpoint.models.spec import ModelSpec

    path = Path(run_dir) / SPEC_FILE
    if not path.is_file():
        raise InputError(f"{path}: not found (--llm-forecaster uses the run's model; give a run directory)")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    try:
        return ModelSpec.model_validate(data.get("model") or {})
    except ValidationError as exc:
        raise InputError(f"{path}: model: {describe_validation_error(exc)}") from None
