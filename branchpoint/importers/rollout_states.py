"""Saved states of imported Search-R1 rollouts, so `branchpoint fork` can branch from them.

A Search-R1 rollout's prefix can be rebuilt: under `agent.protocol: searchr1` the tagged policy
sends Search-R1's own prompt and one assistant sequence of every search turn (up to its
`</search>`) followed by its `<information>` block (`agents.prompts.searchr1_messages`), which is
exactly how Search-R1 concatenates them. So each rollout's states are written as the agent
graph would have saved them: `initial` (before the first decision), `pending_query` (a query
decided, not yet run) and `after_search_k` (k searches' passages in hand), with the model turn
of each search in the transcript. A rollout is forkable only where the rebuilt prefix equals the
recorded one byte for byte (the passages render back to the same `<information>` block, the
question to the same prompt); states after the first turn that does not rebuild (an invalid
action, a block the renderer would write otherwise) are not written, and the record says why
(`fork_note`).

The run folder is a run of the given spec: `spec.yaml` (the spec, with `questions` pointing at
the rollouts' questions written beside it), `executions.jsonl` (records with `run_id` = the
spec's name and `checkpoint_ids`), `checkpoints.sqlite`. The first rollout of each question
carries the id the spec plans for that question, so `branchpoint runs verify` finds the run
complete; further rollouts are its repeats (listed as unplanned).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from langchain_core.runnables import RunnableConfig

from branchpoint.errors import InputError
from branchpoint.importers.rollouts import ParsedRollout, Turn
from branchpoint.traces import (
    BOUNDARY_PENDING,
    CHECKPOINTS_FILE,
    EXECUTIONS_FILE,
    SPEC_FILE,
    ExecutionRecord,
    after_search_boundary,
    execution_id,
    write_files_atomically,
)

QUESTIONS_FILE = "questions.jsonl"


def _check_spec(spec: Any, where: Path) -> None:
    if spec.agent.policy != "tagged" or spec.agent.protocol != "searchr1":
        raise InputError(
            f"{where}: forks of Search-R1 rollouts need agent.policy tagged with agent.protocol searchr1 "
            f"(the protocol that rebuilds Search-R1's prompt); the spec has policy {spec.agent.policy!r}, "
            f"protocol {spec.agent.protocol!r}"
        )
    if spec.sweep:
        raise InputError(f"{where}: a spec with a sweep cannot hold imported rollouts (they are one condition)")


def rebuilt_turns(parsed: ParsedRollout) -> tuple[list[Turn], str | None]:
    """The leading search turns whose prefix rebuilds exactly, and why the rest does not (None:
    every search turn rebuilds)."""
    from branchpoint.agents.prompts import SEARCHR1_PROMPT, searchr1_information, searchr1_question

    expected = SEARCHR1_PROMPT.format(question=searchr1_question(parsed.question))
    if expected not in parsed.prompt:
        return [], "the prompt is not Search-R1's prompt for this question (another template)"
    kept: list[Turn] = []
    for i, turn in enumerate(parsed.turns):
        if turn.action in ("answer", "none", "search_unrun"):
            break
        if turn.action != "search":
            return kept, f"turn {i + 1} is an invalid action (its retry message is not rebuilt by the protocol)"
        docs = [d.model_dump() for d in turn.docs[0]] if turn.docs else []
        if searchr1_information(docs) != turn.observation:
            return kept, f"turn {i + 1}: its <information> block does not render back from its passages"
        kept.append(turn)
    return kept, None


def _states(parsed: ParsedRollout, turns: list[Turn], source: str) -> list[dict[str, Any]]:
    """The state updates of a rollout's boundaries, in order (the first is the whole state)."""
    from branchpoint.agents.state import initial_state

    first = dict(initial_state("", parsed.question, source))
    updates: list[dict[str, Any]] = [first]
    evidence = 0
    for k, turn in enumerate(turns, 1):
        model_turn = {"call_id": f"call_{k - 1}", "content": turn.text, "reasoning": None}
        query = turn.content or ""
        updates.append(
            {"pending": {"action": "search", "text": query, "turn": model_turn}, "boundary": BOUNDARY_PENDING}
        )
        docs = [{**d.model_dump(), "source": source} for d in (turn.docs[0] if turn.docs else [])]
        updates.append(
            {
                "evidence": docs,
                "transcript": [
                    {
                        "kind": "search",
                        "query": query,
                        "source": source,
                        "evidence_start": evidence,
                        "evidence_count": len(docs),
                        "turn": model_turn,
                    }
                ],
                "searches": k,
                "pending": None,
                "boundary": after_search_boundary(k),
            }
        )
        evidence += len(docs)
    return updates


def write_forkable_run(
    loaded: list[tuple[ExecutionRecord, ParsedRollout]], spec_path: Path, out: Path
) -> tuple[list[ExecutionRecord], str]:
    """Write the run folder around `out` (see the module docstring); returns the records (ids,
    run id and checkpoint ids set; the caller writes them to `out`) and a note to print."""
    from branchpoint.checkpoints import list_boundaries, open_checkpointer
    from branchpoint.checkpoints.values import state_reader
    from branchpoint.experiments.planning import plan_executions, select_questions
    from branchpoint.experiments.spec import load_spec

    if out.name != EXECUTIONS_FILE:
        raise InputError(
            f"--out {out}: with --spec the traces are a run folder's {EXECUTIONS_FILE} (e.g. runs/NAME/{EXECUTIONS_FILE})"
        )
    run_dir = out.parent
    if (run_dir / CHECKPOINTS_FILE).exists() or out.exists():
        raise InputError(f"{run_dir}: already holds a run (import into a new folder)")
    steps = {r.model_extra.get("training_step") for r, _ in loaded if r.model_extra}
    if len(steps) > 1:
        raise InputError(
            f"--spec: the rollouts are of {len(steps)} training steps ({', '.join(map(str, sorted(s for s in steps if s is not None)))}); "
            "a forkable run holds one policy's states: import one step's rollouts"
        )
    spec = load_spec(spec_path)
    _check_spec(spec, spec_path)
    questions: dict[str, dict[str, Any]] = {}
    for record, _ in loaded:
        questions.setdefault(
            record.question_id,
            {
                "id": record.question_id,
                "question": record.question,
                "answerable": True,
                "gold_answers": record.gold_answers,
            },
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    qfile = run_dir / QUESTIONS_FILE
    write_files_atomically({qfile: "".join(json.dumps(q) + "\n" for q in questions.values())})
    data = spec.model_dump(mode="json")
    data["questions"] = {
        **data["questions"],
        "path": str(qfile.resolve()),
        "format": "auto",
        "limit": None,
        "sample": None,
    }
    data.pop("sweep", None)
    write_files_atomically({run_dir / SPEC_FILE: yaml.safe_dump(data, sort_keys=False)})
    run_spec = load_spec(run_dir / SPEC_FILE, recorded=True)
    planned = {p.question.id: p.execution_id for p in plan_executions(run_spec, select_questions(run_spec))}
    source = run_spec.retrieval.default
    records: list[ExecutionRecord] = []
    forkable = 0
    with open_checkpointer(run_dir / CHECKPOINTS_FILE) as saver:
        reader = state_reader(saver)
        for record, parsed in loaded:
            eid = (
                planned[record.question_id]
                if record.repeat == 0
                else execution_id(run_spec.name, {}, record.question_id, repeat=record.repeat)
            )
            turns, why = rebuilt_turns(parsed)
            config: RunnableConfig = {"configurable": {"thread_id": eid, "checkpoint_ns": ""}}
            updates = _states(parsed, turns, source)
            updates[0]["question_id"] = record.question_id
            for update in updates:
                config = reader.update_state(config, update, as_node="read_only")
            ids = [b.checkpoint_id for b in list_boundaries(saver, eid, reader)]
            forkable += 1 if why is None else 0
            extra = {"fork_note": why} if why else {}
            records.append(
                record.model_copy(
                    update={
                        "execution_id": eid,
                        "run_id": run_spec.name,
                        "condition": {},
                        "checkpoint_ids": ids,
                        **extra,
                    }
                )
            )
    note = (
        f"; saved states of {len(records)} rollouts in {run_dir / CHECKPOINTS_FILE} "
        f"({forkable} rebuilt whole; fork with `branchpoint fork {run_dir}`)"
    )
    return records, note
