"""`export labels`: one training row per scored state of a fork study, with its step labels.

A row joins three things about a saved state x (one checkpoint of one parent execution):

- its prefix in the model's format: the request the run's policy sends to decide at x, rebuilt
  from the checkpointed state (`agents.decision_prompt`), with the question and its gold answers;
- what the policy did at x on its own path (`searched`: the parent's thread went on to more
  searches than x holds), read from the parent's checkpoint history;
- the labels of x from its fork outcomes (`evaluation.value.labels`: p̂ for THINK and SEARCH,
  Δ̂ with its interval, the repeats, needed / redundant / missing).

States are the ones `branchpoint value` scores (`study.load_study`: both roles with 2+ repeats,
one fork-settings fingerprint unless chosen), with the same reward, judge and roles.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from branchpoint.agents.decision_prompt import decision_prompt
from branchpoint.checkpoints.boundaries import list_boundaries
from branchpoint.checkpoints.fork import transcript_from_steps
from branchpoint.checkpoints.store import open_checkpointer
from branchpoint.checkpoints.values import checkpoint_values, state_reader
from branchpoint.errors import InputError
from branchpoint.evaluation.value.analyses import read_trace
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.labels import step_labels
from branchpoint.evaluation.value.study import load_study
from branchpoint.experiments.branch_planning import base_condition, condition_key, condition_specs
from branchpoint.experiments.spec import ExperimentSpec, load_spec
from branchpoint.experiments.store import RunStore
from branchpoint.traces import SPEC_FILE, ExecutionRecord

#: The keys every exported chat message has (absent ones are null), so Parquet gets one type.
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id")


def run_folder(path: Path) -> Path:
    """The run folder of a run folder or of its forks .jsonl file (it holds spec.yaml and the
    checkpoints the prefixes are rebuilt from)."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if not (folder / SPEC_FILE).is_file():
        raise InputError(
            f"{folder}: no {SPEC_FILE}; export labels reads a run folder (its spec, checkpoints and forks.jsonl)"
        )
    return folder


def message_row(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message with every key of MESSAGE_KEYS (content as text, absent keys null)."""
    row = {k: message.get(k) for k in MESSAGE_KEYS}
    row["content"] = (
        row["content"] if isinstance(row["content"], str) else ("" if row["content"] is None else str(row["content"]))
    )
    return row


def _searched_after(saver: Any, reader: Any, execution_id: str, cache: dict[str, int]) -> int:
    """The most searches any saved state of an execution's thread holds (cached per thread)."""
    if execution_id not in cache:
        cache[execution_id] = max((b.searches for b in list_boundaries(saver, execution_id, reader)), default=0)
    return cache[execution_id]


def _resolved(specs: Mapping[str, ExperimentSpec], parent: ExecutionRecord | None, where: str) -> ExperimentSpec:
    if parent is None:
        raise InputError(f"{where}: its parent execution is in neither executions.jsonl nor forks.jsonl")
    resolved = specs.get(condition_key(base_condition(parent.condition)))
    if resolved is None:
        raise InputError(f"{where}: the parent's condition {parent.condition} is not in the run's spec")
    return resolved


def label_rows(path: Path, config: ValueConfig = ValueConfig(), checkpoints: str | None = None) -> list[dict[str, Any]]:
    """One row per scored state of the fork study at `path` (a run folder or its forks file),
    in `load_study` order; the columns are described in docs/training.md."""
    folder = run_folder(path)
    states, parents, forks_path, _ = load_study(Path(path), config)
    records: dict[str, ExecutionRecord] = dict(parents)
    for r in read_trace(forks_path):  # a branch forked again is the parent of its branches
        records.setdefault(r.execution_id, r)
    spec = load_spec(folder / SPEC_FILE, check_policy=False, recorded=True)
    specs = condition_specs(spec)
    store = RunStore(folder)
    rows: list[dict[str, Any]] = []
    with open_checkpointer(store.checkpoint_target(checkpoints)) as saver:
        reader = state_reader(saver)
        reached: dict[str, int] = {}
        prompts, searched = [], []
        for execution_id, checkpoint_id in states.keys:
            where = f"{forks_path}: state {execution_id[:12]}:{checkpoint_id}"
            values = checkpoint_values(saver, execution_id, checkpoint_id, reader)
            if "transcript" not in values:  # saved before states kept a transcript
                values["transcript"] = transcript_from_steps(values)
            agent = _resolved(specs, records.get(execution_id), where).agent
            searches = int(values.get("searches", 0))
            allowed = agent.search and searches < agent.search_cap
            prompts.append(
                (
                    decision_prompt(
                        values,
                        policy=agent.policy,
                        allow_search=allowed,
                        evidence_words=agent.evidence_words,
                        variant=agent.prompt,
                        protocol=agent.protocol,
                    ),
                    searches,
                    allowed,
                )
            )
            searched.append(_searched_after(saver, reader, execution_id, reached) > searches)
    labels = step_labels(states, searched, config.level)
    for i, ((prompt, searches, allowed), lab) in enumerate(zip(prompts, labels)):
        execution_id, checkpoint_id = states.keys[i]
        parent = records[execution_id]
        rows.append(
            {
                "state_id": f"{execution_id}:{checkpoint_id}",
                "run_id": parent.run_id,
                "parent_execution_id": execution_id,
                "checkpoint_id": checkpoint_id,
                "boundary": states.boundary[i],
                "boundary_kind": str(states.boundary_kind[i]),
                "question_id": states.question_id[i],
                "question": states.question[i],
                "answerable": parent.answerable,
                "category": parent.category,
                "gold_answers": list(parent.gold_answers),
                "stratum": str(states.stratum[i]),
                "component": str(states.component[i]),
                "prompt_format": prompt.format,
                "prompt_policy": prompt.policy,
                "messages": [message_row(m) for m in prompt.messages],
                "tools": json.dumps(prompt.tools),
                "prompt_text": prompt.text,
                "searches": searches,
                "search_allowed": allowed,
                "t_action": states.t_action[i],
                "s_action": states.s_action[i],
                "action_taken": "SEARCH" if lab.searched else states.t_action[i],
                "searched": lab.searched,
                "m_think": lab.m_think,
                "m_search": lab.m_search,
                "p_think": lab.p_think,
                "p_search": lab.p_search,
                "p_think_interval": list(lab.p_think_interval),
                "p_search_interval": list(lab.p_search_interval),
                "delta": lab.delta,
                "delta_interval": list(lab.delta_interval),
                "tokens_think": lab.tokens_think,
                "tokens_search": lab.tokens_search,
                "search_needed": lab.search_needed,
                "search_harmful": lab.search_harmful,
                "search_redundant": lab.search_redundant,
                "search_missing": lab.search_missing,
                "label": lab.label,
                "level": config.level,
                "reward": config.reward,
                "judge": config.judge,
            }
        )
    return rows
