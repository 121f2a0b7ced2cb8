"""Run the shell commands of a docs page as a reader would, on the simulated model.

A page's commands run in order, in one fresh workspace (a temporary folder with `experiments/`
and `tests/` linked from the repository, so relative paths on the page mean what they mean for
a reader at the repository root). The only changes made to a command are listed here, each with
its reason:

- `run` and `quickstart` get `--set model.provider=sim --set model.sim.latency_scale=0`: the
  simulated model server instead of the embedded llama.cpp one (the pages' specs name the
  embedded model; its own integration test runs it);
- the page's vLLM judge at http://127.0.0.1:8000/v1 is a loopback judge server;
- ids only a real run has (a checkpoint id, an execution id prefix) are filled in from the run;
- `--no-progress` where a command takes it;
- the entries of `ABRIDGED` (a full validation is hours of CPU);
- commands in `NOT_RUN` are not run, each for the reason given there;
- a command whose output the page shows as `Error: ...` must fail with that error (numbers,
  digests and `…` cuts aside: the page's outputs come from its own data);
- `retrieval serve` runs in the background on a free port (the page's port is mapped to it for
  the page's later `curl`, which is sent with httpx and must answer the keys the page shows);
- the sentence-transformers models of `HUB_ENCODERS` (hub or local-folder models the reader
  has) are the embedded MiniLM encoder, with the page's own settings (no model hub here);
- a spec in `AS_WRITTEN` runs on its own model (one that needs no server), not on the simulator.

Runs that a page uses but another page makes (`runs/quickstart`, `runs/fork-study`, ...) and
files the reader is assumed to have (`my_forecasts.jsonl`; the FlashRAG files of
tests/docs/page_files.py; a spec a page shows in a yaml block starting `# NAME`) are made first,
by `PREREQUISITES` and `FILES`. The public files of docs/data.md are the reader's `data/` folder:
a link to the developers' copy, and the commands reading them are left out where there is none
(`NEEDS_SHARED_DATA`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from typer.testing import CliRunner

from tests.conftest import REPO
from tests.docs.page_files import FLASHRAG_FILES, write_shown_file
from tests.docs.page_servers import PageServers
from tests.docs.shell import branchpoint_args, logical_lines, shell_blocks, split_commands
from tests.evaluation.fake_openai import chat_body

#: Only blocks that say they are shell commands are run (an unlabelled block is a listing).
RUN_LANGUAGES = {"bash", "sh", "shell", "console"}
#: The model every `run` and `quickstart` of a page runs on.
SIM_MODEL = ["--set", "model.provider=sim", "--set", "model.sim.latency_scale=0"]
#: The LLM judge the pages point at (a vLLM server on the reader's machine).
PAGE_JUDGE_URL = "http://127.0.0.1:8000/v1"
#: Commands that take --no-progress.
WITH_PROGRESS = {"run", "quickstart", "fork", "replay", "evaluate", "value", "augment"}

#: (pattern over the command as written, why it is not run). Every entry must match a command of
#: some page that is run (a stale entry fails `test_every_exception_is_used`).
NOT_RUN: list[tuple[str, str]] = [
    (
        r"^make (quickstart|test)$",
        "the two set-up commands: CI is `make test` itself, and tests/integration runs the quickstart "
        "on the embedded llama.cpp model",
    ),
]

#: Commands that read the public files of docs/data.md, which the pages place in `data/` in the
#: working directory: run where the developers' copy of those files is (`../shared/data` beside
#: the repository, linked as the workspace's `data/`), and left out (with the run folders they
#: make, and the commands reading those) where it is not.
NEEDS_SHARED_DATA = (r"(?<![\w./-])data/",)
SHARED_DATA = REPO.parent / "shared" / "data"
if not SHARED_DATA.is_dir():  # a worktree beside the main checkout: the development layout
    SHARED_DATA = Path("/work/shared/data")

#: Sentence-transformers models the pages name (from the hub, or a folder the reader has) -> the
#: embedded encoder the page's command runs with here; the page's settings (`--retrieval-method`,
#: prefixes, pooling) are kept, so each command's path (FlashRAG settings, the index checks) runs.
HUB_ENCODERS = {
    "st:intfloat/e5-base-v2": "minilm-onnx",
    "st:/models/e5-base-v2": "minilm-onnx",
    "st:BAAI/bge-base-en-v1.5": "minilm-onnx",
}

#: Specs a page runs on their own model, with why (no `SIM_MODEL` added).
AS_WRITTEN = {
    "langchain.yaml": "its model is LangChain's own fake chat model (GenericFakeChatModel), which needs no server",
}

#: (pattern, arguments added, why).
ABRIDGED: list[tuple[str, list[str], str]] = [
    (
        r"^branchpoint validate --profile over_searching ",
        ["--quick", "--studies", "1"],
        "the full validation is 40 whole studies (hours on 2 cores); one quick study of that profile and "
        "policy runs every check's code",
    ),
    (
        r"^branchpoint validate --quick --policy constrained ",
        ["--studies", "1"],
        "tests/validation/test_validate_mutants.py runs the quick constrained studies with every check",
    ),
    (
        r"^branchpoint augment .*--limit 2 --n 2",
        ["--limit", "1", "--n", "1"],
        "the embedded llama.cpp model writes each ~100-word document in about 20 s on 2 cores; one document "
        "runs the command's whole path on the real model (tests/retrieval/test_negative_evidence.py covers "
        "several questions and angles on a scripted model)",
    ),
    (
        r"^branchpoint validate --quick --mutants ",
        ["--studies", "1", "--mutant", "role labels swapped"],
        "tests/validation/test_validate_mutants.py plants every mutant in two quick studies and checks "
        "which check catches each",
    ),
]


@dataclass(frozen=True)
class DocCommand:
    """One simple command of a page's shell block, as written."""

    page: str
    line: int
    words: tuple[str, ...]
    #: What the page shows the command printed (a console block's lines under its prompt).
    shown: str = ""

    @property
    def shown_error(self) -> str | None:
        """The error the page shows the command ending with, if it shows one."""
        first = self.shown.splitlines()[0] if self.shown else ""
        return first if first.lower().startswith("error:") else None

    @property
    def text(self) -> str:
        return shlex.join(self.words)

    def where(self) -> str:
        return f"docs/{self.page}.md line {self.line}"


def page_commands(page: str) -> list[DocCommand]:
    """The commands of a page's shell blocks, in order."""
    path = REPO / "docs" / f"{page}.md"
    found = []
    for start, lang, body in shell_blocks(path.read_text(encoding="utf-8")):
        if lang not in RUN_LANGUAGES:
            continue
        outputs = console_outputs(start, body) if lang == "console" else {}
        for line in logical_lines(path, start, lang, body):
            commands = split_commands(line.text)
            for words in commands:
                shown = outputs.get(line.line, "") if len(commands) == 1 else ""
                found.append(DocCommand(page, line.line, tuple(words), shown))
    return found


def console_outputs(start: int, body: str) -> dict[int, str]:
    """A console block's output lines under each prompted command, by the command's first line."""
    outputs: dict[int, list[str]] = {}
    current, continuing = None, False
    for offset, raw in enumerate(body.splitlines()):
        line = raw.rstrip()
        if continuing:
            continuing = line.endswith("\\")
        elif line.lstrip().startswith("$ "):
            current, continuing = start + offset, line.endswith("\\")
            outputs[current] = []
        elif current is not None:
            outputs[current].append(line)
    return {at: "\n".join(lines).strip() for at, lines in outputs.items()}


def _loose(text: str) -> str:
    """Text compared without what differs between the page's data and the test's: numbers,
    digests, whitespace (a terminal's wrapping)."""
    text = re.sub(r"\b[0-9a-f]{8,}\b", "#", text)
    text = re.sub(r"\d+(\.\d+)?", "#", text)
    return re.sub(r"\s+", "", text)


def shows_error(shown: str, output: str) -> bool:
    """Whether `output` holds the error `shown` (each part between the page's `…` cuts, in order)."""
    at = 0
    for part in filter(None, (_loose(p) for p in shown.split("…"))):
        found = _loose(output).find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


def not_run_reason(cmd: DocCommand) -> str | None:
    """Why a command is not run, or None when it is."""
    for pattern, why in NOT_RUN:
        if re.search(pattern, cmd.text):
            return why
    return None


def judge_reply(path: str, body: dict) -> tuple[int, dict]:
    """The loopback LLM judge: a label of the kind each judge prompt asks for, from the response
    (and the model list a client reads from `/models`, as from vLLM)."""
    if path.rstrip("/").endswith("/models"):
        return 200, {"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model"}]}
    prompt = body["messages"][-1]["content"]
    response = prompt.split("Response:")[-1].lower()
    if "Gold answers" in prompt:
        gold = prompt.split("Gold answers")[1].split("\n")[0].lower()
        words = [w for w in re.findall(r"\w+", gold) if len(w) > 3]
        label = "CORRECT" if any(w in response for w in words) else "INCORRECT"
    elif "Document:" in prompt:
        label = "POSITIVE"
    else:
        label = "ABSTAINED" if any(s in response for s in ("know", "cannot", "unknown")) else "ANSWERED"
    return 200, chat_body(f"LABEL: {label}")


@dataclass
class Workspace:
    """A reader's folder: `experiments/` and `tests/` of the repository, and what the pages write."""

    root: Path
    judge_url: str
    ran: list[str] = field(default_factory=list)
    servers: PageServers | None = None
    #: Commands left out for want of the public data, and the run folders they would have made.
    left_out: list[str] = field(default_factory=list)
    missing_runs: set[str] = field(default_factory=set)

    @classmethod
    def make(cls, tmp: Path, judge_url: str) -> Workspace:
        root = tmp / "ws"
        root.mkdir()
        for name in ("experiments", "tests"):
            (root / name).symlink_to(REPO / name)
        if SHARED_DATA.is_dir():
            (root / "data").symlink_to(SHARED_DATA)  # the reader's `data/` folder of docs/data.md
        return cls(root, judge_url, servers=PageServers(root))

    def close(self) -> None:
        """Stop what the page left serving."""
        if self.servers is not None:
            self.servers.stop()

    # -- running ---------------------------------------------------------------------------
    def invoke(self, args: list[str], where: str = "", error: str | None = None) -> str:
        """Run `branchpoint ARGS` in-process; fail with the command and its output unless it exits
        0 (or, given the page's `error`, unless it fails with that error)."""
        from branchpoint.cli import app

        if args and args[0] in WITH_PROGRESS:
            args = [*args, "--no-progress"]
        result = CliRunner().invoke(app, args, catch_exceptions=True)
        self.ran.append(shlex.join(args))
        if error is not None:
            if result.exit_code == 0 or not shows_error(error, result.output):
                raise AssertionError(
                    f"{where}: branchpoint {shlex.join(args)} exited {result.exit_code}; the page shows it "
                    f"failing with\n{error}\nbut it printed\n{result.output}"
                )
            return result.output
        if result.exit_code != 0:
            detail = result.output
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                import traceback

                detail += "".join(traceback.format_exception(result.exception))
            raise AssertionError(f"{where}: branchpoint {shlex.join(args)} exited {result.exit_code}\n{detail}")
        return result.output

    def run_command(self, cmd: DocCommand) -> str | None:
        """Run one page command with the changes the module docstring lists (None: left out for
        want of the shared data)."""
        args = branchpoint_args(list(cmd.words))
        if args is None and cmd.words[0] == "curl" and self.servers is not None:
            return self.servers.curl(list(cmd.words), cmd.shown, cmd.where())
        if args is None:
            raise AssertionError(f"{cmd.where()}: not a branchpoint command and not in NOT_RUN: {cmd.text}")
        if not SHARED_DATA.is_dir() and self.needs_shared_data(cmd, args):
            self.left_out.append(f"{cmd.where()}: {cmd.text}")
            self.missing_runs.update(_runs_named(args))  # what it would have written, or read
            return None
        for run_dir in self.referenced_runs(args):
            self.prepare(run_dir)
        for name, maker in FILES.items():
            if name in args:
                maker(self)
        for name, flashrag in FLASHRAG_FILES.items():
            if name in args:
                flashrag(self.root)
        for name in AS_WRITTEN:
            if name in args and not (self.root / name).exists():
                write_shown_file(REPO / "docs" / f"{cmd.page}.md", name, self.root)
        args = [HUB_ENCODERS.get(a, self.fill(a)) for a in args]
        if args[0] in ("run", "quickstart") and not any(a in AS_WRITTEN for a in args):
            args += SIM_MODEL
        for pattern, extra, _why in ABRIDGED:
            if re.search(pattern, cmd.text):
                args += extra
        if args[:2] == ["retrieval", "serve"] and self.servers is not None:
            if cmd.shown_error is None:
                return self.servers.serve(args, cmd.where())
            output = self.servers.refused(args, cmd.where())  # a subprocess: one that serves is stopped
            if not shows_error(cmd.shown_error, output):
                raise AssertionError(f"{cmd.where()}: the page shows\n{cmd.shown_error}\nbut it printed\n{output}")
            return output
        return self.invoke(args, cmd.where(), cmd.shown_error)

    def needs_shared_data(self, cmd: DocCommand, args: list[str]) -> bool:
        if any(re.search(p, cmd.text) for p in NEEDS_SHARED_DATA):
            return True
        return any(run in self.missing_runs for run in _runs_named(args))

    def referenced_runs(self, args: list[str]) -> list[str]:
        """The run folders (`runs/NAME`) a command reads, whether written alone, after `=` or in a list."""
        written = {args[i + 1].rstrip("/") for i, a in enumerate(args[:-1]) if a == "--out"}
        return [run for run in _runs_named(args) if run in PREREQUISITES and run not in written]

    def prepare(self, run_dir: str) -> None:
        """Make a run another page makes, unless it is there."""
        if (self.root / run_dir / "spec.yaml").is_file():
            return
        for args in PREREQUISITES[run_dir]:
            for needed in self.referenced_runs(args):
                if needed != run_dir:
                    self.prepare(needed)
            self.invoke([*args, *SIM_MODEL] if args[0] in ("run", "quickstart") else args, f"prerequisite {run_dir}")

    # -- placeholders ----------------------------------------------------------------------
    def fill(self, arg: str) -> str:
        if arg == PAGE_JUDGE_URL:
            return self.judge_url
        return PLACEHOLDERS[arg](self) if arg in PLACEHOLDERS else arg

    def saved_state(self, run_dir: str = "runs/quickstart") -> dict:
        """A saved `initial` state of a searching execution of a run (what a reader picks from
        `checkpoints ls`)."""
        out = self.invoke(["checkpoints", "ls", run_dir, "--json"], "checkpoints ls")
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        rows = [r for r in rows if r.get("condition", {}).get("agent.search", True)]
        assert rows, f"{run_dir}: no saved states"
        return next((r for r in rows if r["boundary"] == "initial"), rows[0])


def _runs_named(args: list[str]) -> list[str]:
    """The run folders (`runs/NAME`) a command names, alone, after `=` or in a comma list."""
    found = []
    for arg in args[1:]:
        for part in re.split(r"[=,]", arg):
            m = re.match(r"(runs/[^/]+)", part)
            if m:
                found.append(m.group(1))
    return found


def _shortest_unique_prefix(value: str, others: list[str], at_least: int = 4) -> str:
    for n in range(at_least, len(value) + 1):
        if sum(o.startswith(value[:n]) for o in others) == 1:
            return value[:n]
    return value


def _execution_prefix(ws: Workspace) -> str:
    state = ws.saved_state()
    ids = [json.loads(line)["execution_id"] for line in (ws.root / "runs/quickstart/executions.jsonl").open()]
    return _shortest_unique_prefix(state["execution_id"], ids)


def _checkpoint_end(ws: Workspace) -> str:
    return ws.saved_state()["checkpoint_id"][-12:]


#: Ids the pages write as examples, and how a reader would find real ones.
PLACEHOLDERS: dict[str, Callable[[Workspace], str]] = {
    "3e1f0a9b2c4d": _checkpoint_end,  # the shown end of a checkpoint id (`checkpoints ls`)
    "3f2a": _execution_prefix,  # an execution id prefix
}


def _write_forecasts(ws: Workspace) -> None:
    """`my_forecasts.jsonl`: a reader's forecast for every saved state the fork study forked."""
    path = ws.root / "my_forecasts.jsonl"
    if path.exists():
        return
    states = {}
    for line in (ws.root / "runs/fork-study/forks.jsonl").open():
        parent = json.loads(line).get("parent") or {}
        states[(parent["execution_id"], parent["checkpoint_id"])] = parent.get("boundary")
    with path.open("w") as f:
        for (execution_id, checkpoint_id), boundary in sorted(states.items()):
            q_think = 0.3 if boundary == "initial" else 0.5
            f.write(
                json.dumps(
                    {
                        "parent_execution_id": execution_id,
                        "checkpoint_id": checkpoint_id,
                        "q_think": q_think,
                        "q_search": 0.6,
                    }
                )
                + "\n"
            )


def _write_audit_sample(ws: Workspace) -> None:
    """`audit_sample.jsonl`: a reader's sampled audit of the fork study's questions (every third
    flagged, π = 1; the others sampled with π = 0.25) and its source-support verdicts."""
    path = ws.root / "audit_sample.jsonl"
    if path.exists():
        return
    questions = sorted({json.loads(line)["question_id"] for line in (ws.root / "runs/fork-study/forks.jsonl").open()})
    with path.open("w") as f:
        for i, qid in enumerate(questions):
            row = {"question_id": qid, "inclusion": 1.0 if i % 3 == 0 else 0.25, "source_supported": i % 4 != 0}
            f.write(json.dumps(row) + "\n")


#: Files a page assumes the reader has, and how they are made.
FILES: dict[str, Callable[[Workspace], None]] = {
    "my_forecasts.jsonl": _write_forecasts,
    "audit_sample.jsonl": _write_audit_sample,
}

_FORK = ["run", "experiments/fork_study.yaml"]
_TWO_ACTIONS = ["--set", "fork.actions=[THINK, SEARCH]", "--set", "fork.minimal_search=false"]
#: Runs a page reads that another page (or the reader's own study) makes, as `branchpoint` args.
PREREQUISITES: dict[str, list[list[str]]] = {
    "runs/quickstart": [["quickstart"]],
    "runs/fork-study": [_FORK],
    # the three-pair composition's four fork studies on the same questions: actor A or B (two
    # simulator profiles), source X or Y (the demo corpus whole or cut into 40-word chunks)
    **{
        f"runs/{actor}-on-{source}": [
            [
                *_FORK,
                "--out",
                f"runs/{actor}-on-{source}",
                "--set",
                f"model.sim.profile={'instruct' if actor == 'a' else 'over_searching'}",
                "--set",
                f"retrieval.default={'demo' if source == 'x' else 'demo_chunks'}",
                *_TWO_ACTIONS,
            ]
        ]
        for actor in ("a", "b")
        for source in ("x", "y")
    },
}
