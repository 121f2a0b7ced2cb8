"""The trace contract: one `ExecutionRecord` per agent execution, one JSON object per line.

This module is the contract between whoever produces traces (our agents, or another framework)
and the evaluation. It imports nothing else from branchpoint. Fields a producer may not know are
optional, and unknown extra fields are kept rather than rejected, so foreign traces can be scored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

SCHEMA_VERSION = 1

# --------------------------------------------------------------------------------------------
# Shared terms: the names every layer uses, defined once here (this module imports nothing of
# ours, so agents, checkpoints, experiments and evaluation may all import them).
# --------------------------------------------------------------------------------------------

#: A run folder's files. Traces: the executions of its spec, the branches of its fork studies,
#: the replays, and the passage store they refer to (see `PassageResolver`).
EXECUTIONS_FILE = "executions.jsonl"
FORKS_FILE = "forks.jsonl"
REPLAYS_FILE = "replays.jsonl"
PASSAGES_FILE = "passages.jsonl"
#: One line per invocation (run, fork, replay, import) that wrote records: its provenance; each
#: record's `invocation` names its line (see `branchpoint.provenance`).
INVOCATIONS_FILE = "invocations.jsonl"
#: The spec the run was made from, as recorded in its folder.
SPEC_FILE = "spec.yaml"
#: Saved agent states (nothing can rebuild them) and the caches that only save work.
CHECKPOINTS_FILE = "checkpoints.sqlite"
RETRIEVAL_CACHE_FILE = "retrieval_cache.sqlite"
JUDGE_CACHE_FILE = "judge_cache.sqlite"
#: Where `branchpoint runs repair` moves the damaged lines of RUN_TRACE_FILES.
QUARANTINE_FILE = "quarantine.jsonl"
#: Every request body sent to the model (`--log-requests`).
REQUESTS_FILE = "requests.jsonl"
#: Requests rebuilt from a run's checkpoints (`branchpoint requests rebuild`), in the same format.
REBUILT_REQUESTS_FILE = "requests.rebuilt.jsonl"
#: One line per `fork` / `replay` invocation: the plan it ran and where each setting came from.
FORK_SETTINGS_FILE = "fork_settings.jsonl"
#: What `evaluate`, the minimal-search study, `value` and `report` write beside the traces.
JUDGED_FILE = "judged.jsonl"
METRICS_FILE = "metrics.json"
AGREEMENT_FILE = "agreement.json"
MINIMAL_SEARCH_FILE = "minimal_search.jsonl"
VALUE_FILE = "value.json"
REPORT_FILE = "report.md"
#: What `branchpoint validate` writes into its output folder (`branchpoint.validation`).
VALIDATION_FILE = "validation.json"
FIGURES_DIR = "figures"
VIEWER_DIR = "viewer"

#: Legal action boundaries: the kinds a checkpoint's state records in its `boundary` channel.
#: `after_search_k` is written `after_search_1`, `after_search_2`, ... (see
#: `after_search_boundary`); the other two are written as their kind.
BoundaryKind = Literal["initial", "after_search_k", "pending_query"]
BOUNDARY_INITIAL = "initial"
BOUNDARY_AFTER_SEARCH = "after_search_k"
BOUNDARY_PENDING = "pending_query"
BOUNDARY_KINDS: tuple[str, ...] = (BOUNDARY_INITIAL, BOUNDARY_AFTER_SEARCH, BOUNDARY_PENDING)
_AFTER_SEARCH_PREFIX = "after_search_"


def after_search_boundary(k: int) -> str:
    """The boundary written after the k-th search: `after_search_k` with k filled in."""
    return f"{_AFTER_SEARCH_PREFIX}{k}"


def legal_boundary_kind(boundary: str | None) -> str | None:
    """The legal boundary kind a state's `boundary` marks (`after_search_3` -> `after_search_k`),
    or None when it marks no legal boundary (None, or a name that is not one of ours)."""
    if boundary is None:
        return None
    if boundary.startswith(_AFTER_SEARCH_PREFIX):
        return BOUNDARY_AFTER_SEARCH
    return boundary if boundary in BOUNDARY_KINDS else None


def search_count(boundary: str) -> int | None:
    """The k of an `after_search_k` boundary as written (`after_search_3` -> 3); None for others."""
    rest = boundary.removeprefix(_AFTER_SEARCH_PREFIX)
    return int(rest) if rest != boundary and rest.isdigit() else None


def collapse_search_count(boundary: str) -> str:
    """A recorded boundary name with its search count collapsed (`after_search_3` ->
    `after_search_k`); any other name is kept as written, a foreign trace's own names too (the
    search-value study groups states by this)."""
    return BOUNDARY_AFTER_SEARCH if boundary.startswith(_AFTER_SEARCH_PREFIX) else boundary


#: The four actions a saved state can be forked into (a branch record's `branch`): THINK (answer
#: now from the evidence in hand), SEARCH (search more, up to a budget; at a pending query: run
#: it on the same source), STOP (cancel the pending query and answer), SWITCH (run the pending
#: query on another source).
Action = Literal["THINK", "SEARCH", "STOP", "SWITCH"]
ACTIONS: tuple[str, ...] = ("THINK", "SEARCH", "STOP", "SWITCH")
#: Which actions are legal at which boundary kind.
LEGAL_ACTIONS: dict[str, tuple[str, ...]] = {
    BOUNDARY_INITIAL: ("THINK", "SEARCH"),
    BOUNDARY_AFTER_SEARCH: ("THINK", "SEARCH"),
    BOUNDARY_PENDING: ("STOP", "SEARCH", "SWITCH"),
}

Category = Literal["AU", "FP", "UC"]
Status = Literal["ok", "malformed", "length", "incomplete"]
#: Our step kinds. A trace may carry others (another framework's `tool`, `reflect`, ...): they
#: are kept as written, and a step of another kind that has `usage` counts as a model call.
StepKind = Literal["decide", "search", "answer", "forced_answer"]
STEP_KINDS: tuple[str, ...] = ("decide", "search", "answer", "forced_answer")
JudgmentKind = Literal["answer", "abstention", "evidence"]


class TraceError(ValueError):
    """A trace (or any JSONL input) that does not follow its schema; the message names file and line."""


class _Open(BaseModel):
    """Base for trace models: extra fields are kept (foreign producers may add their own)."""

    model_config = ConfigDict(extra="allow")


class Usage(_Open):
    """Token usage of one model call, as the server reported it."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None


class RetrievedDoc(_Open):
    """One retrieved passage. `title` and `source` are optional for foreign traces."""

    doc_id: str
    score: float
    text: str
    title: str | None = None
    source: str | None = None


class TokenAlternative(_Open):
    """One alternative token at a position, with its log probability (natural log)."""

    token: str
    logprob: float


class DecisionLogprobs(_Open):
    """What a decide step's reply said about searching, where the server returned log
    probabilities (`model.logprobs`): the token where it chose between searching and answering,
    the top alternatives there, and their probability mass per action (lower bounds: only the
    top N are seen). See `branchpoint.agents.decision_logprobs` and docs/search-value.md."""

    protocol: str | None = Field(None, description="constrained, tagged or native: how the decision token was found")
    position: int | None = Field(None, description="index of the decision token among the reply's tokens")
    token: str | None = Field(None, description="the decision token the reply has")
    logprob: float | None = Field(None, description="its log probability (natural log; -9999 for -inf)")
    top: list[TokenAlternative] = Field(default_factory=list, description="the top alternatives at the decision")
    p_search: float | None = Field(None, description="probability mass of the alternatives that open a search")
    p_answer: float | None = Field(None, description="probability mass of the alternatives that open an answer")
    top_mass: float | None = Field(None, description="probability mass of all the alternatives seen")
    entropy: float | None = Field(None, description="entropy in bits of the alternatives, renormalised")


class Step(_Open):
    """One step of an execution: a model decision, a search call, or the final answer."""

    kind: StepKind | str = Field(
        description="decide, search, answer, forced_answer, or another framework's kind (kept as written)"
    )
    usage: Usage | None = None
    latency_s: float = 0.0
    action: str | None = None
    text: str | None = None
    query: str | None = None
    source: str | None = None
    retrieved: list[RetrievedDoc] = Field(default_factory=list)
    cache_hit: bool | None = Field(
        None,
        description="Whether a cache answered the step's call: a search step's the retrieval cache, a model "
        "step's the response cache (--cache; unset when no response cache was asked).",
    )
    finish_reason: str | None = None
    raw: str | None = Field(None, description="A model step's reply as returned (`text` holds the parsed action text).")
    logprobs: DecisionLogprobs | None = Field(
        None,
        description="A decide step's decision token and its alternatives, where the server returned log probabilities.",
    )

    @model_serializer(mode="wrap")
    def _dump_logprobs_if_set(self, handler: Any) -> Any:
        """`logprobs` is written only when a step has them: traces written without them keep the
        bytes they had before the field existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("logprobs") is None:
            data.pop("logprobs", None)
        return data


class Judgment(_Open):
    """A judge's label on one execution (`raw` keeps the judge's own output)."""

    judge: str
    kind: JudgmentKind
    label: str
    raw: str | None = None


class ParentRef(_Open):
    """Where a forked execution came from."""

    execution_id: str
    checkpoint_id: str
    boundary: str


class ExecutionRecord(_Open):
    """One agent execution on one question under one condition."""

    execution_id: str
    run_id: str
    condition: dict[str, Any] = Field(default_factory=dict)
    question_id: str
    question: str
    answerable: bool
    category: Category | None = None
    gold_answers: list[str] = Field(default_factory=list)
    stratum: str | None = None
    support_group: str | None = None
    parent: ParentRef | None = None
    branch: Action | None = None
    repeat: int = 0
    kind: str | None = Field(None, description='"replay" for a replay (the policy decided again; `branch` is null).')
    sampling: dict[str, Any] | None = Field(
        None,
        description="The sampling as sent: the sampling fields (temperature, top_p, seed, ...) of the "
        "execution's last model request body (a branch or replay: its own seed per repeat).",
    )
    fork_settings: dict[str, Any] | None = Field(
        None,
        description="A branch's or replay's fork settings: what makes it the branch it is (depth, search "
        "budget, switch source, sampling as sent without the seed); see `evaluation.fork_settings`.",
    )
    fork_fingerprint: str | None = Field(None, description="A hash of `fork_settings`: branches pool only within one.")
    status: Status = "ok"
    final_answer: str | None = None
    steps: list[Step] = Field(default_factory=list)
    search_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    wall_s: float = 0.0
    checkpoint_ids: list[str] | None = None
    judgments: list[Judgment] = Field(default_factory=list)
    error: str | None = None
    request_fingerprint: str | None = Field(
        None,
        description="Hash of the request bodies this execution sent to the model (seeds left out); "
        "equal across conditions when a sweep axis changed nothing the model received.",
    )
    invocation: str | None = Field(
        None,
        description="The id of the invocation (run, fork, replay, import) that wrote this record: its "
        "line in invocations.jsonl beside the file holds the provenance (optional).",
    )


def execution_id(
    run_id: str,
    condition: dict[str, Any],
    question_id: str,
    parent: dict[str, Any] | None = None,
    branch: str | None = None,
    repeat: int = 0,
) -> str:
    """Deterministic id of an execution: a hash of run, condition, question, parent, branch, repeat."""
    key = json.dumps([run_id, condition, question_id, parent, branch, repeat], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:24]


#: Longest line (bytes, newline included) `iter_json_lines` reads: a longer one is an error naming
#: the line, not a memory spike (a 50 MB line of garbage must not be slurped and parsed).
MAX_LINE_BYTES = 16 * 1024 * 1024


def iter_raw_lines(
    fh: BinaryIO,
    path: str | Path,
    max_line_bytes: int = MAX_LINE_BYTES,
    on_too_long: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, bytes) of an open binary file, reading at most `max_line_bytes` per line.

    A longer line raises TraceError naming the file and line; with `on_too_long`, its rest is
    skipped in bounded chunks, `on_too_long(line number)` is called, and reading goes on.
    """
    lineno = 0
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > max_line_bytes:
            if on_too_long is None:
                raise TraceError(
                    f"{path} line {lineno}: longer than {max_line_bytes} bytes (the most one JSON line may have; "
                    "is this a JSONL file?)"
                )
            while raw and not raw.endswith(b"\n"):
                raw = fh.readline(max_line_bytes)
            on_too_long(lineno)
            continue
        yield lineno, raw


def json_error(exc: json.JSONDecodeError) -> str:
    """A JSON parse error as people read it (`Unterminated string starting at column 3`, once)."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


#: The run's trace files (`RunStore` appends them; `runs repair` quarantines their damaged lines).
RUN_TRACE_FILES: tuple[str, ...] = (EXECUTIONS_FILE, FORKS_FILE, REPLAYS_FILE, PASSAGES_FILE)
#: The last field of each line the run store writes: the CRC-32 of the line's bytes without it; lines
#: without it, or re-serialised by others, are read unchecked (docs/trace-contract.md).
LINE_CHECKSUM_FIELD = "line_crc32"
_CHECKSUM_TAIL = re.compile(rb'(,|\{)"line_crc32":"([0-9a-f]{8})"\}\r?\n?$')


class ChecksumError(TraceError):
    """A trace line whose `line_crc32` does not match its bytes (changed or damaged after writing)."""


def with_checksum(body: str) -> str:
    """A JSON object's text (`{...}`) as a line: `line_crc32` put last, then a newline."""
    sep = "" if body == "{}" else ","
    return f'{body[:-1]}{sep}"{LINE_CHECKSUM_FIELD}":"{zlib.crc32(body.encode("utf-8")):08x}"}}\n'


def _checksum_problem(raw: bytes, obj: dict[str, Any]) -> str | None:
    """Why a line's `line_crc32` (popped from `obj`) does not match its bytes; None if it does or cannot tell."""
    claimed = obj.pop(LINE_CHECKSUM_FIELD)
    tail = _CHECKSUM_TAIL.search(raw[-40:])
    if tail is None:
        return None
    body = raw[: max(0, len(raw) - 40) + tail.start()] + (b"}" if tail.group(1) == b"," else b"{}")
    if (crc := f"{zlib.crc32(body):08x}") == claimed == tail.group(2).decode():
        return None
    return f"checksum mismatch ({claimed}, its bytes give {crc}): the line changed after it was written"


def repair_hint(path: str | Path) -> str:
    """What to do about a damaged line of a run's trace file (`runs repair`); "" for other files."""
    path = Path(path)
    if path.name not in RUN_TRACE_FILES or path.parent == Path():
        return ""
    return f" (the run's trace file is damaged: `branchpoint runs repair {path.parent}` moves its damaged lines to {QUARANTINE_FILE}, losing nothing, and the next run redoes what they held)"


def parse_json_line(raw: bytes, path: str | Path, lineno: int) -> dict[str, Any] | None:
    """The JSON object on one line, or None for a blank line.

    Raises TraceError naming the file and line for bytes that are not UTF-8, text that is not JSON
    (or nested too deeply), a value that is not an object, and ChecksumError for a line whose
    `line_crc32` (dropped) does not match its bytes; for a run's trace files, with `repair_hint`.
    """
    where = f"{path} line {lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{where}: not UTF-8 text ({exc.reason}){repair_hint(path)}") from None
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}: invalid JSON ({json_error(exc)}){repair_hint(path)}") from None
    except RecursionError:
        raise TraceError(f"{where}: JSON nested too deeply to read{repair_hint(path)}") from None
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(obj).__name__}{repair_hint(path)}")
    if LINE_CHECKSUM_FIELD in obj and (problem := _checksum_problem(raw, obj)):
        raise ChecksumError(f"{where}: {problem}{repair_hint(path)}")
    return obj


def iter_json_lines(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line of a JSONL file.

    Raises TraceError naming the file and line for bytes that are not UTF-8, lines that are not
    JSON, JSON values that are not objects, and lines longer than `max_line_bytes`.
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: file not found")
    with path.open("rb") as fh:
        for lineno, raw in iter_raw_lines(fh, path, max_line_bytes):
            obj = parse_json_line(raw, path, lineno)
            if obj is not None:
                yield lineno, obj


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem: `field "a.b": message`."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(record)"
        parts.append(f'field "{loc}": {err["msg"]}')
    return "; ".join(parts)


# A run folder's passage store (`PASSAGES_FILE`): each retrieved passage's text once, `{"ref",
# "text"}` per line. Records written by the run store carry `text_ref` instead of `text` in
# `steps[].retrieved[]`; every reader here puts the text back, so consumers see the inline form
# (which is also valid).


def passage_ref(text: str) -> str:
    """The key of a passage text in a passage store (a hash of the text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class PassageResolver:
    """Puts passage texts back into records that refer to the passage store beside their file.

    The store is read on the first reference only (inline traces never touch it), unless its
    `texts` are given; a torn last line (a crash mid-append: its record was never written) is ignored.
    """

    def __init__(self, path: Path, texts: dict[str, str] | None = None) -> None:
        self.path = path
        self._texts: dict[str, str] | None = texts

    def _load(self) -> dict[str, str]:
        texts: dict[str, str] = {}
        if self.path.is_file():
            with self.path.open("rb") as fh:
                for lineno, raw in iter_raw_lines(fh, self.path):
                    if not raw.endswith(b"\n"):
                        break
                    obj = parse_json_line(raw, self.path, lineno)
                    if obj is None:
                        continue
                    if not isinstance(obj.get("ref"), str) or not isinstance(obj.get("text"), str):
                        raise TraceError(f'{self.path} line {lineno}: expected {{"ref": str, "text": str}}')
                    texts[obj["ref"]] = obj["text"]
        return texts

    def resolve(self, obj: dict[str, Any], where: str) -> dict[str, Any]:
        """`obj` (a record as parsed JSON) with every `text_ref` replaced by its text, in place."""
        for step in obj.get("steps") or ():
            if not isinstance(step, dict):
                continue
            for doc in step.get("retrieved") or ():
                if isinstance(doc, dict) and "text_ref" in doc:
                    if self._texts is None:
                        self._texts = self._load()
                    ref = doc.pop("text_ref")
                    if ref not in self._texts:
                        raise TraceError(f"{where}: passage {ref!r} is not in {self.path} (the run's passage store)")
                    doc["text"] = self._texts[ref]
        return obj


def iter_records(path: str | Path) -> Iterator[ExecutionRecord]:
    """Validated records one at a time (a large file is never held whole); errors as `read_records`.

    Passages stored once in the run's passage store (`passages.jsonl` beside the file) are put
    back into the records; inline passages are read as they are.
    """
    resolver = PassageResolver(Path(path).parent / PASSAGES_FILE)
    for lineno, obj in iter_json_lines(path):
        try:
            yield ExecutionRecord.model_validate(resolver.resolve(obj, f"{path} line {lineno}"))
        except ValidationError as exc:
            raise TraceError(f"{path} line {lineno}: {describe_validation_error(exc)}{repair_hint(path)}") from None


def read_records(path: str | Path) -> list[ExecutionRecord]:
    """Read and validate every line of a trace file; errors name the file, line and field."""
    return list(iter_records(path))


def dump_record(record: ExecutionRecord) -> str:
    """One JSON line (no trailing newline) for a record."""
    return record.model_dump_json(exclude_none=False)


def write_files_atomically(files: dict[Path, str]) -> None:
    """Write every file to a temporary sibling first, then rename each over its target."""
    tmps: dict[Path, Path] = {}
    try:
        for target, text in files.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp.{os.getpid()}")
            tmps[target] = tmp
            with tmp.open("w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for target, tmp in tmps.items():
            os.replace(tmp, target)
    finally:
        for tmp in tmps.values():
            if tmp.exists():
                tmp.unlink()


class RecordTooLargeError(TraceError):
    """A record whose line would be longer than the readers accept (MAX_LINE_BYTES)."""


def check_line_size(line: str, execution_id: str, where: str | Path) -> int:
    """The line's size in bytes; RecordTooLargeError when readers would refuse it."""
    size = len(line.encode("utf-8"))
    if size > MAX_LINE_BYTES:
        raise RecordTooLargeError(
            f"{where}: the record of execution {execution_id[:12]} is {size} bytes, more than the "
            f"{MAX_LINE_BYTES} bytes one trace line may have (readers would refuse the file)"
        )
    return size


def write_records(path: str | Path, records: list[ExecutionRecord]) -> None:
    """Write records atomically: to a temporary file beside `path`, then rename over it.

    A record longer than MAX_LINE_BYTES is a RecordTooLargeError (nothing is written).
    """
    lines = [with_checksum(dump_record(ExecutionRecord.model_validate(rec.model_dump()))) for rec in records]
    for rec, line in zip(records, lines):
        check_line_size(line, rec.execution_id, path)
    write_files_atomically({Path(path): "".join(lines)})


def append_record(path: str | Path, record: ExecutionRecord) -> None:
    """Append one validated, checksummed record durably (flush + fsync): a crash loses at most this line."""
    line = with_checksum(dump_record(ExecutionRecord.model_validate(record.model_dump())))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
