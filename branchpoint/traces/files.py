"""The names of a run folder's files: its traces, the stores beside them, and what the studies
write there (one place, so the runner, the studies and the viewer agree on them)."""

from __future__ import annotations

#: A run folder's files. Traces: the executions of its spec, the branches of its fork studies,
#: the replays, and the passage store they refer to (see `PassageResolver`).
EXECUTIONS_FILE = "executions.jsonl"
"""The executions of a run's spec: one `ExecutionRecord` per JSON line."""
FORKS_FILE = "forks.jsonl"
"""The branches of a run's fork studies: one `ExecutionRecord` (with `parent`) per JSON line."""
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
"""What `branchpoint evaluate` writes beside the traces: the metrics with their intervals."""
AGREEMENT_FILE = "agreement.json"
MINIMAL_SEARCH_FILE = "minimal_search.jsonl"
VALUE_FILE = "value.json"
"""What `branchpoint value` writes beside the traces: forecasters, routers and search-gain estimates."""
REPORT_FILE = "report.md"
#: What `branchpoint validate` writes into its output folder (`branchpoint.validation`).
VALIDATION_FILE = "validation.json"
FIGURES_DIR = "figures"
VIEWER_DIR = "viewer"

#: The run's trace files (`RunStore` appends them; `runs repair` quarantines their damaged lines).
RUN_TRACE_FILES: tuple[str, ...] = (EXECUTIONS_FILE, FORKS_FILE, REPLAYS_FILE, PASSAGES_FILE)
