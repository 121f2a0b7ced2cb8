"""What the viewer's pages show, as JSON: one execution's timeline, and the fork tree of its saved
states (branches, repeats, success rates with intervals, Δ = p_S − p_T, forecasts).

Both read the index (`index.RunIndex`) and the full records it points at; nothing here reads a
checkpoint database. Where a checkpoint sits in a record's steps is inferred from the trace:
the runner saves one checkpoint at each legal boundary in order — the start (`initial`, or for
a branch the boundary it was forked at, except STOP, which cancels it), then per search a
`pending_query` before the search step and an `after_search_k` after it — so when the number of
`checkpoint_ids` matches that sequence each id is placed; otherwise the ids are listed unplaced.
A branch's `parent.boundary` is the authority for the checkpoint it was forked from.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.errors import InputError
from branchpoint.evaluation.cost import cost_channels
from branchpoint.evaluation.fork_settings import ForkSettingsChoice, view_groups
from branchpoint.evaluation.value.outcomes import Roles
from branchpoint.evaluation.value.rewards import get_reward
from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.evaluation.viewer.requests import attach_requests
from branchpoint.evaluation.viewer.rows import shown_outcome
from branchpoint.evaluation.wilson import wilson_interval
from branchpoint.traces import (
    BOUNDARY_INITIAL,
    BOUNDARY_PENDING,
    REBUILT_REQUESTS_FILE,
    REQUESTS_FILE,
    ExecutionRecord,
    TraceError,
    after_search_boundary,
    collapse_search_count,
    iter_json_lines,
    search_count,
)

CORRECT_OUTCOMES = frozenset({"correct_answer", "correct_abstention"})


def json_safe(value: Any) -> Any:
    """NaN as null and ±inf as "inf" / "-inf", as in metrics.json (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# One execution
# --------------------------------------------------------------------------------------------


def _start_searches(record: ExecutionRecord) -> int:
    prefix = getattr(record, "prefix", None)
    calls = prefix.get("search_calls") if isinstance(prefix, dict) else None
    if isinstance(calls, int):
        return calls
    return search_count(record.parent.boundary if record.parent else "") or 0


def boundary_sequence(record: ExecutionRecord) -> list[tuple[int, str]]:
    """(position, boundary) of each checkpoint the record's steps imply, in save order; position
    p means "before step p" (p = len(steps): after the last step)."""
    out: list[tuple[int, str]] = []
    if record.parent is None:
        out.append((0, BOUNDARY_INITIAL))
    elif record.branch != "STOP":
        out.append((0, record.parent.boundary))
    searches = _start_searches(record)
    for i, step in enumerate(record.steps):
        if step.kind != "search":
            continue
        if not (i == 0 and out and out[0][1] == BOUNDARY_PENDING):
            out.append((i, BOUNDARY_PENDING))
        searches += 1
        out.append((i + 1, after_search_boundary(searches)))
    return out


def checkpoint_marks(
    record: ExecutionRecord, children: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """The record's checkpoints with position, boundary and branches forked from each, and a note
    when the ids could not be placed on the steps."""
    ids = list(record.checkpoint_ids or [])
    forked: dict[str, dict[str, Any]] = {}
    for row in children:
        f = forked.setdefault(row["checkpoint"], {"boundary": row["boundary"], "branches": 0, "actions": {}})
        f["branches"] += 1
        f["actions"][row["branch"] or "?"] = f["actions"].get(row["branch"] or "?", 0) + 1
    sequence = boundary_sequence(record)
    note = None
    placed: list[tuple[int | None, str | None, str]]
    if len(sequence) == len(ids):
        placed = [(pos, name, cid) for (pos, name), cid in zip(sequence, ids)]
    else:
        placed = [(None, None, cid) for cid in ids]
        if ids:
            note = (
                f"{len(ids)} checkpoint ids, but the steps imply {len(sequence)} legal boundaries: "
                "ids are listed without their place in the timeline"
            )
    marks = []
    for pos, name, cid in placed:
        fork = forked.pop(cid, None)
        marks.append(
            {
                "position": pos,
                "boundary": (fork or {}).get("boundary") or name,
                "checkpoint_id": cid,
                "branches": (fork or {}).get("branches", 0),
                "actions": (fork or {}).get("actions", {}),
            }
        )
    for cid, f in forked.items():  # forked from an id the record does not list
        marks.append(
            {
                "position": None,
                "boundary": f["boundary"],
                "checkpoint_id": cid,
                "branches": f["branches"],
                "actions": f["actions"],
                "unlisted": True,
            }
        )
    return marks, note


def _evidence_labels(record: ExecutionRecord) -> dict[str, list[str]]:
    """doc_id -> `judge: LABEL` of every evidence judgment on it (the last per judge)."""
    out: dict[str, dict[str, str]] = {}
    for j in record.judgments:
        doc = getattr(j, "doc_id", None)
        if j.kind == "evidence" and doc is not None:
            out.setdefault(str(doc), {})[j.judge] = j.label.strip().upper()
    return {doc: [f"{judge}: {label}" for judge, label in labels.items()] for doc, labels in out.items()}


def lineage(index: RunIndex, record: ExecutionRecord) -> list[dict[str, Any]]:
    """The chain of parents, root first: each with its id, branch and the boundary forked at."""
    chain: list[dict[str, Any]] = []
    ref = record.parent and (record.parent.execution_id, record.parent.checkpoint_id, record.parent.boundary)
    seen = {record.execution_id}
    while ref and ref[0] not in seen:
        seen.add(ref[0])
        entry = index.entry(ref[0])
        row = entry.row if entry else None
        chain.append(
            {
                "id": ref[0],
                "checkpoint": ref[1],
                "boundary": ref[2],
                "branch": row["branch"] if row else None,
                "known": row is not None,
            }
        )
        ref = (row["parent"], row["checkpoint"], row["boundary"]) if row and row["parent"] else None
    return list(reversed(chain))


def _requests(index: RunIndex, record: ExecutionRecord) -> tuple[list[dict[str, Any]], str, str | None]:
    """(requests, source, problem): the execution's lines of requests.jsonl, else those rebuilt
    from its checkpoints (requests.rebuilt.jsonl), else none with why."""
    logged = index.requests.requests_of(record.execution_id) if index.requests.available() else []
    if logged:
        return logged, REQUESTS_FILE, None
    rebuilt = index.rebuilt_requests
    found = rebuilt.requests_of(record.execution_id) if rebuilt.available() else []
    if found:
        return found, REBUILT_REQUESTS_FILE, None
    hint = f"`branchpoint requests rebuild {index.run_dir}` rebuilds them from the checkpoints"
    if index.requests.available():
        return [], "", f"no requests of this execution in {REQUESTS_FILE} (it ran without --log-requests; {hint})"
    return (
        [],
        "",
        f"no {REQUESTS_FILE} in the run (run or fork with --log-requests to see the requests as sent; {hint})",
    )


def execution_view(index: RunIndex, execution_id: str) -> dict[str, Any]:
    """One execution: its record, timeline (steps with checkpoint marks, each model step with its
    request as sent and reply as received), judgments with the judges' raw output, and cost."""
    entry = index.entry(execution_id)
    if entry is None:
        raise KeyError(execution_id)
    try:
        record = index.record(execution_id)
    except TraceError as exc:
        return {"row": entry.row, "error": str(exc)}
    children = index.children(execution_id)
    marks, note = checkpoint_marks(record, children)
    evidence = _evidence_labels(record)
    steps = []
    for i, step in enumerate(record.steps):
        data = step.model_dump(mode="json", exclude_none=True)
        data["index"] = i
        for doc in data.get("retrieved", []):
            doc["evidence"] = evidence.get(doc["doc_id"], [])
        steps.append(data)
    requests, source, problem = _requests(index, record)
    unplaced, requests_note = attach_requests(record, steps, requests, source)
    gen, inp, search = cost_channels(record.output_tokens, record.input_tokens, record.search_calls, index.cfg)
    body = record.model_dump(mode="json", exclude={"steps", "judgments"})
    outcome, decided_by = shown_outcome(record, index.judge or DEFAULT_JUDGE)
    return {
        "row": entry.row,
        "record": body,
        "steps": steps,
        "checkpoints": marks,
        "checkpoint_note": note,
        "judgments": [j.model_dump(mode="json", exclude_none=True) for j in record.judgments],
        "outcome": outcome,
        "decided_by": decided_by,
        "cost": {
            "generated": gen,
            "input": inp,
            "search": search,
            "total": gen + inp + search,
            "lam": index.cfg.lam,
            "mu": index.cfg.mu,
        },
        "lineage": lineage(index, record),
        "branches": len(children),
        "requests_source": source,
        "requests_note": requests_note or problem,
        "unplaced_requests": unplaced,
    }


# --------------------------------------------------------------------------------------------
# The fork tree
# --------------------------------------------------------------------------------------------


def read_forecasts(paths: list[Path]) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]:
    """(parent id, checkpoint id) -> forecasts [{name, q_think, q_search, gain}] from forecasts
    files (`value --forecasts` format), and a message per unreadable line or file."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    problems: list[str] = []
    for path in paths:
        name = f"file:{path.stem}"
        try:
            for lineno, obj in iter_json_lines(path):
                try:
                    key = (str(obj["parent_execution_id"]), str(obj["checkpoint_id"]))
                    q_t, q_s = float(obj["q_think"]), float(obj["q_search"])
                except (KeyError, TypeError, ValueError):
                    problems.append(
                        f'{path} line {lineno}: expected "parent_execution_id", "checkpoint_id", "q_think", "q_search"'
                    )
                    continue
                rows = [f for f in out.setdefault(key, []) if f["name"] != name]
                out[key] = rows + [{"name": name, "q_think": q_t, "q_search": q_s, "gain": q_s - q_t}]
        except TraceError as exc:
            problems.append(str(exc))
    return out, problems


def forecast_files(index: RunIndex, extra: list[Path] | None = None) -> list[Path]:
    """Forecasts files value.json scored (resolved as given, then beside the run), and `extra`."""
    found: list[Path] = []
    for meta in ((index.value or {}).get("forecasters") or {}).values():
        file = ((meta or {}).get("info") or {}).get("file") if meta.get("kind") == "file" else None
        if not file:
            continue
        for candidate in (Path(file), index.run_dir / file, index.run_dir / Path(file).name):
            if candidate.is_file():
                found.append(candidate.resolve())
                break
    for path in extra or []:
        if Path(path).resolve() not in found:
            found.append(Path(path).resolve())
    return found


def value_forecasts(
    index: RunIndex, files: list[Path]
) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]:
    """Per-state forecasts of every forecaster value.json scored, recomputed with value's own code
    and settings (`load_states`, `dev_split`, `collect_forecasts`: registered forecasters, the
    forecasts files, their calibration maps), keyed by (parent id, checkpoint id); each entry
    says whether the state was a development row (fitted forecasters saw its outcomes). The LLM
    forecaster needs a model and is not recomputed. Empty without value.json."""
    from branchpoint.evaluation.value.config import ValueConfig
    from branchpoint.evaluation.value.outcomes import dev_split
    from branchpoint.evaluation.value.study import collect_forecasts, load_states

    settings = (index.value or {}).get("settings")
    if not isinstance(settings, dict):
        return {}, []
    keep = ("judge", "reward", "dev_split", "seed", "pending_roles", "fork_settings", "mix_fork_settings")
    try:
        config = ValueConfig(**{k: settings[k] for k in keep if k in settings}, resamples=0)
        states, _, _ = load_states(index.run_dir, config)
        dev = dev_split(states, config.dev_split, config.seed)
        forecasts, _, _ = collect_forecasts(states, dev, files=files, seed=config.seed)
    except (InputError, TraceError, ValueError) as exc:
        return {}, [f"value.json's forecasts could not be recomputed here: {exc}"]
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for name, fc in forecasts.items():
        for i, key in enumerate(states.keys):
            q_t, q_s = float(fc.q_think[i]), float(fc.q_search[i])
            out.setdefault(key, []).append(
                {"name": name, "q_think": q_t, "q_search": q_s, "gain": q_s - q_t, "dev": bool(dev[i])}
            )
    return out, []


def state_forecasts(
    index: RunIndex, extra: list[Path] | None = None
) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]:
    """Forecasts per state: value's recomputed ones where value scored the state, else the lines
    of the forecasts files (value.json's and `extra`, which only add lines, never fail value's
    recomputation); and a message per problem."""
    from_files, problems = read_forecasts(forecast_files(index, extra))
    from_value, more = value_forecasts(index, forecast_files(index))  # the files value itself read
    return {**from_files, **from_value}, problems + more


def _rewards(index: RunIndex, rows: list[dict[str, Any]]) -> list[float | None]:
    """Each branch's reward Y in [0, 1] under value.json's reward (default `correct`: 1 for a
    correct answer or abstention, as `value.outcomes.correctness_reward`); None when unscored."""
    reward = ((index.value or {}).get("settings") or {}).get("reward") or "correct"
    if reward == "correct":
        return [
            None if r["outcome"] in ("incomplete", "unparseable") else float(r["outcome"] in CORRECT_OUTCOMES)
            for r in rows
        ]
    records = [index.record(r["id"]) for r in rows]
    try:
        values = list(get_reward(reward)(records, index.judge or DEFAULT_JUDGE))
    except InputError:
        return [None for _ in rows]
    return [None if r.status == "incomplete" else float(v) for r, v in zip(records, values)]


def _roles(index: RunIndex) -> Roles:
    pending = ((index.value or {}).get("settings") or {}).get("pending_roles") or ("STOP", "SEARCH")
    try:
        return Roles(tuple(pending))
    except InputError:
        return Roles()


def _fork_tags(index: RunIndex, children: list[dict[str, Any]]) -> dict[int, tuple[str | None, str | None]]:
    """Per child row (by `id`), its fork-settings tag and its state's note (`view_groups`), under
    value.json's choice of fork settings (`--fork-settings`, `--mix-fork-settings`) if any."""
    value = index.value or {}
    settings = value.get("settings") or {}
    choice = ForkSettingsChoice(fingerprint=settings.get("fork_settings"), mix=bool(settings.get("mix_fork_settings")))
    read = (value.get("fork_settings") or {}).get("fingerprints") or {}
    chosen = next(
        (s["settings"] for fp, s in read.items() if choice.fingerprint and fp.startswith(choice.fingerprint)), None
    )
    by_state: dict[Any, list[dict[str, Any]]] = {}
    out: dict[int, tuple[str | None, str | None]] = {}
    for row in children:
        if row["kind"] == "replay":  # no role in Δ: shown as they are
            out[id(row)] = (None, None)
        else:
            by_state.setdefault(row["checkpoint"], []).append(row)
    for rows in by_state.values():
        tags, note = view_groups([row.get("fork_settings") or {} for row in rows], choice, chosen)
        out.update({id(row): (tag, note) for row, tag in zip(rows, tags)})
    return out


def repeat_labels(branches: list[dict[str, Any]]) -> list[str]:
    """A label per branch of one action at one state, unique within the group: `#r` (its repeat)
    where r is unique; where studies were pooled and several branches share r, `#r·fp` with their
    fork-settings fingerprint when that tells them apart, else `#r·k` (k = 1, 2, … in order)."""
    by_repeat: dict[int, list[int]] = {}
    for i, b in enumerate(branches):
        by_repeat.setdefault(b["repeat"], []).append(i)
    labels = [f"#{b['repeat']}" for b in branches]
    for repeat, group in by_repeat.items():
        if len(group) < 2:
            continue
        prints = [(branches[i].get("fork") or "")[:6] for i in group]
        distinct = all(prints) and len(set(prints)) == len(prints)
        for k, i in enumerate(group):
            labels[i] = f"#{repeat}·{prints[k] if distinct else k + 1}"
    return labels


def tree_view(
    index: RunIndex, execution_id: str, forecasts: dict[tuple[str, str], list[dict[str, Any]]]
) -> dict[str, Any]:
    """The saved states of one execution with their branches: per action the repeats (answer,
    outcome, reward), success rate with its Wilson interval, Δ = p_S − p_T with the roles of
    value.json, the forecasts for the state, and nested forks (branches that have branches)."""
    entry = index.entry(execution_id)
    if entry is None:
        raise KeyError(execution_id)
    children = index.children(execution_id)
    rewards = _rewards(index, children)
    roles = _roles(index)
    tags = _fork_tags(index, children)
    states: dict[str, dict[str, Any]] = {}
    for row, y in zip(children, rewards):
        state = states.setdefault(
            row["checkpoint"],
            {"checkpoint_id": row["checkpoint"], "boundary": row["boundary"], "actions": {}, "fork_note": None},
        )
        tag, note = tags[id(row)]
        state["fork_note"] = state["fork_note"] or note
        action = row["branch"] or "?"
        a = state["actions"].setdefault(
            action if tag is None else f"{action} [{tag}]",
            {"action": action, "fork_settings": tag, "branches": [], "n": 0, "incomplete": 0, "successes": 0.0},
        )
        a["branches"].append(
            {
                "id": row["id"],
                "repeat": row["repeat"],
                "fork": row.get("fork"),
                "answer": row["answer"],
                "outcome": row["outcome"],
                "reward": y,
                "searches": row["searches"],
                "tokens": row["input_tokens"] + row["output_tokens"],
                "status": row["status"],
                "has_branches": bool(index.children(row["id"])),
            }
        )
        if y is None:
            a["incomplete"] += 1
        else:
            a["n"] += 1
            a["successes"] += y
    out_states = []
    for cid, state in states.items():
        t_action, s_action = roles.of(collapse_search_count(state["boundary"] or ""))
        for a in state["actions"].values():
            a["branches"].sort(key=lambda b: (b["repeat"], b["fork"] or "", b["id"]))
            for b, label in zip(a["branches"], repeat_labels(a["branches"])):
                b["label"] = label
            a["rate"] = a["successes"] / a["n"] if a["n"] else None
            a["interval"] = wilson_interval(a["successes"], a["n"])
        p_t = (state["actions"].get(t_action) or {}).get("rate")
        p_s = (state["actions"].get(s_action) or {}).get("rate")
        n_t = (state["actions"].get(t_action) or {}).get("n", 0)
        n_s = (state["actions"].get(s_action) or {}).get("n", 0)
        state.update(
            t_action=t_action,
            s_action=s_action,
            delta=None if p_t is None or p_s is None else p_s - p_t,
            scored=n_t >= 2 and n_s >= 2,  # what `value` scores: both roles with 2+ repeats
            forecasts=forecasts.get((execution_id, cid), []),
        )
        out_states.append(state)
    try:
        record = index.record(execution_id)
        marks, _ = checkpoint_marks(record, children)
        position = {m["checkpoint_id"]: i for i, m in enumerate(marks)}
    except TraceError:
        position = {}
    out_states.sort(key=lambda s: (position.get(s["checkpoint_id"], 1_000_000), s["checkpoint_id"] or ""))
    return {
        "row": entry.row,
        "states": out_states,
        "roles": roles.table(),
        "reward": ((index.value or {}).get("settings") or {}).get("reward") or "correct",
        "judge": index.judge,
        "value": index.summary()["value"],
    }
